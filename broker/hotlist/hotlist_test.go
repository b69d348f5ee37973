package hotlist

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func ids(cs []Candidate) []uuid.UUID {
	var out []uuid.UUID
	for _, c := range cs {
		out = append(out, c.ID)
	}
	return out
}

func TestAMarkAfterTheCandidateWasTakenKeepsTheEntry(t *testing.T) {
	l := New()
	q, p := uuid.New(), uuid.New()
	l.Seed(q, "g", nil)
	l.Mark(q, p)
	cs, _ := l.Candidates(q, "g", 5, time.Now())
	require.Equal(t, []uuid.UUID{p}, ids(cs))
	l.Mark(q, p) // a push lands while the pop found the partition empty
	l.Settle(q, "g", cs[0], Empty, time.Time{})
	cs, _ = l.Candidates(q, "g", 5, time.Now())
	require.Equal(t, []uuid.UUID{p}, ids(cs), "the lost wake-up")
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
		require.Equal(t, []uuid.UUID{p}, ids(cs), g)
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
	require.NotEqual(t, ids(first)[0], ids(second)[0], "consumers start at different partitions")
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
	require.ElementsMatch(t, ps, ids(cs))
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

func TestACandidateHandedToOnePopIsWithheldFromTheOthersUntilSettledOrReturned(t *testing.T) {
	l := New()
	q, a, b := uuid.New(), uuid.New(), uuid.New()
	l.Seed(q, "g", []uuid.UUID{a, b})
	now := time.Now()
	first, _ := l.Candidates(q, "g", 1, now)
	require.Len(t, first, 1)
	second, _ := l.Candidates(q, "g", 5, now)
	require.Len(t, second, 1, "the other pop gets the other partition only")
	require.NotEqual(t, first[0].ID, second[0].ID)
	none, due := l.Candidates(q, "g", 5, now)
	require.Empty(t, none, "both are being tried")
	require.Equal(t, now.Add(claimHold), due, "a parked pop wakes when the hold ends")

	l.Return(q, "g", first)
	back, _ := l.Candidates(q, "g", 5, now)
	require.Equal(t, ids(first), ids(back), "a returned candidate is worth trying at once")
	l.Settle(q, "g", back[0], Busy, time.Time{})
	again, _ := l.Candidates(q, "g", 5, now)
	require.Equal(t, ids(first), ids(again), "settled busy without a retry time: not deferred")

	l.Mark(q, second[0].ID) // new data while the pop that took it runs
	marked, _ := l.Candidates(q, "g", 5, now)
	require.Equal(t, ids(second), ids(marked))
	later, _ := l.Candidates(q, "g", 5, now.Add(claimHold))
	require.Len(t, later, 2, "a pop that never settled holds its candidates for claimHold at most")
}
