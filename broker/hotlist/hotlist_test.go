package hotlist

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/test/pgtest"
)

func TestMain(m *testing.M) { pgtest.MainNoLeaks(m) }

func TestAMarkAfterTheCandidateWasTakenKeepsTheEntry(t *testing.T) {
	l := New()
	q, p := uuid.New(), uuid.New()
	l.Seed(q, "g", nil)
	l.Mark(q, p)
	cs, _ := l.Candidates(q, "g", 5, time.Now())
	require.Equal(t, []uuid.UUID{p}, IDs(cs))
	l.Mark(q, p) // a push lands while the pop found the partition empty
	l.Settle(q, "g", cs[0], Empty, time.Time{})
	cs, _ = l.Candidates(q, "g", 5, time.Now())
	require.Equal(t, []uuid.UUID{p}, IDs(cs), "the lost wake-up")
	l.Settle(q, "g", cs[0], Empty, time.Time{})
	cs, _ = l.Candidates(q, "g", 5, time.Now())
	require.Empty(t, cs)
}

func TestAMarkReachesEveryGroupOfTheQueue(t *testing.T) {
	l := New()
	q, p := uuid.New(), uuid.New()
	l.Seed(q, "a", nil)
	l.Seed(q, "b", nil)
	l.Mark(q, p)
	for _, g := range []string{"a", "b"} {
		cs, _ := l.Candidates(q, g, 5, time.Now())
		require.Equal(t, []uuid.UUID{p}, IDs(cs), g)
	}
}

func TestBusyEntriesWaitUntilTheirLeaseExpires(t *testing.T) {
	l := New()
	q, p := uuid.New(), uuid.New()
	l.Seed(q, "g", []uuid.UUID{p})
	now := time.Now()
	cs, _ := l.Candidates(q, "g", 5, now)
	l.Settle(q, "g", cs[0], Busy, now.Add(time.Minute))
	cs, due := l.Candidates(q, "g", 5, now)
	require.Empty(t, cs)
	require.Equal(t, now.Add(time.Minute), due)
	cs, _ = l.Candidates(q, "g", 5, now.Add(2*time.Minute))
	require.Len(t, cs, 1)
	l.Mark(q, p) // the ack that released it
	cs, _ = l.Candidates(q, "g", 5, now)
	require.Len(t, cs, 1)
}

func TestCandidatesRotateAndStayUnique(t *testing.T) {
	l := New()
	q := uuid.New()
	var ps []uuid.UUID
	for i := 0; i < 4; i++ {
		ps = append(ps, uuid.New())
	}
	l.Seed(q, "g", ps)
	first, _ := l.Candidates(q, "g", 2, time.Now())
	second, _ := l.Candidates(q, "g", 2, time.Now())
	require.NotEqual(t, IDs(first)[0], IDs(second)[0], "consumers start at different partitions")
	// Removing and re-adding many times never duplicates a partition.
	for i := 0; i < 100; i++ {
		cs, _ := l.Candidates(q, "g", 4, time.Now())
		for _, c := range cs {
			l.Settle(q, "g", c, Empty, time.Time{})
		}
		for _, p := range ps {
			l.Mark(q, p)
		}
	}
	cs, _ := l.Candidates(q, "g", 10, time.Now())
	require.ElementsMatch(t, ps, IDs(cs))
}

func TestWaitIsClosedByTheNextMark(t *testing.T) {
	l := New()
	q := uuid.New()
	w := l.Wait(q)
	unknown := l.Wait(uuid.Nil)
	select {
	case <-w:
		t.Fatal("closed before any mark")
	default:
	}
	l.Mark(q, uuid.New())
	<-w
	l.Mark(uuid.New(), uuid.New())
	<-unknown
}

func TestApplyParsesNotifications(t *testing.T) {
	l := New()
	q, p := uuid.New(), uuid.New()
	l.Seed(q, "g", nil)
	require.Equal(t, uuid.Nil, l.apply(q.String()+":"+p.String()))
	cs, _ := l.Candidates(q, "g", 5, time.Now())
	require.Len(t, cs, 1)
	require.Equal(t, q, l.apply(q.String()+":"))
	require.False(t, l.Seeded(q, "g"), "a deleted queue is forgotten")
	require.Equal(t, uuid.Nil, l.apply("garbage"))
}
