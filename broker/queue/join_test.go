package queue_test

import (
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/test/brokertest"
)

// metric reads one sample of the broker's /metrics (0 when absent).
func metric(t *testing.T, b *brokertest.Broker, sample string) float64 {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(sample) + ` (\S+)$`)
	m := re.FindSubmatch([]byte(b.Scrape(t)))
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	require.NoError(t, err)
	return v
}

// TestPushesThatWaitForACallJoinTheNextOne holds the partition's row, as a
// slow push would, so that the pushes sent meanwhile fill the calls in
// flight and the rest wait; once it is released, every push is stored, in
// one partition, at contiguous offsets, and some database call carried more
// than one request.
func TestPushesThatWaitForACallJoinTheNextOne(t *testing.T) {
	b := brokertest.Start(t)
	b.Push(t, map[string]any{"queue": "q", "payload": 0})
	tx, err := b.Pool.Begin(t.Context())
	require.NoError(t, err)
	defer tx.Rollback(t.Context()) //nolint:errcheck // released below; a no-op then
	_, err = tx.Exec(t.Context(), `SELECT FROM queen.partitions FOR UPDATE`)
	require.NoError(t, err)

	const n = 12
	done := make(chan []map[string]any, n)
	for i := range n {
		go func() {
			done <- b.Push(t, map[string]any{"queue": "q", "payload": i, "transactionId": fmt.Sprint("t", i)})
		}()
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		waiting := metric(t, b, `regent_join_waiting{kind="push"}`)
		locked := b.Count(t, `SELECT count(DISTINCT pid) FROM pg_locks WHERE NOT granted`)
		if waiting > 0 && int(waiting)+locked == n {
			break
		}
		require.False(t, time.Now().After(deadline), "%v pushes wait for a call and %d for the row, want %d in all", waiting, locked, n)
	}
	require.NoError(t, tx.Rollback(t.Context()))
	for range n {
		out := <-done
		require.Len(t, out, 1)
		require.Equal(t, "queued", out[0]["status"])
	}
	require.Equal(t, n+1, b.Count(t, `SELECT sum(frame_count) FROM queen.log_segments`))
	require.Equal(t, n+1, b.Count(t, `SELECT max(base_offset + frame_count) FROM queen.log_segments`), "offsets are contiguous")
	calls := metric(t, b, `regent_joined_requests_count{kind="push"}`)
	alone := metric(t, b, `regent_joined_requests_bucket{kind="push",le="1"}`)
	require.Less(t, alone, calls, "no call carried more than one push")
	require.Less(t, calls, float64(n+1), "every push had a call of its own")
}
