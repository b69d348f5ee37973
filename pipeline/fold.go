package pipeline

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/valyala/fastjson"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
)

// The state of a partition is one clock row and one row per open window,
// under keys that start with Prefix, so that one state/get returns them
// all. A window's key is Prefix, its start (RFC 3339) and its user key
// joined by U+001F, as the streams SDKs compose theirs.
const (
	sep    = "\u001f"
	Prefix = "pl" + sep
	// ClockKey is the partition's clock row: its watermark and when a fold
	// last committed.
	ClockKey = Prefix + "clock"
)

// Event is one source message.
type Event struct {
	Data          json.RawMessage
	TransactionID string
	CreatedAt     time.Time
}

// Row is a state row as /streams/v1/state/get returns it.
type Row struct {
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value"`
	UpdatedAt string          `json:"updated_at"`
}

// StateOp is an element of a cycle's state_ops. IfUpdatedAt, when set, is
// the updated_at the row had when it was read: the broker refuses the cycle
// if the row has changed or gone since.
type StateOp struct {
	Type        string          `json:"type"`
	Key         string          `json:"key"`
	Value       json.RawMessage `json:"value,omitempty"`
	IfUpdatedAt string          `json:"if_updated_at,omitempty"`
}

// Push is an element of a cycle's push_items.
type Push struct {
	Queue         string          `json:"queue"`
	Partition     string          `json:"partition"`
	Payload       json.RawMessage `json:"payload"`
	TransactionID string          `json:"transactionId"`
	// Output: the pipeline's output (a closed window, a stateless event),
	// which a table sink also gets as a row; not a late event.
	Output bool `json:"-"`
}

// Counts is what a fold did with its events.
type Counts struct {
	In, Filtered, Late, Failed, Emitted int
}

// Scope is where a shard's state and output belong.
type Scope struct {
	QueryID, PartitionID string
	Partition            string // the source partition's name, and the sink partition's
	Sink                 string
}

// Shard is one source partition's state for a program: what a state read
// returned, folded into, and turned into a cycle by Commit.
type Shard struct {
	p        *Program
	scope    Scope
	clock    clock
	foldedAt int64 // wall clock of the last fold cycle, ms
	clockAt  string
	// committing is the clock row that Commit last wrote.
	committing clockState
	wins       windows
	pushes     []Push
	parser     fastjson.Parser
	// The buffers of the sample Fold places: buffers of its own would
	// escape through windowKind.place, and be allocated at every call.
	ofs  []ref.Val
	nums []float64
	Counts
	// Errors are the first few evaluation errors, for the log.
	Errors []error
}

// clock is where a shard stands in event time. A window is closed once
// its end plus the allowed lateness is at or before the watermark: it is
// emitted and forgotten at the next Commit, and takes no more events.
type clock struct {
	watermark int64 // the largest event time folded (or flushed to)
	lateness  int64
}

func (c clock) closed(end int64) bool { return end+c.lateness <= c.watermark }

type clockState struct {
	Watermark int64 `json:"watermark"`
	FoldedAt  int64 `json:"foldedAt"`
}

type winState struct {
	Key         string     `json:"key"`
	WindowStart int64      `json:"windowStart"`
	WindowEnd   int64      `json:"windowEnd"`
	Aggs        []accState `json:"aggs"`
}

type accState struct {
	N int64   `json:"n"`
	V float64 `json:"v,omitempty"`
	T int64   `json:"t,omitempty"`
	X any     `json:"x,omitempty"`
}

// Stateful says whether the program has windows, and so state.
func (p *Program) Stateful() bool { return p.window != nil }

// NewShard builds a shard from a partition's state rows (all those under
// Prefix; none for a stateless program).
func (p *Program) NewShard(scope Scope, rows []Row) (*Shard, error) {
	s := &Shard{p: p, scope: scope, clock: clock{lateness: p.lateness}, wins: windows{aggs: p.aggs, byID: map[winID]*win{}},
		ofs: make([]ref.Val, 0, len(p.ofs)), nums: make([]float64, len(p.aggs))}
	for _, r := range rows {
		if r.Key == ClockKey {
			var c clockState
			if err := json.Unmarshal(r.Value, &c); err != nil {
				return nil, fmt.Errorf("state row %q: %w", r.Key, err)
			}
			s.clock.watermark, s.foldedAt, s.clockAt = c.Watermark, c.FoldedAt, r.UpdatedAt
			continue
		}
		var st winState
		if err := json.Unmarshal(r.Value, &st); err != nil {
			return nil, fmt.Errorf("state row %q: %w", r.Key, err)
		}
		if len(st.Aggs) != len(p.aggs) {
			return nil, fmt.Errorf("state row %q holds %d aggregates, the pipeline has %d: it was written by another pipeline", r.Key, len(st.Aggs), len(p.aggs))
		}
		w := &win{key: st.Key, start: st.WindowStart, end: st.WindowEnd, accs: make([]acc, len(st.Aggs)), updatedAt: r.UpdatedAt}
		for i, a := range st.Aggs {
			w.accs[i] = acc{n: a.N, v: a.V, t: a.T}
			if a.X != nil {
				w.accs[i].x = types.DefaultTypeAdapter.NativeToValue(a.X)
			} else {
				w.accs[i].x = types.NullValue
			}
		}
		s.wins.add(w)
	}
	return s, nil
}

// Watermark is the largest event time the partition has folded, or the
// wall clock of its last idle flush.
func (s *Shard) Watermark() int64 { return s.clock.watermark }

// FoldedAt is when (epoch ms, wall clock) a fold cycle last committed on
// the partition; 0 before the first.
func (s *Shard) FoldedAt() int64 { return s.foldedAt }

func (s *Shard) fail(err error) {
	s.Failed++
	if len(s.Errors) < 5 {
		s.Errors = append(s.Errors, err)
	}
}

// Fold folds events, in their order, into the shard.
func (s *Shard) Fold(events []Event) {
	p := s.p
	vars := &eventVars{parser: &s.parser, partition: types.String(s.scope.Partition)}
	ofs, nums := s.ofs, s.nums
	for i := range events {
		e := &events[i]
		s.In++
		*vars = eventVars{parser: vars.parser, data: e.Data, partition: vars.partition, txid: types.String(e.TransactionID),
			createdAt: types.Timestamp{Time: e.CreatedAt}}
		if p.filter != nil {
			ok, err := evalBool(p.filter, vars, "filter")
			if err != nil {
				s.fail(err)
				continue
			}
			if !ok {
				s.Filtered++
				continue
			}
		}
		key := s.scope.Partition
		if p.keyBy != nil {
			out, err := eval(p.keyBy, vars, "keyBy")
			if err != nil {
				s.fail(err)
				continue
			}
			k, ok := out.(types.String)
			if !ok {
				s.fail(fmt.Errorf("keyBy: got %s, want string", out.Type()))
				continue
			}
			key = string(k)
		}
		vars.key = types.String(key)
		if p.window == nil {
			s.emitEvent(e, vars)
			continue
		}
		ts := e.CreatedAt.UnixMilli()
		if p.eventTime != nil {
			out, err := eval(p.eventTime, vars, "eventTime")
			if err == nil {
				ts, err = millis(out)
			}
			if err != nil {
				s.fail(err)
				continue
			}
		}
		ofs = ofs[:0]
		var err error
		for _, prg := range p.ofs {
			var v ref.Val
			if v, err = eval(prg, vars, "of"); err != nil {
				break
			}
			ofs = append(ofs, v)
		}
		if err != nil {
			s.fail(err)
			continue
		}
		for j, a := range p.aggs {
			if a.fn == v1.FnSum || a.fn == v1.FnMin || a.fn == v1.FnMax || a.fn == v1.FnAvg {
				if nums[j], err = number(ofs[a.of]); err != nil {
					err = fmt.Errorf("aggregate %s: %w", a.name, err)
					break
				}
			}
		}
		if err != nil {
			s.fail(err)
			continue
		}
		if !p.window.place(&s.wins, key, sample{ts: ts, ofs: ofs, nums: nums}, s.clock) {
			s.Late++
			s.lateEvent(e)
			continue
		}
		s.clock.watermark = max(s.clock.watermark, ts)
	}
}

// Flush advances the watermark to the wall clock now, so that every
// window that has ended by now, lateness included, closes at the Commit
// that follows; events of those windows are late from then on.
func (s *Shard) Flush(now time.Time) {
	s.clock.watermark = max(s.clock.watermark, now.UnixMilli())
}

// Commit turns the shard into a cycle: the closed windows emitted (those
// having lets through) and deleted, the open windows folded into upserted,
// the late and stateless pushes, and the clock row. now stamps the clock
// as a fold's; nil leaves the last fold's time, as an idle flush does.
// Every op on a row that was read names the updated_at it was read with,
// and the clock row is written by every cycle, so two cycles that read the
// same state never both commit.
func (s *Shard) Commit(now *time.Time) ([]StateOp, []Push, error) {
	if !s.p.Stateful() {
		return nil, s.pushes, nil
	}
	var ops []StateOp
	for _, w := range s.wins.gone {
		ops = append(ops, StateOp{Type: "delete", Key: w.stateKey(), IfUpdatedAt: w.updatedAt})
	}
	for _, w := range s.wins.sorted(s.touched) {
		switch {
		case s.clock.closed(w.end):
			if w.updatedAt != "" {
				ops = append(ops, StateOp{Type: "delete", Key: w.stateKey(), IfUpdatedAt: w.updatedAt})
			}
			if err := s.emitWindow(w); err != nil {
				return nil, nil, err
			}
		case w.dirty:
			v, err := w.encode()
			if err != nil {
				return nil, nil, err
			}
			ops = append(ops, StateOp{Type: "upsert", Key: w.stateKey(), Value: v, IfUpdatedAt: w.updatedAt})
		}
	}
	c := clockState{Watermark: s.clock.watermark, FoldedAt: s.foldedAt}
	if now != nil {
		c.FoldedAt = now.UnixMilli()
	}
	s.committing = c
	v, _ := json.Marshal(c)
	ops = append(ops, StateOp{Type: "upsert", Key: ClockKey, Value: v, IfUpdatedAt: s.clockAt})
	return ops, s.pushes, nil
}

// Committed makes the shard the partition's state as the cycle of the last
// Commit left it, once that cycle committed, and its state rows were
// written with updatedAt: the closed windows forgotten, the folded ones
// stored, nothing left to push, and the counts at zero. A worker that
// keeps the partition's lease folds its next batch into it instead of
// reading the state again.
func (s *Shard) Committed(updatedAt string) {
	s.wins.gone = nil
	for _, w := range s.wins.byID {
		switch {
		case s.clock.closed(w.end):
			s.wins.forget(w)
		case w.dirty:
			w.dirty, w.updatedAt = false, updatedAt
		}
	}
	if s.p.Stateful() {
		s.foldedAt, s.clockAt = s.committing.FoldedAt, updatedAt
	}
	s.pushes, s.Counts, s.Errors = nil, Counts{}, nil
}

// touched says whether Commit writes w: it closed, or was folded into.
func (s *Shard) touched(w *win) bool { return w.dirty || s.clock.closed(w.end) }

func (w *win) stateKey() string { return Prefix + rfc3339(w.start) + sep + w.key }

func (w *win) encode() (json.RawMessage, error) {
	st := winState{Key: w.key, WindowStart: w.start, WindowEnd: w.end, Aggs: make([]accState, len(w.accs))}
	for i, c := range w.accs {
		st.Aggs[i] = accState{N: c.n, V: c.v, T: c.t}
		if c.x != nil {
			x, err := native(c.x)
			if err != nil {
				return nil, fmt.Errorf("window %s of %q: %w", rfc3339(w.start), w.key, err)
			}
			st.Aggs[i].X = x
		}
	}
	return json.Marshal(st)
}
