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
	release, err := b.DB.LockPartitions(t.Context(), b.Tenant, "q")
	require.NoError(t, err)
	defer release() //nolint:errcheck // released below; a no-op then

	const n = 12
	done := make(chan []map[string]any, n)
	for i := range n {
		go func() {
			done <- b.Push(t, map[string]any{"queue": "q", "payload": i, "transactionId": fmt.Sprint("t", i)})
		}()
	}
	brokertest.Eventually(t, 10*time.Second, func() error {
		waiting := metric(t, b, `regent_join_waiting{kind="push"}`)
		locked, err := b.DB.LockWaiters(t.Context())
		require.NoError(t, err)
		if waiting > 0 && int(waiting)+locked == n {
			return nil
		}
		return fmt.Errorf("%v pushes wait for a call and %d for the row, want %d in all", waiting, locked, n)
	})
	require.NoError(t, release())
	for range n {
		out := <-done
		require.Len(t, out, 1)
		require.Equal(t, "queued", out[0]["status"])
	}
	stored := b.Stored(t, "q")
	require.Equal(t, n+1, stored.Frames)
	require.EqualValues(t, n+1, stored.NextOffset, "offsets are contiguous")
	calls := metric(t, b, `regent_joined_requests_count{kind="push"}`)
	alone := metric(t, b, `regent_joined_requests_bucket{kind="push",le="1"}`)
	require.Less(t, alone, calls, "no call carried more than one push")
	require.Less(t, calls, float64(n+1), "every push had a call of its own")
}
