package queue

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/pg/db"
)

func TestAppendTimeWritesTimeFormatInUTC(t *testing.T) {
	us := time.Date(2026, 8, 17, 10, 1, 2, 3004000, time.UTC).UnixMicro()
	require.Equal(t, `"2026-08-17T10:01:02.003004Z"`, string(appendTime(nil, us)))
}

func TestAckAnswerIsWhatEncodingJSONWrites(t *testing.T) {
	text := func(s string) *string { return &s }
	for _, out := range [][]db.AckResult{
		nil,
		{},
		{{Index: 0, TransactionID: "t-1", Success: true, QueueName: text("orders"), PartitionName: text("Default"), LeaseReleased: true}},
		{
			{Index: 7, TransactionID: "<a&b>\"\\\n\u2028\xff", Error: text("Message not found"), DLQ: true, Announce: true},
			{Index: 12, TransactionID: "ü", Success: true, Error: text(""), QueueName: text("q\t"), PartitionName: text("p/1"), QueueID: uuid.New()},
		},
	} {
		want, err := json.Marshal(out)
		require.NoError(t, err)
		require.Equal(t, string(want), string(appendAcks(nil, out)))
	}
}
