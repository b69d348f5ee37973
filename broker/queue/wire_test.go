package queue

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestAppendTimeWritesTimeFormatInUTC(t *testing.T) {
	us := time.Date(2026, 8, 17, 10, 1, 2, 3004000, time.UTC).UnixMicro()
	require.Equal(t, `"2026-08-17T10:01:02.003004Z"`, string(appendTime(nil, us)))
}
