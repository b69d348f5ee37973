package counters

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/test/pgtest"
)

func TestMain(m *testing.M) { pgtest.MainNoLeaks(m) }

func TestParkedLongPollsAreSampledIntoTheirQueuesMinute(t *testing.T) {
	t.Parallel()
	c := New()
	At(c, time.Date(2026, 5, 6, 12, 0, 0, 0, time.UTC))
	c.Park("default", "q", 1)
	c.Park("default", "q", 1)
	c.sampleParked()
	c.Park("default", "q", -1)
	c.sampleParked()
	c.Park("default", "q", -1)
	c.sampleParked()
	taken, _ := c.take()
	require.Len(t, taken, 1)
	for _, b := range taken {
		require.EqualValues(t, 3, b.n[ParkedSum], "2 then 1 then none")
	}
	require.Empty(t, c.parked, "a queue with nothing parked is forgotten")
}

// The counting call on the data path: one per push, pop or ack.
func BenchmarkAdd(b *testing.B) {
	c := New()
	b.ReportAllocs()
	for b.Loop() {
		c.Add("default", "orders", PushMessages, 1)
	}
}

func BenchmarkPoppedParallel(b *testing.B) {
	c := New()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c.Popped("default", "orders", 10, 100, 20)
		}
	})
}
