package pipeline

import (
	"errors"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
)

func init() { windowKinds[v1.WindowTumbling] = compileTumbling }

// tumbling windows are [n*size, (n+1)*size): each event is in one.
type tumbling struct{ size int64 }

func compileTumbling(w *v1.Window) (windowKind, error) {
	size, err := sized(w)
	if err != nil {
		return nil, err
	}
	if w.Slide != nil {
		return nil, errors.New("window: slide is for Sliding windows only")
	}
	return tumbling{size: size}, nil
}

func (t tumbling) place(ws *windows, key string, e sample, c clock) bool {
	start := floorDiv(e.ts, t.size) * t.size
	if c.closed(start + t.size) {
		return false
	}
	ws.at(key, start, start+t.size).fold(ws.aggs, &e)
	return true
}
