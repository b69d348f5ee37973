package admin_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// What retention or eviction deleted stays deleted for a seek too
// (queue-admin-api.md §8: nothing below a partition's floor shows).
func TestSeekNeverMovesACursorBelowThePartitionsFloor(t *testing.T) {
	t.Parallel()
	b := start(t)
	push(t, b, "q", "Default", 0, 4)
	pop(t, b, "/api/v1/pop/queue/q?batch=10&autoAck=true&consumerGroup=g")
	_, err := b.Pool.Exec(t.Context(), `UPDATE queen.partitions SET floor_offset = 2`)
	require.NoError(t, err)
	call(t, b, http.StatusOK, "POST", "/api/v1/consumer-groups/g/queues/q/seek", map[string]any{"timestamp": "1970-01-01T00:00:00Z"})
	require.Equal(t, 2, b.Count(t, `SELECT committed FROM queen.cursors WHERE consumer_group = 'g'`))
	_, ns := pop(t, b, "/api/v1/pop/queue/q?batch=10&autoAck=true&consumerGroup=g")
	require.Equal(t, []int{2, 3}, ns)
}
