package pipeline

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/cel-go/common/types/ref"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
)

// Each window type is one file (window_tumbling.go, window_sliding.go,
// window_session.go) that adds to windowKinds the compiler of its
// v1alpha1.WindowType: it checks the window's fields for the type and
// returns the windowKind that places events. A new type is that file, its
// value in the API's enum (the constant, the kubebuilder marker and
// v1alpha1.WindowTypes, which a test holds to the CRD and to windowKinds),
// and its reference in test/foldref, which fold_test checks it against.
// What every type shares lives once: the shard's clock closes a window
// when its end plus the allowed lateness is at or before the watermark
// (fold.go), Commit emits what has closed, and aggregates fold and merge
// alike (aggregate.go).

// A windowKind is a pipeline's compiled window: how an event is placed in
// the windows of its type.
type windowKind interface {
	// place folds e, an event of key, into each window of ws it belongs to
	// that clock c has not closed, opening the windows it needs, and
	// reports false when there is none: the event is late.
	place(ws *windows, key string, e sample, c clock) bool
}

// windowKinds compiles a window of each type, once its file has added it.
var windowKinds = map[v1.WindowType]func(w *v1.Window) (windowKind, error){}

// compileWindow checks a window's fields for its type and compiles it.
func compileWindow(w *v1.Window) (windowKind, error) {
	compile, ok := windowKinds[w.Type]
	if !ok {
		names := make([]string, len(v1.WindowTypes))
		for i, t := range v1.WindowTypes {
			names[i] = string(t)
		}
		last := len(names) - 1
		return nil, fmt.Errorf("window: type %q is not %s or %s", w.Type, strings.Join(names[:last], ", "), names[last])
	}
	return compile(w)
}

// sized is the size, in milliseconds, of a window of a type that has one
// (Tumbling, Sliding) and so takes no gap.
func sized(w *v1.Window) (int64, error) {
	size, _, _, _, _ := w.Durations()
	if w.Size == nil || size < time.Millisecond {
		return 0, fmt.Errorf("window: a %s window needs a size of at least 1ms", w.Type)
	}
	if w.Gap != nil {
		return 0, errors.New("window: gap is for Session windows only")
	}
	return size.Milliseconds(), nil
}

// sample is what an event brings to its windows: its event time, its
// distinct `of` values, and each aggregate's number (sum, min, max, avg).
type sample struct {
	ts   int64
	ofs  []ref.Val
	nums []float64
}

// windows is a shard's windows, by start and key: those read from state
// and those its fold opened, and the ones merged away since they were read.
type windows struct {
	aggs  []aggregate
	byID  map[winID]*win
	byKey map[string][]*win // built on first use (Session)
	gone  []*win            // read, then merged away: to delete
}

type winID struct {
	start int64
	key   string
}

type win struct {
	key        string
	start, end int64
	accs       []acc
	updatedAt  string // as read; "" for a window this shard opened
	dirty      bool
}

func (ws *windows) add(w *win) {
	ws.byID[winID{w.start, w.key}] = w
	if ws.byKey != nil {
		ws.byKey[w.key] = append(ws.byKey[w.key], w)
	}
}

// open adds an empty window.
func (ws *windows) open(key string, start, end int64) *win {
	w := &win{key: key, start: start, end: end, accs: make([]acc, len(ws.aggs))}
	ws.add(w)
	return w
}

// at is the window of key starting at start, opened if need be.
func (ws *windows) at(key string, start, end int64) *win {
	if w := ws.byID[winID{start, key}]; w != nil {
		return w
	}
	return ws.open(key, start, end)
}

// ofKey is every window of key, closed ones included.
func (ws *windows) ofKey(key string) []*win {
	if ws.byKey == nil {
		ws.byKey = map[string][]*win{}
		for _, w := range ws.byID {
			ws.byKey[w.key] = append(ws.byKey[w.key], w)
		}
	}
	return ws.byKey[key]
}

// drop removes a window merged into another.
func (ws *windows) drop(w *win) {
	ws.forget(w)
	if w.updatedAt != "" {
		ws.gone = append(ws.gone, w)
	}
}

// forget removes a window.
func (ws *windows) forget(w *win) {
	delete(ws.byID, winID{w.start, w.key})
	if ws.byKey != nil {
		ws.byKey[w.key] = slices.DeleteFunc(ws.byKey[w.key], func(o *win) bool { return o == w })
	}
}

// sorted is every window that keep keeps, by start and key: a shard held
// across cycles holds every open window of its partition, and a Commit
// writes only the few a batch touched.
func (ws *windows) sorted(keep func(*win) bool) []*win {
	var all []*win
	for _, w := range ws.byID {
		if keep(w) {
			all = append(all, w)
		}
	}
	slices.SortFunc(all, func(a, b *win) int {
		if c := cmp.Compare(a.start, b.start); c != 0 {
			return c
		}
		return strings.Compare(a.key, b.key)
	})
	return all
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
