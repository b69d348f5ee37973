package queue_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/test/brokertest"
)

// TestPopWithoutWaitIs204OnlyWhenNoPartitionHasAMessage: a pop with
// wait=false answers 204 only when no partition of the queue holds a
// message visible to the group, however many partitions the hot list keeps
// as candidates after they were drained.
func TestPopWithoutWaitIs204OnlyWhenNoPartitionHasAMessage(t *testing.T) {
	t.Parallel()
	const partitions = 200
	for _, query := range []string{
		"batch=1",
		"batch=1&autoAck=true",
		"batch=7&partitions=3",
		"batch=10&partitions=10&autoAck=true",
	} {
		t.Run(query, func(t *testing.T) {
			t.Parallel()
			b := brokertest.Shared(t)
			q := b.Q("q")
			items := make([]map[string]any, partitions)
			for i := range items {
				items[i] = map[string]any{"queue": q, "partition": fmt.Sprintf("p%d", i), "payload": map[string]any{"n": i}}
			}
			b.Push(t, items...)
			seen := map[int]bool{}
			popUntil204(t, b, "/api/v1/pop/queue/"+q+"?wait=false&"+query, seen, partitions)
			require.Len(t, seen, partitions, "a pop answered 204 while messages waited")
			require.Nil(t, b.Pop(t, "/api/v1/pop/queue/"+q+"?wait=false&"+query))
		})
	}
}

// The same when the partitions that lead the hot list were drained behind
// its back, through the partition route, which settles no candidate.
func TestPopWithoutWaitIs204OnlyWhenNoPartitionHasAMessageAfterPartitionPops(t *testing.T) {
	t.Parallel()
	const partitions = 200
	b := brokertest.Shared(t)
	q := b.Q("q")
	seen := drainedThroughThePartitionRoute(t, b, partitions, partitions/2)
	popUntil204(t, b, "/api/v1/pop/queue/"+q+"?wait=false&autoAck=true", seen, partitions)
	require.Len(t, seen, partitions, "a pop answered 204 while messages waited")
}

// drainedThroughThePartitionRoute pushes message i-1 to partition p<i> of
// queue b.Q("q"), for i from 1 to partitions, once the queue-wide pop knows the
// queue, and pops the first drained of them through the partition route,
// which settles no candidate of the hot list. It returns the messages
// popped.
func drainedThroughThePartitionRoute(t *testing.T, b *brokertest.Broker, partitions, drained int) map[int]bool {
	t.Helper()
	q := b.Q("q")
	b.PushN(t, q, "p0", 0, 1)
	require.NotNil(t, b.Pop(t, "/api/v1/pop/queue/"+q+"?autoAck=true"), "the queue-wide pop knows the queue")
	items := make([]map[string]any, partitions)
	for i := range items {
		items[i] = map[string]any{"queue": q, "partition": fmt.Sprintf("p%d", i+1), "payload": map[string]any{"n": i}}
	}
	b.Push(t, items...)
	seen := map[int]bool{}
	for i := range drained {
		p := b.Pop(t, fmt.Sprintf("/api/v1/pop/queue/%s/partition/p%d?autoAck=true", q, i+1))
		require.NotNil(t, p)
		seen[p.Ns()[0]] = true
	}
	return seen
}

// popUntil204 pops path until it answers 204, at most n+1 times, and adds
// each message's number to seen, which must not hold it yet.
func popUntil204(t *testing.T, b *brokertest.Broker, path string, seen map[int]bool, n int) {
	t.Helper()
	for range n + 1 {
		p := b.Pop(t, path)
		if p == nil {
			return
		}
		for _, n := range p.Ns() {
			require.False(t, seen[n], "message %d delivered twice", n)
			seen[n] = true
		}
	}
	t.Fatalf("pop %s never answered 204", path)
}

// TestALongPollWhoseCandidatesWereAllDrainedLooksFurtherBeforeItParks: the
// hot list keeps partitions drained through the partition route as
// candidates until a pop finds them empty. A long-poll whose candidates
// are all such must look at the others before it parks: the push of the
// message waiting behind them woke no one, since no pop was parked then.
func TestALongPollWhoseCandidatesWereAllDrainedLooksFurtherBeforeItParks(t *testing.T) {
	t.Parallel()
	const drained = 40
	b := brokertest.Shared(t)
	q := b.Q("q")
	drainedThroughThePartitionRoute(t, b, drained, drained)
	b.PushN(t, q, "last", 1000, 1)
	p := b.Pop(t, "/api/v1/pop/queue/"+q+"?wait=true&timeout=5000&autoAck=true")
	require.NotNil(t, p, "the long-poll waited out its timeout beside a message")
	require.Equal(t, []int{1000}, p.Ns())
}
