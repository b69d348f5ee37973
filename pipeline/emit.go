package pipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// What a fold emits: closed windows (those that pass having), a stateless
// pipeline's events, and late events, each under a transaction id of its
// own.

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
		TransactionID: s.txid("w", strconv.FormatInt(w.start, 10), w.key), Output: true})
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
		TransactionID: s.txid("s", e.TransactionID), Output: true})
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
