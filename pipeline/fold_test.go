package pipeline

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
	"github.com/regent-mq/regent/test/foldref"
)

func event(e foldref.Event, i int) Event {
	return Event{Data: json.RawMessage(fmt.Sprintf(`{"key":%q,"ts":%d,"amount":%d}`, e.Key, e.TS, e.Amount)),
		TransactionID: "t" + strconv.Itoa(i), CreatedAt: time.UnixMilli(e.TS)}
}

func dur(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

// store is an in-memory state table that applies cycles as the broker
// does, preconditions included: the rows of one cycle share its
// updated_at.
type store struct {
	t    *testing.T
	rows map[string]Row
	n    int
}

func (s *store) read() []Row {
	var rows []Row
	for _, r := range s.rows {
		rows = append(rows, r)
	}
	return rows
}

func (s *store) apply(ops []StateOp) (updatedAt string) {
	s.t.Helper()
	s.n++
	at := strconv.Itoa(s.n)
	for _, op := range ops {
		r, ok := s.rows[op.Key]
		switch {
		case op.IfUpdatedAt != "" && (!ok || r.UpdatedAt != op.IfUpdatedAt):
			s.t.Fatalf("op %s %q names updated_at %q, the row has %q (present %v)", op.Type, op.Key, op.IfUpdatedAt, r.UpdatedAt, ok)
		case op.IfUpdatedAt == "" && ok:
			s.t.Fatalf("op %s %q on a row that was read carries no if_updated_at", op.Type, op.Key)
		}
		if op.Type == "delete" {
			delete(s.rows, op.Key)
			continue
		}
		s.rows[op.Key] = Row{Key: op.Key, Value: op.Value, UpdatedAt: at}
	}
	return at
}

// runFold folds events in random batches, each from the state the last
// cycle left, then flushes, and returns every window emitted. With keep,
// a batch is folded at random into the shard the last cycle committed
// (Shard.Committed), as a worker that keeps the lease does, or into the
// state read again.
func runFold(t *testing.T, p *Program, events []foldref.Event, rng *rand.Rand, keep bool) (map[string]foldref.Window, Counts) {
	t.Helper()
	st := &store{t: t, rows: map[string]Row{}}
	got := map[string]foldref.Window{}
	var total Counts
	scope := Scope{QueryID: "q", PartitionID: "pid", Partition: "p0", Sink: "sink"}
	collect := func(s *Shard, pushes []Push) {
		total.In += s.In
		total.Late += s.Late
		total.Failed += s.Failed
		total.Emitted += s.Emitted
		for _, e := range s.Errors {
			t.Errorf("evaluation error: %v", e)
		}
		for _, pu := range pushes {
			var o foldref.Window
			if err := json.Unmarshal(pu.Payload, &o); err != nil {
				t.Fatal(err)
			}
			id := o.ID()
			if _, twice := got[id]; twice {
				t.Errorf("window %s emitted twice", id)
			}
			got[id] = o
		}
	}
	now := time.Now()
	var held *Shard
	for i := 0; i < len(events); {
		n := min(1+rng.IntN(40), len(events)-i)
		batch := make([]Event, n)
		for j := range n {
			batch[j] = event(events[i+j], i+j)
		}
		s := held
		if s == nil || rng.IntN(3) == 0 {
			var err error
			if s, err = p.NewShard(scope, st.read()); err != nil {
				t.Fatal(err)
			}
		}
		s.Fold(batch)
		ops, pushes, err := s.Commit(&now)
		if err != nil {
			t.Fatal(err)
		}
		at := st.apply(ops)
		collect(s, pushes)
		if keep {
			s.Committed(at)
			held = s
		}
		i += n
	}
	s, err := p.NewShard(scope, st.read())
	if err != nil {
		t.Fatal(err)
	}
	s.Flush(time.UnixMilli(1 << 50))
	ops, pushes, err := s.Commit(nil)
	if err != nil {
		t.Fatal(err)
	}
	st.apply(ops)
	collect(s, pushes)
	if len(st.rows) != 1 {
		t.Errorf("%d state rows after the final flush, want the clock row only", len(st.rows))
	}
	return got, total
}

// streamOf is per-key ordered events with some disorder and some events
// far behind the watermark.
func streamOf(rng *rand.Rand, n int) []foldref.Event {
	keys := []string{"acme", "globex", "initech"}
	var out []foldref.Event
	ts := int64(1_760_000_000_000)
	for range n {
		ts += int64(rng.IntN(4000))
		e := foldref.Event{Key: keys[rng.IntN(len(keys))], TS: ts - int64(rng.IntN(3000)), Amount: int64(rng.IntN(200) - 20)}
		if rng.IntN(50) == 0 {
			e.TS -= 600_000 // late by far
		}
		out = append(out, e)
	}
	return out
}

func checkAgainstReference(t *testing.T, w v1.Window) {
	t.Helper()
	checkFolds(t, w, false)
}

// checkFolds compares the fold of random streams in random batches with
// the reference fold; with keep, the shards are kept across cycles.
func checkFolds(t *testing.T, w v1.Window, keep bool) {
	p, err := Compile(foldref.Pipeline(w))
	if err != nil {
		t.Fatal(err)
	}
	lates, windows := 0, 0
	defer func() {
		if lates == 0 || windows < 100 {
			t.Errorf("the streams gave %d late events and %d windows: they test nothing", lates, windows)
		}
	}()
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		events := streamOf(rng, 400)
		want, lateIdx := foldref.Fold(w, 0, events)
		late := len(lateIdx)
		got, counts := runFold(t, p, events, rng, keep)
		if counts.Late != late || counts.In != len(events) {
			t.Fatalf("seed %d: %d events in, %d late; want %d, %d", seed, counts.In, counts.Late, len(events), late)
		}
		lates, windows = lates+late, windows+len(want)
		if len(got) != len(want) {
			t.Fatalf("seed %d: %d windows emitted, want %d", seed, len(got), len(want))
		}
		for id, o := range want {
			if got[id] != o {
				t.Fatalf("seed %d: window %s\n got %+v\nwant %+v", seed, id, got[id], o)
			}
		}
	}
}

func TestTumblingWindowsEqualTheReferenceFoldInAnyBatching(t *testing.T) {
	checkAgainstReference(t, v1.Window{Type: v1.WindowTumbling, Size: dur(10 * time.Second)})
}

func TestTumblingWindowsWithAllowedLatenessEqualTheReferenceFold(t *testing.T) {
	checkAgainstReference(t, v1.Window{Type: v1.WindowTumbling, Size: dur(10 * time.Second), AllowedLateness: dur(5 * time.Second)})
}

func TestSlidingWindowsEqualTheReferenceFoldInAnyBatching(t *testing.T) {
	checkAgainstReference(t, v1.Window{Type: v1.WindowSliding, Size: dur(15 * time.Second), Slide: dur(5 * time.Second), AllowedLateness: dur(2 * time.Second)})
}

func TestSessionWindowsEqualTheReferenceFoldInAnyBatching(t *testing.T) {
	checkAgainstReference(t, v1.Window{Type: v1.WindowSession, Gap: dur(3 * time.Second), AllowedLateness: dur(1 * time.Second)})
}

// A worker that keeps a partition's lease keeps its shard across cycles
// (Shard.Committed): each window kind folds as the state read again
// would, every op naming the updated_at its row was written with.
func TestAShardKeptAcrossItsCyclesFoldsAsTheStateReadAgain(t *testing.T) {
	for _, w := range []v1.Window{
		{Type: v1.WindowTumbling, Size: dur(10 * time.Second), AllowedLateness: dur(5 * time.Second)},
		{Type: v1.WindowSliding, Size: dur(15 * time.Second), Slide: dur(5 * time.Second), AllowedLateness: dur(2 * time.Second)},
		{Type: v1.WindowSession, Gap: dur(3 * time.Second), AllowedLateness: dur(1 * time.Second)},
	} {
		t.Run(string(w.Type), func(t *testing.T) { checkFolds(t, w, true) })
	}
}
