package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WindowType is the kind of a pipeline's window.
// +kubebuilder:validation:Enum=Tumbling;Sliding;Session
type WindowType string

const (
	WindowTumbling WindowType = "Tumbling"
	WindowSliding  WindowType = "Sliding"
	WindowSession  WindowType = "Session"
)

// WindowTypes are the window types, in the order the enum lists them.
var WindowTypes = []WindowType{WindowTumbling, WindowSliding, WindowSession}

// AggregateFn is what an aggregate computes over a window's events.
// +kubebuilder:validation:Enum=count;sum;min;max;avg;first;last
type AggregateFn string

const (
	FnCount AggregateFn = "count"
	FnSum   AggregateFn = "sum"
	FnMin   AggregateFn = "min"
	FnMax   AggregateFn = "max"
	FnAvg   AggregateFn = "avg"
	FnFirst AggregateFn = "first"
	FnLast  AggregateFn = "last"
)

// Defaults of a window, and of where late events go.
const (
	DefaultIdleFlush = 5 * time.Second
	LateDrop         = "drop"
)

// Pipeline is a streaming query's computation: which events count (filter),
// how they are grouped (keyBy, window), what is computed per group
// (aggregate, having) and what is emitted (project). Expressions are CEL;
// per-event ones see payload, partition, transactionId and createdAt.
//
// +kubebuilder:validation:XValidation:rule="has(self.window) || !has(self.aggregate) || size(self.aggregate) == 0",message="aggregate needs a window"
// +kubebuilder:validation:XValidation:rule="has(self.window) || !has(self.having)",message="having needs a window"
// +kubebuilder:validation:XValidation:rule="!has(self.window) || (has(self.aggregate) && size(self.aggregate) > 0)",message="a window needs at least one aggregate"
type Pipeline struct {
	// filter is a CEL boolean: an event for which it is false is skipped.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Filter string `json:"filter,omitempty"`

	// keyBy is a CEL string grouping events; absent, each source partition
	// is one key, named like the partition.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	KeyBy string `json:"keyBy,omitempty"`

	// eventTime is a CEL timestamp, or a number of epoch milliseconds:
	// the time windows are cut by. Absent: the message's createdAt.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	EventTime string `json:"eventTime,omitempty"`

	// window groups events in time. Absent: a stateless pipeline, which
	// emits each event that passes the filter (projected when project is
	// set).
	// +optional
	Window *Window `json:"window,omitempty"`

	// aggregate lists what is computed for each window, by name.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	Aggregate []Aggregate `json:"aggregate,omitempty"`

	// having is a CEL boolean over the aggregates (and key, windowStart,
	// windowEnd, partition): a closed window for which it is false is not
	// emitted.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Having string `json:"having,omitempty"`

	// project is a CEL map, the output payload. Without it a window is
	// emitted as {"key", "windowStart", "windowEnd", <each aggregate>}, and
	// a stateless pipeline emits the event's payload.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Project string `json:"project,omitempty"`

	// late is "drop" (the default; dropped events are counted) or the name
	// of a queue that receives each late event's payload.
	// +optional
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.-]{1,255}$`
	Late string `json:"late,omitempty"`
}

// Window is how a pipeline cuts events into windows of event time.
//
// +kubebuilder:validation:XValidation:rule="self.type == 'Session' || has(self.size)",message="Tumbling and Sliding windows need size"
// +kubebuilder:validation:XValidation:rule="self.type != 'Sliding' || has(self.slide)",message="a Sliding window needs slide"
// +kubebuilder:validation:XValidation:rule="self.type == 'Session' || !has(self.gap)",message="gap is for Session windows only"
// +kubebuilder:validation:XValidation:rule="self.type == 'Sliding' || !has(self.slide)",message="slide is for Sliding windows only"
// +kubebuilder:validation:XValidation:rule="self.type != 'Session' || has(self.gap)",message="a Session window needs gap"
// +kubebuilder:validation:XValidation:rule="self.type != 'Session' || !has(self.size)",message="size is for Tumbling and Sliding windows only"
type Window struct {
	// type is Tumbling, Sliding or Session.
	// +required
	Type WindowType `json:"type"`

	// size is the length of a Tumbling or Sliding window.
	// +optional
	Size *metav1.Duration `json:"size,omitempty"`

	// slide is how far apart Sliding windows start; size must be a multiple
	// of it.
	// +optional
	Slide *metav1.Duration `json:"slide,omitempty"`

	// gap is how long a Session stays open after its last event.
	// +optional
	Gap *metav1.Duration `json:"gap,omitempty"`

	// allowedLateness is how long after its end a window still takes
	// events (measured against the partition's watermark). Default 0s.
	// +optional
	AllowedLateness *metav1.Duration `json:"allowedLateness,omitempty"`

	// idleFlush is how long a partition must be quiet before its windows
	// are closed by wall-clock time rather than by later events. Default 5s.
	// +optional
	IdleFlush *metav1.Duration `json:"idleFlush,omitempty"`
}

// Aggregate is one value computed per window.
//
// +kubebuilder:validation:XValidation:rule="self.fn == 'count' ? !has(self.of) : has(self.of)",message="of is required for every fn but count, which takes none"
// +kubebuilder:validation:XValidation:rule="!(self.name in ['key', 'windowStart', 'windowEnd', 'partition', 'payload', 'transactionId', 'createdAt'])",message="an aggregate may not be named key, windowStart, windowEnd, partition, payload, transactionId or createdAt"
type Aggregate struct {
	// name is the aggregate's field in the output, and its variable in
	// having and project.
	// +required
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_]{0,62}$`
	Name string `json:"name"`

	// fn is count, sum, min, max, avg (the exact mean), first or last (by
	// event time).
	// +required
	Fn AggregateFn `json:"fn"`

	// of is the CEL expression aggregated: a number for sum, min, max and
	// avg, any value for first and last.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Of string `json:"of,omitempty"`
}

// Durations of a window with its defaults applied.
func (w *Window) Durations() (size, slide, gap, lateness, idle time.Duration) {
	d := func(v *metav1.Duration, def time.Duration) time.Duration {
		if v == nil {
			return def
		}
		return v.Duration
	}
	return d(w.Size, 0), d(w.Slide, 0), d(w.Gap, 0), d(w.AllowedLateness, 0), d(w.IdleFlush, DefaultIdleFlush)
}

// Canonical is the pipeline with every default made explicit and every
// duration in one spelling, so that two ways of writing the same pipeline
// are one pipeline.
func (p *Pipeline) Canonical() Pipeline {
	c := *p.DeepCopy()
	if c.Late == "" {
		c.Late = LateDrop
	}
	if w := c.Window; w != nil {
		size, slide, gap, lateness, idle := w.Durations()
		opt := func(d time.Duration, set bool) *metav1.Duration {
			if !set {
				return nil
			}
			return &metav1.Duration{Duration: d}
		}
		w.Size, w.Slide, w.Gap = opt(size, w.Size != nil), opt(slide, w.Slide != nil), opt(gap, w.Gap != nil)
		w.AllowedLateness, w.IdleFlush = opt(lateness, true), opt(idle, true)
	}
	return c
}

// ConfigHash is the config_hash a query running this pipeline registers
// with: the first 16 bytes, in hex, of the SHA-256 of the canonical
// pipeline's JSON. The worker and the operator both call it, so a
// StreamQuery with a pipeline needs no configHash of its own.
func (p *Pipeline) ConfigHash() string {
	c := p.Canonical()
	b, err := json.Marshal(&c)
	if err != nil {
		panic(err) // a struct of strings and durations always marshals
	}
	sum := sha256.Sum256(append([]byte("regent.pipeline/v1\n"), b...))
	return "p1-" + hex.EncodeToString(sum[:16])
}
