package pipeline

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
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
	p         *Program
	scope     Scope
	watermark int64 // the largest event time folded (or flushed to)
	foldedAt  int64 // wall clock of the last fold cycle, ms
	clockAt   string
	wins      map[winID]*win
	sessions  map[string][]*win // Session: the open sessions of each key
	gone      []*win            // windows read and merged away, to delete
	pushes    []Push
	parser    fastjson.Parser
	Counts
	// Errors are the first few evaluation errors, for the log.
	Errors []error
}

type winID struct {
	start int64
	key   string
}

type win struct {
	key        string
	start, end int64
	accs       []acc
	updatedAt  string // as read; "" for a window this shard created
	dirty      bool
}

// acc is one aggregate's accumulator: n events, v their sum (sum, avg) or
// extreme (min, max), x the value at event time t (first, last).
type acc struct {
	n int64
	v float64
	t int64
	x ref.Val
}

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
func (p *Program) Stateful() bool { return p.kind != "" }

// NewShard builds a shard from a partition's state rows (all those under
// Prefix; none for a stateless program).
func (p *Program) NewShard(scope Scope, rows []Row) (*Shard, error) {
	s := &Shard{p: p, scope: scope, wins: map[winID]*win{}}
	if p.kind == v1.WindowSession {
		s.sessions = map[string][]*win{}
	}
	for _, r := range rows {
		if r.Key == ClockKey {
			var c clockState
			if err := json.Unmarshal(r.Value, &c); err != nil {
				return nil, fmt.Errorf("state row %q: %w", r.Key, err)
			}
			s.watermark, s.foldedAt, s.clockAt = c.Watermark, c.FoldedAt, r.UpdatedAt
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
		s.add(w)
	}
	return s, nil
}

// Watermark is the largest event time the partition has folded, or the
// wall clock of its last idle flush.
func (s *Shard) Watermark() int64 { return s.watermark }

// FoldedAt is when (epoch ms, wall clock) a fold cycle last committed on
// the partition; 0 before the first.
func (s *Shard) FoldedAt() int64 { return s.foldedAt }

func (s *Shard) add(w *win) {
	s.wins[winID{w.start, w.key}] = w
	if s.sessions != nil {
		s.sessions[w.key] = append(s.sessions[w.key], w)
	}
}

func (s *Shard) remove(w *win) {
	delete(s.wins, winID{w.start, w.key})
	if s.sessions != nil {
		s.sessions[w.key] = slices.DeleteFunc(s.sessions[w.key], func(o *win) bool { return o == w })
	}
}

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
	var ofs []ref.Val
	nums := make([]float64, len(p.aggs))
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
		if p.kind == "" {
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
		if !s.place(key, ts, ofs, nums) {
			s.Late++
			s.lateEvent(e)
			continue
		}
		s.watermark = max(s.watermark, ts)
	}
}

// closed says whether a window ending at end no longer takes events.
func (s *Shard) closed(end int64) bool { return end+s.p.lateness <= s.watermark }

// place folds one event into its windows, and reports false when every
// window it belongs to has closed: the event is late.
func (s *Shard) place(key string, ts int64, ofs []ref.Val, nums []float64) bool {
	p := s.p
	switch p.kind {
	case v1.WindowTumbling:
		start := floorDiv(ts, p.size) * p.size
		if s.closed(start + p.size) {
			return false
		}
		s.window(key, start, start+p.size).fold(p, ts, ofs, nums)
		return true
	case v1.WindowSliding:
		placed := false
		for start := floorDiv(ts, p.slide) * p.slide; start > ts-p.size; start -= p.slide {
			if !s.closed(start + p.size) {
				s.window(key, start, start+p.size).fold(p, ts, ofs, nums)
				placed = true
			}
		}
		return placed
	}
	// Session: the event's own session [ts, ts+gap), merged with every open
	// session of the key that it overlaps.
	start, end := ts, ts+p.gap
	var merge []*win
	for _, w := range s.sessions[key] {
		if !s.closed(w.end) && w.start < end && start < w.end {
			merge = append(merge, w)
		}
	}
	if len(merge) == 0 && s.closed(end) {
		return false
	}
	slices.SortFunc(merge, func(a, b *win) int { return cmp.Compare(a.start, b.start) })
	var target *win
	if len(merge) > 0 && merge[0].start <= start {
		target, merge = merge[0], merge[1:]
	} else {
		target = &win{key: key, start: start, end: end, accs: make([]acc, len(p.aggs))}
		s.add(target)
	}
	target.fold(p, ts, ofs, nums)
	target.end = max(target.end, end)
	for _, w := range merge {
		target.merge(p, w)
		target.end = max(target.end, w.end)
		s.remove(w)
		if w.updatedAt != "" {
			s.gone = append(s.gone, w)
		}
	}
	return true
}

func (s *Shard) window(key string, start, end int64) *win {
	id := winID{start, key}
	w := s.wins[id]
	if w == nil {
		w = &win{key: key, start: start, end: end, accs: make([]acc, len(s.p.aggs))}
		s.add(w)
	}
	return w
}

func (w *win) fold(p *Program, ts int64, ofs []ref.Val, nums []float64) {
	w.dirty = true
	for i, a := range p.aggs {
		c := &w.accs[i]
		first := c.n == 0
		c.n++
		switch a.fn {
		case v1.FnSum, v1.FnAvg:
			c.v += nums[i]
		case v1.FnMin:
			if first || nums[i] < c.v {
				c.v = nums[i]
			}
		case v1.FnMax:
			if first || nums[i] > c.v {
				c.v = nums[i]
			}
		case v1.FnFirst:
			if first || ts < c.t {
				c.t, c.x = ts, stable(ofs[a.of])
			}
		case v1.FnLast:
			if first || ts >= c.t {
				c.t, c.x = ts, stable(ofs[a.of])
			}
		}
	}
}

// merge folds session o, which starts later than w, into w.
func (w *win) merge(p *Program, o *win) {
	for i, a := range p.aggs {
		c, d := &w.accs[i], &o.accs[i]
		switch a.fn {
		case v1.FnSum, v1.FnAvg:
			c.v += d.v
		case v1.FnMin:
			c.v = math.Min(c.v, d.v)
		case v1.FnMax:
			c.v = math.Max(c.v, d.v)
		case v1.FnFirst:
			if d.t < c.t {
				c.t, c.x = d.t, d.x
			}
		case v1.FnLast:
			if d.t >= c.t {
				c.t, c.x = d.t, d.x
			}
		}
		c.n += d.n
	}
}

// Flush advances the watermark to the wall clock now, so that every
// window that has ended by now, lateness included, closes at the Commit
// that follows; events of those windows are late from then on.
func (s *Shard) Flush(now time.Time) {
	s.watermark = max(s.watermark, now.UnixMilli())
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
	wins := make([]*win, 0, len(s.wins))
	for _, w := range s.wins {
		wins = append(wins, w)
	}
	slices.SortFunc(wins, func(a, b *win) int {
		if c := cmp.Compare(a.start, b.start); c != 0 {
			return c
		}
		return strings.Compare(a.key, b.key)
	})
	var ops []StateOp
	for _, w := range s.gone {
		ops = append(ops, StateOp{Type: "delete", Key: w.stateKey(), IfUpdatedAt: w.updatedAt})
	}
	for _, w := range wins {
		switch {
		case s.closed(w.end):
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
	c := clockState{Watermark: s.watermark, FoldedAt: s.foldedAt}
	if now != nil {
		c.FoldedAt = now.UnixMilli()
	}
	v, _ := json.Marshal(c)
	ops = append(ops, StateOp{Type: "upsert", Key: ClockKey, Value: v, IfUpdatedAt: s.clockAt})
	return ops, s.pushes, nil
}

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

// value is aggregate i's result.
func (w *win) value(p *Program, i int) ref.Val {
	c := &w.accs[i]
	switch p.aggs[i].fn {
	case v1.FnCount:
		return types.Int(c.n)
	case v1.FnAvg:
		return types.Double(c.v / float64(c.n))
	case v1.FnFirst, v1.FnLast:
		if c.x == nil {
			return types.NullValue
		}
		return c.x
	}
	return types.Double(c.v)
}

func (s *Shard) emitWindow(w *win) error {
	p := s.p
	vars := &windowVars{p: p, key: types.String(w.key), start: types.Timestamp{Time: time.UnixMilli(w.start).UTC()},
		end: types.Timestamp{Time: time.UnixMilli(w.end).UTC()}, partition: types.String(s.scope.Partition),
		aggs: make([]ref.Val, len(p.aggs))}
	for i := range p.aggs {
		vars.aggs[i] = w.value(p, i)
	}
	if p.having != nil {
		ok, err := evalBool(p.having, vars, "having")
		if err != nil {
			s.fail(fmt.Errorf("window %s of %q: %w", rfc3339(w.start), w.key, err))
			return nil
		}
		if !ok {
			return nil
		}
	}
	var payload []byte
	var err error
	if p.project != nil {
		payload, err = s.projected(p, vars)
	} else {
		payload, err = s.plainWindow(w, vars)
	}
	if err != nil {
		s.fail(fmt.Errorf("window %s of %q: %w", rfc3339(w.start), w.key, err))
		return nil
	}
	s.Emitted++
	s.pushes = append(s.pushes, Push{Queue: s.scope.Sink, Partition: s.scope.Partition, Payload: payload,
		TransactionID: s.txid("w", strconv.FormatInt(w.start, 10), w.key)})
	return nil
}

// plainWindow is {"key", "windowStart", "windowEnd", <aggregates>}, in
// that order.
func (s *Shard) plainWindow(w *win, vars *windowVars) ([]byte, error) {
	b := make([]byte, 0, 128)
	b = append(b, `{"key":`...)
	k, _ := json.Marshal(w.key)
	b = append(b, k...)
	b = append(b, `,"windowStart":"`...)
	b = append(b, rfc3339(w.start)...)
	b = append(b, `","windowEnd":"`...)
	b = append(b, rfc3339(w.end)...)
	b = append(b, '"')
	for i, a := range s.p.aggs {
		x, err := native(vars.aggs[i])
		if err != nil {
			return nil, fmt.Errorf("aggregate %s: %w", a.name, err)
		}
		v, err := json.Marshal(x)
		if err != nil {
			return nil, fmt.Errorf("aggregate %s: %w", a.name, err)
		}
		b = append(b, ',', '"')
		b = append(b, a.name...)
		b = append(b, '"', ':')
		b = append(b, v...)
	}
	return append(b, '}'), nil
}

func (s *Shard) projected(p *Program, vars any) ([]byte, error) {
	out, _, err := p.project.Eval(vars)
	if err != nil {
		return nil, fmt.Errorf("project: %w", err)
	}
	x, err := native(out)
	if err != nil {
		return nil, fmt.Errorf("project: %w", err)
	}
	if _, ok := x.(map[string]any); !ok {
		return nil, fmt.Errorf("project: got %s, want a map", out.Type())
	}
	return json.Marshal(x)
}

// emitEvent is a stateless pipeline's output for one event that passed the
// filter: its projection, or its payload as it came.
func (s *Shard) emitEvent(e *Event, vars *eventVars) {
	payload := []byte(e.Data)
	if s.p.project != nil {
		var err error
		if payload, err = s.projected(s.p, vars); err != nil {
			s.fail(err)
			return
		}
	}
	s.Emitted++
	s.pushes = append(s.pushes, Push{Queue: s.scope.Sink, Partition: s.scope.Partition, Payload: payload,
		TransactionID: s.txid("s", e.TransactionID)})
}

func (s *Shard) lateEvent(e *Event) {
	if s.p.late == "" {
		return
	}
	s.pushes = append(s.pushes, Push{Queue: s.p.late, Partition: s.scope.Partition, Payload: e.Data,
		TransactionID: s.txid("l", e.TransactionID)})
}

// txid is an output's transaction id: the same output of the same
// pipeline (its config hash), query and source partition always gets the
// same one, and the broker stores a transaction id once per sink
// partition, so no path emits anything twice, a fold again after a
// rollback to a savepoint included. Another pipeline's output is another
// output: after an upgrade and a rollback both pipelines emit windows of
// the same start and key into one sink, and the second must not be taken
// for a duplicate of the first.
func (s *Shard) txid(kind string, parts ...string) string {
	h := sha256.New()
	for _, p := range append([]string{s.p.Hash, s.scope.QueryID, s.scope.PartitionID}, parts...) {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return kind + hex.EncodeToString(h.Sum(nil)[:16])
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
