package pipeline

import (
	"cmp"
	"errors"
	"slices"
	"time"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
)

func init() { windowKinds[v1.WindowSession] = compileSession }

// session windows are [first event, last event + gap) of a key: an event
// opens its own, [ts, ts+gap), merged with every open session of its key
// that it overlaps.
type session struct{ gap int64 }

func compileSession(w *v1.Window) (windowKind, error) {
	_, _, gap, _, _ := w.Durations()
	if w.Gap == nil || gap < time.Millisecond {
		return nil, errors.New("window: a Session window needs a gap of at least 1ms")
	}
	if w.Size != nil || w.Slide != nil {
		return nil, errors.New("window: size and slide are for Tumbling and Sliding windows only")
	}
	return session{gap: gap.Milliseconds()}, nil
}

func (s session) place(ws *windows, key string, e sample, c clock) bool {
	start, end := e.ts, e.ts+s.gap
	var merge []*win
	for _, w := range ws.ofKey(key) {
		if !c.closed(w.end) && w.start < end && start < w.end {
			merge = append(merge, w)
		}
	}
	if len(merge) == 0 && c.closed(end) {
		return false
	}
	slices.SortFunc(merge, func(a, b *win) int { return cmp.Compare(a.start, b.start) })
	var target *win
	if len(merge) > 0 && merge[0].start <= start {
		target, merge = merge[0], merge[1:]
	} else {
		target = ws.open(key, start, end)
	}
	target.fold(ws.aggs, &e)
	target.end = max(target.end, end)
	for _, w := range merge {
		target.merge(ws.aggs, w)
		target.end = max(target.end, w.end)
		ws.drop(w)
	}
	return true
}
