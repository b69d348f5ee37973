package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// The operator: one-minute tumbling windows counting events per key. Its
// state keys are the operator tag, the window start and the user key joined
// by U+001F, so the state read with prefix `statePrefix` returns exactly this
// operator's rows on a partition.
const (
	operator     = "tumb:60"
	sep          = "\u001f"
	statePrefix  = operator + sep
	watermarkKey = statePrefix + "watermark"
	windowMillis = 60_000
	// chain describes the operator chain; a different chain must never
	// fold into this one's accumulators.
	chain = operator + " count by key, event time from ts"
)

// configHash is the registration's config_hash: the first 8 bytes of the
// chain's SHA-256, in hex. A StreamQuery that declares this worker's query
// carries the same value (regent-worker -print-config-hash prints it).
var configHash = func() string {
	sum := sha256.Sum256([]byte(chain))
	return hex.EncodeToString(sum[:8])
}()

// window is an open window's state value, and (with times as RFC 3339) a
// closed window's sink payload. windowEnd is a JSON number so that the idle
// flush can ask state/get for ripe rows.
type window struct {
	Key         string `json:"key"`
	WindowStart int64  `json:"windowStart"`
	WindowEnd   int64  `json:"windowEnd"`
	Count       int64  `json:"count"`
}

type emitted struct {
	Key         string `json:"key"`
	WindowStart string `json:"windowStart"`
	WindowEnd   string `json:"windowEnd"`
	Count       int64  `json:"count"`
}

type watermark struct {
	Watermark int64 `json:"watermark"`
}

// event is a source payload.
type event struct {
	Key string `json:"key"`
	TS  *int64 `json:"ts"`
}

// stateOp names the updated_at of the row it read, if it read one, so that
// the broker refuses the cycle when another cycle changed the row since: a
// flush of another process that read a window before this one's fold added
// to it would otherwise delete the events it added.
type stateOp struct {
	Type        string `json:"type"`
	Key         string `json:"key"`
	Value       any    `json:"value,omitempty"`
	IfUpdatedAt string `json:"if_updated_at,omitempty"`
}

type pushItem struct {
	Queue         string  `json:"queue"`
	Partition     string  `json:"partition"`
	Payload       emitted `json:"payload"`
	TransactionID string  `json:"transactionId"`
}

type stateRow struct {
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value"`
	UpdatedAt string          `json:"updated_at"`
}

func windowKey(start int64, key string) string {
	return statePrefix + rfc3339(start) + sep + key
}

func rfc3339(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}

// shard is one partition's state for the operator, as state/get returned it.
type shard struct {
	watermark int64 // the largest event time folded; 0 before the first
	windows   map[string]*window
	changed   map[string]bool   // windows folded into since the read
	read      map[string]string // key -> the updated_at it was read with
}

func readShard(rows []stateRow) (*shard, error) {
	s := &shard{windows: map[string]*window{}, changed: map[string]bool{}, read: map[string]string{}}
	for _, r := range rows {
		s.read[r.Key] = r.UpdatedAt
		if r.Key == watermarkKey {
			var w watermark
			if err := json.Unmarshal(r.Value, &w); err != nil {
				return nil, fmt.Errorf("state row %q: %w", r.Key, err)
			}
			s.watermark = w.Watermark
			continue
		}
		w := &window{}
		if err := json.Unmarshal(r.Value, w); err != nil {
			return nil, fmt.Errorf("state row %q: %w", r.Key, err)
		}
		s.windows[r.Key] = w
	}
	return s, nil
}

// fold counts the events into their windows and returns how many it
// dropped: late ones (their window already closed) and malformed ones.
func (s *shard) fold(payloads []json.RawMessage) (late, bad int) {
	for _, p := range payloads {
		var e event
		if json.Unmarshal(p, &e) != nil || e.Key == "" || e.TS == nil {
			bad++
			continue
		}
		start := *e.TS - *e.TS%windowMillis
		if *e.TS < 0 && *e.TS%windowMillis != 0 {
			start -= windowMillis
		}
		if start+windowMillis <= s.watermark {
			late++
			continue
		}
		k := windowKey(start, e.Key)
		w := s.windows[k]
		if w == nil {
			w = &window{Key: e.Key, WindowStart: start, WindowEnd: start + windowMillis}
			s.windows[k] = w
		}
		w.Count++
		s.changed[k] = true
		s.watermark = max(s.watermark, *e.TS)
	}
	return late, bad
}

// commit returns the cycle's state ops and sink pushes: every window at or
// before closeAt is emitted and deleted, every other changed one upserted.
// Each emit's transaction id is deterministic, so no path can store a
// window twice.
func (s *shard) commit(closeAt int64, queryID, partitionID, sink, partition string) ([]stateOp, []pushItem) {
	keys := make([]string, 0, len(s.windows))
	for k := range s.windows {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	ops := []stateOp{}
	emits := []pushItem{}
	for _, k := range keys {
		w := s.windows[k]
		switch {
		case w.WindowEnd <= closeAt:
			ops = append(ops, s.op("delete", k, nil))
			emits = append(emits, pushItem{
				Queue: sink, Partition: partition,
				Payload:       emitted{Key: w.Key, WindowStart: rfc3339(w.WindowStart), WindowEnd: rfc3339(w.WindowEnd), Count: w.Count},
				TransactionID: fmt.Sprintf("%s|%s|%s|%d|%s", operator, queryID, partitionID, w.WindowStart, w.Key),
			})
		case s.changed[k]:
			ops = append(ops, s.op("upsert", k, w))
		}
	}
	return ops, emits
}

func (s *shard) op(typ, key string, value any) stateOp {
	return stateOp{Type: typ, Key: key, Value: value, IfUpdatedAt: s.read[key]}
}
