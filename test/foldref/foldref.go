// Package foldref is the plain reference fold the pipeline runtime is
// checked against: events one at a time, in a straightforward loop, with
// none of the runtime's state encoding, batching or indexes. Its events
// are {"key", "ts", "amount"} and its aggregates are orders (count),
// revenue (sum), low (min), high (max), mean (avg), first and last, all of
// amount.
package foldref

import (
	"fmt"
	"slices"
	"time"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
)

// Event is a source event.
type Event struct {
	Key    string `json:"key"`
	TS     int64  `json:"ts"`
	Amount int64  `json:"amount"`
}

// Payload is the event's message payload.
func (e Event) Payload() map[string]any {
	return map[string]any{"key": e.Key, "ts": e.TS, "amount": e.Amount}
}

// Window is an emitted window as the sink holds it.
type Window struct {
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

// ID names a window within its partition.
func (w Window) ID() string { return w.Key + "@" + w.WindowStart }

// Aggregates is the pipeline's aggregate list that Window reads back.
func Aggregates() []v1.Aggregate {
	return []v1.Aggregate{{Name: "orders", Fn: v1.FnCount}, {Name: "revenue", Fn: v1.FnSum, Of: "payload.amount"},
		{Name: "low", Fn: v1.FnMin, Of: "payload.amount"}, {Name: "high", Fn: v1.FnMax, Of: "payload.amount"},
		{Name: "mean", Fn: v1.FnAvg, Of: "payload.amount"}, {Name: "first", Fn: v1.FnFirst, Of: "payload.amount"},
		{Name: "last", Fn: v1.FnLast, Of: "payload.amount"}}
}

// Pipeline is a pipeline of window w over these events, keyed by key and
// timed by ts, with the aggregates Window reads back.
func Pipeline(w v1.Window) v1.Pipeline {
	return v1.Pipeline{KeyBy: "payload.key", EventTime: "payload.ts", Window: &w, Aggregate: Aggregates()}
}

type window struct {
	key        string
	start, end int64
	events     []Event // in fold order
}

func (w *window) out() Window {
	o := Window{Key: w.key, WindowStart: RFC3339(w.start), WindowEnd: RFC3339(w.end), Orders: int64(len(w.events))}
	var firstTs, lastTs int64
	for i, e := range w.events {
		a := float64(e.Amount)
		o.Revenue += a
		if i == 0 || a < o.Low {
			o.Low = a
		}
		if i == 0 || a > o.High {
			o.High = a
		}
		if i == 0 || e.TS < firstTs {
			firstTs, o.First = e.TS, e.Amount
		}
		if i == 0 || e.TS >= lastTs {
			lastTs, o.Last = e.TS, e.Amount
		}
	}
	o.Mean = o.Revenue / float64(len(w.events))
	return o
}

// Fold folds one partition's events in order, from the watermark
// watermark: the watermark is the largest event time seen, a window is
// closed once its end plus the lateness is at or before it, and an event
// is late when every window it belongs to is closed. Sessions merge when
// they overlap, and the merged events keep the order the runtime folds
// them in (the earliest session's when it starts at or before the event,
// the event, then the later sessions' by start), which decides first and
// last between events of equal time. It returns every window, by ID, and
// the indexes of the late events.
func Fold(w v1.Window, watermark int64, events []Event) (map[string]Window, []int) {
	size, slide, gap, lateness, _ := w.Durations()
	sz, sl, gp, lt := size.Milliseconds(), slide.Milliseconds(), gap.Milliseconds(), lateness.Milliseconds()
	wm := watermark
	var all []*window
	find := func(key string, start int64) *window {
		for _, r := range all {
			if r.key == key && r.start == start {
				return r
			}
		}
		return nil
	}
	var late []int
	for i, e := range events {
		placed := false
		switch w.Type {
		case v1.WindowTumbling, v1.WindowSliding:
			step := sz
			if w.Type == v1.WindowSliding {
				step = sl
			}
			first := e.TS - ((e.TS%step)+step)%step
			for start := first; start > e.TS-sz; start -= step {
				if start+sz+lt <= wm {
					continue
				}
				r := find(e.Key, start)
				if r == nil {
					r = &window{key: e.Key, start: start, end: start + sz}
					all = append(all, r)
				}
				r.events = append(r.events, e)
				placed = true
			}
		case v1.WindowSession:
			lo, hi := e.TS, e.TS+gp
			var merged []*window
			for _, r := range all {
				if r.key == e.Key && r.end+lt > wm && r.start < hi && lo < r.end {
					merged = append(merged, r)
				}
			}
			if len(merged) == 0 && hi+lt <= wm {
				break
			}
			slices.SortFunc(merged, func(a, b *window) int { return int(a.start - b.start) })
			n := &window{key: e.Key, start: lo, end: hi}
			rest := merged
			if len(merged) > 0 && merged[0].start <= e.TS {
				n.events, rest = append(n.events, merged[0].events...), merged[1:]
			}
			n.events = append(n.events, e)
			for _, r := range rest {
				n.events = append(n.events, r.events...)
			}
			for _, r := range merged {
				n.start, n.end = min(n.start, r.start), max(n.end, r.end)
			}
			all = slices.DeleteFunc(all, func(r *window) bool { return slices.Contains(merged, r) })
			all = append(all, n)
			placed = true
		default:
			panic(fmt.Sprintf("foldref: window type %q", w.Type))
		}
		if !placed {
			late = append(late, i)
			continue
		}
		wm = max(wm, e.TS)
	}
	res := map[string]Window{}
	for _, r := range all {
		o := r.out()
		res[o.ID()] = o
	}
	return res, late
}

// RFC3339 is an epoch-millisecond time as the pipeline writes it.
func RFC3339(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}
