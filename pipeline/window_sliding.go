package pipeline

import (
	"errors"
	"fmt"
	"time"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
)

func init() { windowKinds[v1.WindowSliding] = compileSliding }

// sliding windows are [n*slide, n*slide+size): each event is in the
// size/slide windows that contain it.
type sliding struct{ size, slide int64 }

func compileSliding(w *v1.Window) (windowKind, error) {
	ms, err := sized(w)
	if err != nil {
		return nil, err
	}
	size, slide, _, _, _ := w.Durations()
	if w.Slide == nil || slide < time.Millisecond {
		return nil, errors.New("window: a Sliding window needs a slide of at least 1ms")
	}
	if size%slide != 0 || ms%slide.Milliseconds() != 0 {
		return nil, fmt.Errorf("window: size %s is not a multiple of slide %s", size, slide)
	}
	return sliding{size: ms, slide: slide.Milliseconds()}, nil
}

func (s sliding) place(ws *windows, key string, e sample, c clock) bool {
	placed := false
	for start := floorDiv(e.ts, s.slide) * s.slide; start > e.ts-s.size; start -= s.slide {
		if !c.closed(start + s.size) {
			ws.at(key, start, start+s.size).fold(ws.aggs, &e)
			placed = true
		}
	}
	return placed
}
