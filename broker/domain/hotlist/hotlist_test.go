package hotlist

import (
	"sync"
	"sync/atomic"
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
	cs, _ := l.Candidates(q, "g", 5, time.Now(), uuid.Nil)
	require.Equal(t, []uuid.UUID{p}, IDs(cs))
	l.Mark(q, p) // a push lands while the pop found the partition empty
	l.Settle(q, "g", cs[0], Empty, time.Time{})
	cs, _ = l.Candidates(q, "g", 5, time.Now(), uuid.Nil)
	require.Equal(t, []uuid.UUID{p}, IDs(cs), "the lost wake-up")
	l.Settle(q, "g", cs[0], Empty, time.Time{})
	cs, _ = l.Candidates(q, "g", 5, time.Now(), uuid.Nil)
	require.Empty(t, cs)
}

func TestADrainedGroupKeepsNoEntryAndAMarkBringsOneBack(t *testing.T) {
	l := New()
	q := uuid.New()
	ps := make([]uuid.UUID, 1000)
	for i := range ps {
		ps[i] = uuid.New()
	}
	l.Seed(q, "g", ps)
	for left := len(ps); left > 0; {
		cs, _ := l.Candidates(q, "g", 5, time.Now(), uuid.Nil)
		require.NotEmpty(t, cs, "%d entries left", left)
		for _, c := range cs {
			l.Settle(q, "g", c, Empty, time.Time{})
			left--
		}
		if left > 0 {
			require.Positive(t, l.Entries(q, "g"))
		}
	}
	require.Zero(t, l.Entries(q, "g"), "a queue drained for good holds no memory for its partitions")

	w := l.Wait(q, "g", uuid.Nil)
	defer w.Leave()
	l.Mark(q, ps[7])
	<-w.C()
	cs, _ := l.Candidates(q, "g", 5, time.Now(), w.Take())
	require.Equal(t, []uuid.UUID{ps[7]}, IDs(cs))
}

func TestAMarkReachesEveryGroupOfTheQueue(t *testing.T) {
	l := New()
	q, p := uuid.New(), uuid.New()
	l.Seed(q, "a", nil)
	l.Seed(q, "b", nil)
	l.Mark(q, p)
	for _, g := range []string{"a", "b"} {
		cs, _ := l.Candidates(q, g, 5, time.Now(), uuid.Nil)
		require.Equal(t, []uuid.UUID{p}, IDs(cs), g)
	}
}

func TestBusyEntriesWaitUntilTheirLeaseExpires(t *testing.T) {
	l := New()
	q, p := uuid.New(), uuid.New()
	l.Seed(q, "g", []uuid.UUID{p})
	now := time.Now()
	cs, _ := l.Candidates(q, "g", 5, now, uuid.Nil)
	l.Settle(q, "g", cs[0], Busy, now.Add(time.Minute))
	cs, due := l.Candidates(q, "g", 5, now, uuid.Nil)
	require.Empty(t, cs)
	require.Equal(t, now.Add(time.Minute), due)
	cs, _ = l.Candidates(q, "g", 5, now.Add(2*time.Minute), uuid.Nil)
	require.Len(t, cs, 1)
	l.Mark(q, p) // the ack that released it
	cs, _ = l.Candidates(q, "g", 5, now, uuid.Nil)
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
	first, _ := l.Candidates(q, "g", 2, time.Now(), uuid.Nil)
	second, _ := l.Candidates(q, "g", 2, time.Now(), uuid.Nil)
	require.NotEqual(t, IDs(first)[0], IDs(second)[0], "consumers start at different partitions")
	// Removing and re-adding many times never duplicates a partition.
	for i := 0; i < 100; i++ {
		cs, _ := l.Candidates(q, "g", 4, time.Now(), uuid.Nil)
		for _, c := range cs {
			l.Settle(q, "g", c, Empty, time.Time{})
		}
		for _, p := range ps {
			l.Mark(q, p)
		}
	}
	cs, _ := l.Candidates(q, "g", 10, time.Now(), uuid.Nil)
	require.ElementsMatch(t, ps, IDs(cs))
}

// woken reports whether w has been woken, without waiting.
func woken(w *Waiter) bool {
	select {
	case <-w.C():
		return true
	default:
		return false
	}
}

func TestAMarkWakesExactlyOnePopPerGroupInArrivalOrder(t *testing.T) {
	l := New()
	q, p1, p2 := uuid.New(), uuid.New(), uuid.New()
	l.Seed(q, "a", nil)
	l.Seed(q, "b", nil)
	a1, a2 := l.Wait(q, "a", uuid.Nil), l.Wait(q, "a", uuid.Nil)
	b1 := l.Wait(q, "b", uuid.Nil)
	l.Mark(q, p1)
	require.True(t, woken(a1), "the first pop in line of each group")
	require.True(t, woken(b1))
	require.False(t, woken(a2), "one pop per group: at most one can lease the partition")
	require.Equal(t, p1, a1.Take(), "woken for the partition of the mark")
	l.Mark(q, p2)
	require.True(t, woken(a2))
	require.Equal(t, p2, a2.Take())
}

func TestNMarksWakeNPops(t *testing.T) {
	l := New()
	q := uuid.New()
	l.Seed(q, "g", nil)
	var ws []*Waiter
	for range 5 {
		ws = append(ws, l.Wait(q, "g", uuid.Nil))
	}
	ps := []uuid.UUID{uuid.New(), uuid.New(), uuid.New()}
	for _, p := range ps {
		l.Mark(q, p)
	}
	for i, w := range ws {
		require.Equal(t, i < len(ps), woken(w), "pop %d", i)
		if i < len(ps) {
			require.Equal(t, ps[i], w.Take())
		}
	}
}

// inLine returns a list with n pops in the line of (q, "g"), and a
// partition p of q.
func inLine(n int) (l *List, q, p uuid.UUID, ws []*Waiter) {
	l = New()
	q, p = uuid.New(), uuid.New()
	l.Seed(q, "g", nil)
	for range n {
		ws = append(ws, l.Wait(q, "g", uuid.Nil))
	}
	return l, q, p, ws
}

func TestAMarkOfAPartitionAlreadyWaitingForAPopWakesNoOther(t *testing.T) {
	l, q, p, ws := inLine(2)
	first, second := ws[0], ws[1]
	l.Mark(q, p)
	l.Mark(q, p) // the next push, or the announcement's echo
	require.True(t, woken(first))
	require.False(t, woken(second), "no more work: one pop can lease it")
	cs, _ := l.Candidates(q, "g", 5, time.Now(), first.Take())
	require.Equal(t, []uuid.UUID{p}, IDs(cs))
	l.Mark(q, p) // a push after the pop took it
	require.True(t, woken(second))
}

func TestACandidateReturnedUntriedWakesAPop(t *testing.T) {
	l := New()
	q, p1, p2 := uuid.New(), uuid.New(), uuid.New()
	l.Seed(q, "g", []uuid.UUID{p1, p2})
	cs, _ := l.Candidates(q, "g", 5, time.Now(), uuid.Nil)
	require.Len(t, cs, 2)
	w := l.Wait(q, "g", uuid.Nil)
	l.Settle(q, "g", cs[0], Claimed, time.Time{})
	l.Return(q, "g", cs[1:]) // the pop claimed the first and was done
	require.True(t, woken(w))
	require.Equal(t, cs[1].ID, w.Take())
}

func TestAPopThatLeavesWithoutUsingItsWakeUpPassesItToTheNext(t *testing.T) {
	l, q, p, ws := inLine(3)
	first, second, third := ws[0], ws[1], ws[2]
	l.Mark(q, p)
	require.True(t, woken(first))
	first.Leave() // it answered, or its timeout came, before it looked again
	require.True(t, woken(second), "the wake-up is not lost")
	require.Equal(t, p, second.Take(), "used: it looks again for it")
	second.Leave()
	require.False(t, woken(third), "a used wake-up is not passed on")
	third.Leave()
	l.Mark(q, p)
	require.False(t, woken(third), "a pop that left is out of line")
}

func TestAWakeUpIsNotPassedOnForAPartitionAnotherPopTook(t *testing.T) {
	l, q, p, ws := inLine(2)
	first, second := ws[0], ws[1]
	l.Mark(q, p)
	cs, _ := l.Candidates(q, "g", 5, time.Now(), uuid.Nil) // a pop on its way in
	require.Equal(t, []uuid.UUID{p}, IDs(cs))
	first.Leave()
	require.False(t, woken(second), "that pop tries it")
}

func TestAWokenPopTriesThePartitionOfItsMarkFirst(t *testing.T) {
	l := New()
	q := uuid.New()
	var ps []uuid.UUID
	for range 8 {
		ps = append(ps, uuid.New())
	}
	l.Seed(q, "g", ps)
	w := l.Wait(q, "g", uuid.Nil)
	l.Mark(q, ps[7]) // no pop has taken it since the seed: no wake-up
	require.False(t, woken(w))
	p := uuid.New()
	l.Mark(q, p)
	cs, _ := l.Candidates(q, "g", 3, time.Now(), w.Take())
	require.Len(t, cs, 3)
	require.Equal(t, p, cs[0].ID, "not where the rotation stands")
	require.NotContains(t, IDs(cs)[1:], p, "and only once")
}

func TestThePartitionAWokenPopTriesIsKeptFromTheOthersUntilItSettlesIt(t *testing.T) {
	l, q, p, ws := inLine(1)
	l.Mark(q, p)
	now := time.Now()
	cs, _ := l.Candidates(q, "g", 5, now, ws[0].Take())
	require.Equal(t, []uuid.UUID{p}, IDs(cs))
	others, due := l.Candidates(q, "g", 5, now, uuid.Nil)
	require.Empty(t, others, "the consumer whose ack woke the pop, coming back")
	require.Equal(t, now.Add(wokenHold), due, "a pop parked meanwhile looks again when the hold ends")
	later, _ := l.Candidates(q, "g", 5, now.Add(wokenHold), uuid.Nil)
	require.Equal(t, []uuid.UUID{p}, IDs(later), "wokenHold at most")
	l.Settle(q, "g", cs[0], Busy, time.Time{}) // found it locked: worth trying again at once
	again, _ := l.Candidates(q, "g", 5, now, uuid.Nil)
	require.Equal(t, []uuid.UUID{p}, IDs(again), "settled: no longer kept")
}

func TestAMarkWakesOnlyAPopThatCanTakeItsPartition(t *testing.T) {
	l := New()
	q, p1, p2 := uuid.New(), uuid.New(), uuid.New()
	route := l.Wait(q, "g", p1) // the partition route of p1
	any := l.Wait(q, "g", uuid.Nil)
	l.Mark(q, p2)
	require.False(t, woken(route))
	require.True(t, woken(any))
	l.Mark(q, p1)
	require.True(t, woken(route))
	route.Take()
	route = l.Wait(q, "g", p1) // parked again after its look
	l.Mark(q, p1)
	require.True(t, woken(route), "every push of its partition wakes it")
}

func TestSeedWakesOnePopPerPartitionItAdds(t *testing.T) {
	l := New()
	q, p1, p2 := uuid.New(), uuid.New(), uuid.New()
	ws := []*Waiter{l.Wait(q, "g", uuid.Nil), l.Wait(q, "g", uuid.Nil), l.Wait(q, "g", uuid.Nil)}
	require.True(t, l.Seed(q, "g", []uuid.UUID{p1, p2}))
	require.True(t, woken(ws[0]))
	require.True(t, woken(ws[1]))
	require.False(t, woken(ws[2]))
	require.False(t, l.Seed(q, "g", []uuid.UUID{p1, p2}), "nothing new")
	require.False(t, woken(ws[2]))
}

func TestForgetWakesEveryPopOfTheQueue(t *testing.T) {
	l := New()
	q := uuid.New()
	ws := []*Waiter{l.Wait(q, "a", uuid.Nil), l.Wait(q, "a", uuid.Nil), l.Wait(q, "b", uuid.New())}
	watch := l.Watch(q)
	l.Forget(q)
	for _, w := range ws {
		require.True(t, woken(w))
		require.Equal(t, uuid.Nil, w.Take(), "for no partition")
		w.Leave()
	}
	<-watch
}

func TestAMarkOfAnUnknownQueueWakesEveryPopOfAnUnknownQueue(t *testing.T) {
	l := New()
	u1, u2 := l.Wait(uuid.Nil, "g", uuid.Nil), l.Wait(uuid.Nil, "h", uuid.Nil)
	q := uuid.New()
	l.Mark(q, uuid.New())
	require.True(t, woken(u1))
	require.True(t, woken(u2))
	u1.Leave()
}

func TestWatchIsClosedByTheNextMarkWithoutTakingAWakeUp(t *testing.T) {
	l := New()
	q := uuid.New()
	l.Seed(q, "g", nil)
	w := l.Wait(q, "g", uuid.Nil)
	watch := l.Watch(q)
	l.Mark(q, uuid.New())
	<-watch
	require.True(t, woken(w))
}

// TestNoWakeUpIsLostUnderConcurrentMarksAndParks runs consumers that pop
// as the store does (in line before looking, the partition that woke them
// first, parked until woken) against producers that add messages and mark
// their partitions, with no reseed: a lost wake-up leaves messages that no
// parked consumer ever comes back for, and the test fails at its bound.
// Some consumers give up waiting (as at a timeout), which passes their
// wake-up on.
func TestNoWakeUpIsLostUnderConcurrentMarksAndParks(t *testing.T) {
	const producers, consumers, marks, partitions = 4, 8, 500, 16
	l := New()
	q := uuid.New()
	l.Seed(q, "g", nil)
	var ps []uuid.UUID
	for range partitions {
		ps = append(ps, uuid.New())
	}
	var mu sync.Mutex
	msgs := map[uuid.UUID]int{} // the database: messages per partition
	var consumed atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	for i := range producers {
		wg.Go(func() {
			for j := range marks {
				p := ps[(i*marks+j)%partitions]
				mu.Lock()
				msgs[p]++
				mu.Unlock()
				l.Mark(q, p)
			}
		})
	}
	for i := range consumers {
		wg.Go(func() {
			var prev *Waiter
			for parks := 0; ; {
				w := l.Wait(q, "g", uuid.Nil)
				cs, _ := l.Candidates(q, "g", 2, time.Now(), prev.Take())
				prev = w
				got := 0
				for i, c := range cs {
					mu.Lock()
					n := msgs[c.ID]
					delete(msgs, c.ID)
					mu.Unlock()
					if n > 0 { // auto-ack: the next look finds it empty
						l.Settle(q, "g", c, Claimed, time.Time{})
						l.Return(q, "g", cs[i+1:])
						got = n
						break
					}
					l.Settle(q, "g", c, Empty, time.Time{})
				}
				if got > 0 {
					prev.Leave() // the request ends; the consumer comes back
					prev = nil
					if consumed.Add(int64(got)) == producers*marks {
						close(done)
					}
					continue
				}
				if parks++; (i+parks)%7 == 0 {
					prev.Leave() // its timeout: the next request gets in line anew
					prev = nil
					continue
				}
				select {
				case <-w.C():
				case <-done:
					w.Leave()
					return
				case <-time.After(30 * time.Second):
					mu.Lock()
					left := len(msgs)
					mu.Unlock()
					t.Errorf("a parked consumer was not woken in 30 s; %d partitions hold messages", left)
					return
				}
			}
		})
	}
	wg.Wait()
	require.EqualValues(t, producers*marks, consumed.Load())
}

func TestApplyParsesNotifications(t *testing.T) {
	l := New()
	q, p := uuid.New(), uuid.New()
	l.Seed(q, "g", nil)
	require.Equal(t, uuid.Nil, l.apply(q.String()+":"+p.String()))
	cs, _ := l.Candidates(q, "g", 5, time.Now(), uuid.Nil)
	require.Len(t, cs, 1)
	require.Equal(t, q, l.apply(q.String()+":"))
	require.False(t, l.Seeded(q, "g"), "a deleted queue is forgotten")
	require.Equal(t, uuid.Nil, l.apply("garbage"))
}

func TestAPopThatTakesAPartitionOwedAWakeUpKeepsItFromTheOthers(t *testing.T) {
	l, q, p, ws := inLine(2)
	woke, next := ws[0], ws[1]
	l.Mark(q, p) // an ack released it: woke is woken for it
	now := time.Now()
	back, _ := l.Candidates(q, "g", 5, now, uuid.Nil) // the consumer that acked, back first
	require.Equal(t, []uuid.UUID{p}, IDs(back))
	other, _ := l.Candidates(q, "g", 5, now, uuid.Nil)
	require.Empty(t, other)
	cs, due := l.Candidates(q, "g", 5, now, woke.Take())
	require.Empty(t, cs, "the woken pop does not try it too")
	require.Equal(t, now.Add(wokenHold), due)
	require.False(t, woken(next))
	l.Return(q, "g", back) // it claimed elsewhere first
	require.True(t, woken(next), "the wake-up is owed again")
	cs, _ = l.Candidates(q, "g", 5, now, next.Take())
	require.Equal(t, []uuid.UUID{p}, IDs(cs))
}

func TestAReturnedCandidateWakesNoSecondPopBeforeThePopItWasHandedToHasLooked(t *testing.T) {
	l, q, p, ws := inLine(2)
	woke, next := ws[0], ws[1]
	l.Mark(q, p)
	now := time.Now()
	back, _ := l.Candidates(q, "g", 5, now, uuid.Nil)
	l.Return(q, "g", back)
	require.False(t, woken(next), "the pop woken for it is on its way")
	cs, _ := l.Candidates(q, "g", 5, now, woke.Take())
	require.Equal(t, []uuid.UUID{p}, IDs(cs), "and tries it")
}

// notOwed returns a list whose partition p of q is a candidate for every
// pop of (q, "g") without a wake-up owed for it: a pop found its row
// locked.
func notOwed(t *testing.T) (l *List, q, p uuid.UUID) {
	l = New()
	q, p = uuid.New(), uuid.New()
	l.Seed(q, "g", []uuid.UUID{p})
	cs, _ := l.Candidates(q, "g", 5, time.Now(), uuid.Nil)
	require.Equal(t, []uuid.UUID{p}, IDs(cs))
	l.Settle(q, "g", cs[0], Busy, time.Time{})
	return l, q, p
}

func TestACandidateOwedNoWakeUpWakesNoPopWhenReturned(t *testing.T) {
	l, q, p := notOwed(t)
	w := l.Wait(q, "g", uuid.Nil)
	cs, _ := l.Candidates(q, "g", 5, time.Now(), uuid.Nil)
	require.Equal(t, []uuid.UUID{p}, IDs(cs))
	l.Return(q, "g", cs)
	require.False(t, woken(w), "no new work: usually a partition leased since")
	again, _ := l.Candidates(q, "g", 5, time.Now(), uuid.Nil)
	require.Equal(t, []uuid.UUID{p}, IDs(again), "still a candidate for every pop that looks")
}

func TestAReturnedCandidateThatAnotherPopTookSinceWakesNoPop(t *testing.T) {
	l, q, p, ws := inLine(1)
	l.Mark(q, p)
	ws[0].Leave() // its timeout came first: nobody is on the way for it
	now := time.Now()
	first, _ := l.Candidates(q, "g", 5, now, uuid.Nil) // owed: kept from the others
	w := l.Wait(q, "g", uuid.Nil)
	second, _ := l.Candidates(q, "g", 5, now.Add(wokenHold), uuid.Nil) // once the hold is over
	require.Equal(t, []uuid.UUID{p}, IDs(second))
	l.Return(q, "g", first)
	require.False(t, woken(w), "the other pop tries it")
}

func TestALockedPartitionKeepsTheLeaseThatAnotherPopsClaimSettled(t *testing.T) {
	l, q, p := notOwed(t)
	now := time.Now()
	a, _ := l.Candidates(q, "g", 5, now, uuid.Nil)
	b, _ := l.Candidates(q, "g", 5, now, uuid.Nil)
	require.Equal(t, []uuid.UUID{p}, IDs(a))
	require.Equal(t, []uuid.UUID{p}, IDs(b), "two pops try it")
	lease := now.Add(time.Minute)
	l.Settle(q, "g", a[0], Claimed, lease)
	l.Settle(q, "g", b[0], Busy, time.Time{}) // it found the row locked by a's claim
	cs, due := l.Candidates(q, "g", 5, now, uuid.Nil)
	require.Empty(t, cs, "leased: no pop tries it until the lease ends or an ack marks it")
	require.Equal(t, lease, due)
}
