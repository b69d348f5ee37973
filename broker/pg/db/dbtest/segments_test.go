package dbtest_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/domain/segment"
	"github.com/regent-mq/regent/test/brokertest"
)

// frames makes n frames created at at(i), transaction ids from tx0, whose
// payloads are {"n": from+i}.
func frames(from, n int, at func(i int) time.Time) []segment.Frame {
	out := make([]segment.Frame, n)
	for i := range out {
		out[i] = segment.Frame{ID: uuid.New(), TransactionID: fmt.Sprint("tx", from+i), CreatedAt: at(i).UnixMicro(),
			Payload: fmt.Appendf(nil, `{"n": %d}`, from+i)}
	}
	return out
}

func TestAppendSegmentsStoresThemOneAfterAnotherAtTheNextOffset(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	b.PushN(t, q, "p", 0, 1)
	old := time.Now().Add(-3 * time.Hour)
	at := func(i int) time.Time { return old.Add(time.Duration(i) * time.Second) }
	require.NoError(t, b.DB.AppendSegments(t.Context(), b.Tenant, q, "p", frames(1, 2, at), frames(3, 1, at)))
	require.Error(t, b.DB.AppendSegments(t.Context(), b.Tenant, q, "none", frames(9, 1, at)))
	s := b.Stored(t, q)
	require.Equal(t, 3, s.Segments)
	require.EqualValues(t, 4, s.NextOffset)
	require.Equal(t, []int{0, 1, 2, 3}, b.Pop(t, "/api/v1/pop/queue/"+q+"/partition/p?batch=10&autoAck=true").Ns())
	r := b.Call(t, http.StatusOK, "GET", "/api/v1/messages/"+s.Partitions["p"]+"/tx2", nil).Map(t)
	require.Equal(t, map[string]any{"n": 2.0}, r["payload"], "found by its transaction id")
}

func TestSpreadGivesEachFrameAPartitionOfItsOwn(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	b.Call(t, http.StatusOK, "POST", "/api/v1/configure", map[string]any{"queue": q})
	now := time.Now()
	require.NoError(t, b.DB.Spread(t.Context(), b.Tenant, q, frames(0, 3, func(int) time.Time { return now })))
	require.Error(t, b.DB.Spread(t.Context(), b.Tenant, b.Q("none"), frames(0, 1, func(int) time.Time { return now })))
	s := b.Stored(t, q)
	require.Len(t, s.Partitions, 4, "configure's Default and p-1 to p-3")
	require.Equal(t, 3, s.Segments)
	require.Equal(t, []int{1}, b.Pop(t, "/api/v1/pop/queue/"+q+"/partition/p-2?batch=10&autoAck=true").Ns())
	r := b.Call(t, http.StatusOK, "GET", "/api/v1/messages/"+s.Partitions["p-3"]+"/tx2", nil).Map(t)
	require.Equal(t, map[string]any{"n": 2.0}, r["payload"])
}

func TestPlaceCursorsPutsAGroupOnEveryPartitionAndAnalyzeRuns(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	b.PushN(t, q, "a", 0, 2)
	b.PushN(t, q, "b", 0, 2)
	require.NoError(t, b.DB.PlaceCursors(t.Context(), b.Tenant, q, "g", 1))
	c := b.Cursors(t, q)
	require.Len(t, c, 2)
	for _, cur := range c {
		require.Equal(t, "g", cur.Group)
		require.EqualValues(t, 1, cur.Committed)
	}
	require.Equal(t, []int{1}, b.Pop(t, "/api/v1/pop/queue/"+q+"/partition/a?batch=10&autoAck=true&consumerGroup=g").Ns())
	require.NoError(t, b.DB.Analyze(t.Context()))
}
