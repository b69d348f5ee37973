package streams

import (
	"encoding/json"
	"testing"

	"github.com/google/uuid"
)

func TestCycleAnswerIsWrittenAsEncodingJSONWritesIt(t *testing.T) {
	name, offset, id := "orders <&> \u2028 \"q\"", int64(4711), uuid.New()
	for _, r := range []cycleResponse{
		{QueryID: uuid.New(), PartitionID: uuid.New(), Error: "query not found", PushResults: []pushResult{}},
		{QueryID: uuid.New(), PartitionID: uuid.New(), Error: "invalid lease: \x01 \xff"},
		{Success: true, QueryID: uuid.New(), PartitionID: uuid.New(), QueueName: &name, StateOpsApplied: 3,
			PushResults: []pushResult{
				{Queue: "out", Partition: "Default", Status: "queued", BaseOffset: &offset, MessageID: &id, TransactionID: "t1"},
				{Status: "skipped"},
				{Queue: "out", Partition: "p", Status: "duplicate", MessageID: &id, TransactionID: "t\n2"},
			},
			AckResult: &ackResult{Success: true, Count: 50, LeaseReleased: true}},
	} {
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.appendJSON(nil); string(got) != string(want) {
			t.Errorf("answer\n%s\nwant\n%s", got, want)
		}
	}
}
