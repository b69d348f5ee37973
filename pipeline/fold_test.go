package pipeline

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
)

// ev is a test event: its payload is {"key", "ts", "amount"}.
type ev struct {
	key    string
	ts     int64
	amount int64
}

func (e ev) event(i int) Event {
	return Event{Data: json.RawMessage(fmt.Sprintf(`{"key":%q,"ts":%d,"amount":%d}`, e.key, e.ts, e.amount)),
		TransactionID: "t" + strconv.Itoa(i), CreatedAt: time.UnixMilli(e.ts)}
}

// out is an emitted window, as the tests read it back.
type out struct {
	Key         string  `json:"key"`
	WindowStart string  `json:"windowStart"`
	WindowEnd   string  `json:"windowEnd"`
	Orders      int64   `json:"orders"`
	Revenue     float64 `json:"revenue"`
	Low         float64 `json:"low"`
	High        float64 `json:"high"`
	Mean        float64 `json:"mean"`
	First       int64   `json:"first"`
	Last        int64   `json:"last"`
}

func allAggregates() []v1.Aggregate {
	return []v1.Aggregate{{Name: "orders", Fn: v1.FnCount}, {Name: "revenue", Fn: v1.FnSum, Of: "payload.amount"},
		{Name: "low", Fn: v1.FnMin, Of: "payload.amount"}, {Name: "high", Fn: v1.FnMax, Of: "payload.amount"},
		{Name: "mean", Fn: v1.FnAvg, Of: "payload.amount"}, {Name: "first", Fn: v1.FnFirst, Of: "payload.amount"},
		{Name: "last", Fn: v1.FnLast, Of: "payload.amount"}}
}

func windowed(w v1.Window) v1.Pipeline {
	return v1.Pipeline{KeyBy: "payload.key", EventTime: "payload.ts", Window: &w, Aggregate: allAggregates()}
}

func dur(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

// refWindow is the reference fold's window.
type refWindow struct {
	key        string
	start, end int64
	events     []ev // in fold order
}

func (w *refWindow) out() out {
	o := out{Key: w.key, WindowStart: rfc3339(w.start), WindowEnd: rfc3339(w.end), Orders: int64(len(w.events))}
	firstTs, lastTs := int64(0), int64(0)
	for i, e := range w.events {
		a := float64(e.amount)
		o.Revenue += a
		if i == 0 || a < o.Low {
			o.Low = a
		}
		if i == 0 || a > o.High {
			o.High = a
		}
		if i == 0 || e.ts < firstTs {
			firstTs, o.First = e.ts, e.amount
		}
		if i == 0 || e.ts >= lastTs {
			lastTs, o.Last = e.ts, e.amount
		}
	}
	o.Mean = o.Revenue / float64(len(w.events))
	return o
}

// referenceFold is the plain fold the runtime must agree with: events one
// at a time, a watermark that is the largest event time seen, a window
// closed once its end plus the lateness is at or before the watermark, an
// event late when every window it belongs to is closed. It returns every
// window, closed or still open at the end, and the late count.
func referenceFold(w v1.Window, events []ev) (map[string]out, int) {
	size, slide, gap, lateness, _ := w.Durations()
	sz, sl, gp, lt := size.Milliseconds(), slide.Milliseconds(), gap.Milliseconds(), lateness.Milliseconds()
	var wm int64
	var all []*refWindow
	open := func(r *refWindow) bool { return r.end+lt > wm }
	find := func(key string, start int64) *refWindow {
		for _, r := range all {
			if r.key == key && r.start == start {
				return r
			}
		}
		return nil
	}
	late := 0
	for _, e := range events {
		placed := false
		switch w.Type {
		case v1.WindowTumbling, v1.WindowSliding:
			step := sz
			if w.Type == v1.WindowSliding {
				step = sl
			}
			first := e.ts - ((e.ts%step)+step)%step
			for start := first; start > e.ts-sz; start -= step {
				if start+sz+lt <= wm {
					continue
				}
				r := find(e.key, start)
				if r == nil {
					r = &refWindow{key: e.key, start: start, end: start + sz}
					all = append(all, r)
				}
				r.events = append(r.events, e)
				placed = true
			}
		case v1.WindowSession:
			lo, hi := e.ts, e.ts+gp
			var merged []*refWindow
			for _, r := range all {
				if r.key == e.key && open(r) && r.start < hi && lo < r.end {
					merged = append(merged, r)
				}
			}
			if len(merged) == 0 && hi+lt <= wm {
				break
			}
			// The events in the order the runtime folds them: the
			// earliest session's (when it starts at or before the event),
			// the event, then the later sessions' by start.
			slices.SortFunc(merged, func(a, b *refWindow) int { return int(a.start - b.start) })
			n := &refWindow{key: e.key, start: lo, end: hi}
			rest := merged
			if len(merged) > 0 && merged[0].start <= e.ts {
				n.events, rest = append(n.events, merged[0].events...), merged[1:]
			}
			n.events = append(n.events, e)
			for _, r := range rest {
				n.events = append(n.events, r.events...)
			}
			for _, r := range merged {
				n.start, n.end = min(n.start, r.start), max(n.end, r.end)
			}
			all = slices.DeleteFunc(all, func(r *refWindow) bool { return slices.Contains(merged, r) })
			all = append(all, n)
			placed = true
		}
		if !placed {
			late++
			continue
		}
		wm = max(wm, e.ts)
	}
	res := map[string]out{}
	for _, r := range all {
		res[r.key+"@"+rfc3339(r.start)] = r.out()
	}
	return res, late
}

// store is an in-memory state table that applies cycles as the broker
// does, preconditions included.
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

func (s *store) apply(ops []StateOp) {
	s.t.Helper()
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
		s.n++
		s.rows[op.Key] = Row{Key: op.Key, Value: op.Value, UpdatedAt: strconv.Itoa(s.n)}
	}
}

// runFold folds events in random batches, each from the state the last
// cycle left, then flushes, and returns every window emitted.
func runFold(t *testing.T, p *Program, events []ev, rng *rand.Rand) (map[string]out, Counts) {
	t.Helper()
	st := &store{t: t, rows: map[string]Row{}}
	got := map[string]out{}
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
			var o out
			if err := json.Unmarshal(pu.Payload, &o); err != nil {
				t.Fatal(err)
			}
			id := o.Key + "@" + o.WindowStart
			if _, twice := got[id]; twice {
				t.Errorf("window %s emitted twice", id)
			}
			got[id] = o
		}
	}
	now := time.Now()
	for i := 0; i < len(events); {
		n := min(1+rng.IntN(40), len(events)-i)
		batch := make([]Event, n)
		for j := range n {
			batch[j] = events[i+j].event(i + j)
		}
		s, err := p.NewShard(scope, st.read())
		if err != nil {
			t.Fatal(err)
		}
		s.Fold(batch)
		ops, pushes, err := s.Commit(&now)
		if err != nil {
			t.Fatal(err)
		}
		st.apply(ops)
		collect(s, pushes)
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
func streamOf(rng *rand.Rand, n int) []ev {
	keys := []string{"acme", "globex", "initech"}
	var out []ev
	ts := int64(1_760_000_000_000)
	for range n {
		ts += int64(rng.IntN(4000))
		e := ev{key: keys[rng.IntN(len(keys))], ts: ts - int64(rng.IntN(3000)), amount: int64(rng.IntN(200) - 20)}
		if rng.IntN(50) == 0 {
			e.ts -= 600_000 // late by far
		}
		out = append(out, e)
	}
	return out
}

func checkAgainstReference(t *testing.T, w v1.Window) {
	p, err := Compile(windowed(w))
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
		want, late := referenceFold(w, events)
		got, counts := runFold(t, p, events, rng)
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
