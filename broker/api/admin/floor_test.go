package admin_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/test/brokertest"
)

// What retention or eviction deleted stays deleted for a seek too
// (queue-admin-api.md §8: nothing below a partition's floor shows).
func TestSeekNeverMovesACursorBelowThePartitionsFloor(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	b.PushN(t, q, "Default", 0, 4)
	b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=10&autoAck=true&consumerGroup=g")
	b.RaiseFloor(t, q, 2)
	b.Call(t, http.StatusOK, "POST", "/api/v1/consumer-groups/g/queues/"+q+"/seek", map[string]any{"timestamp": "1970-01-01T00:00:00Z"})
	require.EqualValues(t, 2, b.Cursor(t, q).Committed)
	ns := b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=10&autoAck=true&consumerGroup=g").Ns()
	require.Equal(t, []int{2, 3}, ns)
}

// Nor do the counts, listings and lookups of the messages below it.
func TestNothingBelowAPartitionsFloorIsCountedListedOrFound(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	pushTx(t, b, "q", "p", "a", "b", "c", "d") // one segment
	b.RaiseFloor(t, "q", 2)
	pid := partitionID(t, b, "q", "p")

	m := b.Call(t, http.StatusOK, "GET", "/api/v1/resources/queues/q", nil).Map(t)
	require.Equal(t, map[string]any{"total": 2.0, "pending": 2.0, "processing": 0.0, "completed": 0.0, "failed": 0.0, "deadLetter": 0.0}, m["totals"])
	require.Equal(t, []string{"d", "c"}, txids(list(t, b, "").Messages))
	require.Equal(t, []string{"d", "c"}, txids(array(t, b.Call(t, http.StatusOK, "GET", "/api/v1/status/queues/q/messages", nil))))
	b.Call(t, http.StatusNotFound, "GET", "/api/v1/messages/"+pid+"/a", nil)
	b.Call(t, http.StatusOK, "GET", "/api/v1/messages/"+pid+"/c", nil)
	require.Equal(t, false, deleteMessage(t, b, pid, "b")["success"])
}
