// Package autoscaler decides how many workers an autoscaled StreamQuery
// runs, from what the operator reads of its source at each resync. It is
// a pure function of its input: the clock, the observations and the last
// decision all come in, so that its tests feed it a lag series and need no
// sleep.
package autoscaler

import (
	"fmt"
	"math"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
)

// StabilizationWindow is how long the lag must have stayed within target,
// and the replicas unchanged, before the autoscaler scales in: as an HPA's
// default scale-down window, so that one quiet reading between two bursts
// does not shed workers that the next burst needs again.
const StabilizationWindow = 5 * time.Minute

// The reasons of a decision, in the Event and in status.workers.autoscaler.
const (
	ReasonStarted      = "Started"      // the first decision: minReplicas
	ReasonScaledOut    = "ScaledOut"    // the lag grows past target
	ReasonScaledIn     = "ScaledIn"     // within target for a whole window
	ReasonCapped       = "Capped"       // more workers than partitions with data
	ReasonScaledToZero = "ScaledToZero" // the source was quiet for scaleToZeroAfter
	ReasonWoke         = "Woke"         // data again after zero
	ReasonBounded      = "Bounded"      // minReplicas or maxReplicas changed
	ReasonSteady       = "Steady"       // no change
)

// Observation is what the operator read of the query at one resync.
type Observation struct {
	// Lag and LagSeconds are status.lag and status.lagSeconds.
	Lag, LagSeconds int64
	// PartitionsBehind counts the source's partitions with messages the
	// query has not consumed.
	PartitionsBehind int64
	// LastPush is when the source last received a message; nil: never.
	LastPush *time.Time
	// OpenWindows counts the pipeline's windows that the workers have
	// still to emit.
	OpenWindows int64
}

// Input is everything a decision depends on.
type Input struct {
	Spec v1.Autoscale
	Now  time.Time
	Obs  Observation
	// Previous is the observation of the resync before, nil when there
	// was none: "growing" compares with it.
	Previous *Observation
	// Last is the previous decision, nil before the first.
	Last *v1.AutoscaleStatus
	// Running is how many workers run before the first decision (0 for a
	// new or suspended query): the first decision keeps them, within
	// minReplicas and maxReplicas.
	Running int32
	// Interval is how often the lag is read (the operator's resync): the
	// workers are scaled out at most once per interval, since workers just
	// added show in the lag only at the next reading.
	Interval time.Duration
}

// Decision is how many workers to run and why.
type Decision struct {
	// Status is the decision to record; its reason and message are those
	// of the last change.
	Status v1.AutoscaleStatus
	// Reason and Message say why, this time.
	Reason, Message string
}

// Changed says whether the decision changes the replicas.
func (d Decision) Changed(in Input) bool {
	return in.Last == nil || in.Last.Replicas != d.Status.Replicas
}

// Decide returns the replicas for in.
//
//   - Out: when the oldest waiting message is older than targetLagSeconds
//     and the lag or that age grew since the previous resync, in proportion
//     to how far past target it is, at least one more and at most twice as
//     many, at most once per Interval.
//   - In: by half, once the lag stayed within target for a whole
//     StabilizationWindow since the last change.
//   - Never more than the source's partitions with data (but never fewer
//     than minReplicas): beyond them workers find every partition leased.
//   - To zero, with scaleToZeroAfter, when nothing waits, no window is left
//     to emit and nothing was pushed for that long; back to minReplicas at
//     the first resync that sees the source pushed to again.
func Decide(in Input) Decision {
	s, now := in.Spec, in.Now
	hi := s.MaxReplicas
	lo := clamp(s.MinReplicas, 1, hi)
	target := max(int64(s.TargetLagSeconds), 1)
	st := v1.AutoscaleStatus{}
	if in.Last != nil {
		st = *in.Last
	}
	busy := in.Obs.LagSeconds > target
	if busy {
		st.LastBusyTime = ptime(now)
	}
	behind := int32(min(in.Obs.PartitionsBehind, math.MaxInt32))
	cur := st.Replicas
	set := func(n int32, reason, msg string, args ...any) Decision {
		d := Decision{Reason: reason, Message: fmt.Sprintf(msg, args...)}
		if in.Last == nil || n != cur {
			st.Reason, st.Message = d.Reason, d.Message
			st.LastScaleTime = ptime(now)
			st.PeakPartitionsBehind = 0 // the window starts afresh
		} else {
			st.PeakPartitionsBehind = max(st.PeakPartitionsBehind, behind)
		}
		st.Replicas = n
		d.Status = st
		return d
	}

	if in.Last == nil {
		n := clamp(in.Running, lo, hi)
		return set(n, ReasonStarted, "autoscaling starts at %d workers (minReplicas %d, maxReplicas %d, %d running)", n, lo, hi, in.Running)
	}
	if quiet, idle := quiet(in, st); quiet {
		return set(0, ReasonScaledToZero, "nothing was pushed to the source for %s, nothing waits and no window is left to emit (scaleToZeroAfter %s): %d workers, scaled to zero",
			idle.Round(time.Second), s.ScaleToZeroAfter.Duration, cur)
	}
	switch {
	case cur == 0:
		return set(lo, ReasonWoke, "the source has data again (lag %d): woke %d workers (minReplicas)", in.Obs.Lag, lo)
	case cur < lo || cur > hi:
		n := clamp(cur, lo, hi)
		return set(n, ReasonBounded, "scaled from %d to %d to stay within minReplicas %d and maxReplicas %d", cur, n, lo, hi)
	}
	if busy && growing(in) && (st.LastScaleTime == nil || now.Sub(st.LastScaleTime.Time) >= in.Interval) {
		// limit: what the source can keep busy, within the spec's bounds.
		limit := clamp(behind, lo, hi)
		want := int64(math.Ceil(float64(cur) * float64(in.Obs.LagSeconds) / float64(target)))
		n := int32(min(max(int64(cur)+1, min(want, 2*int64(cur))), int64(limit)))
		if n <= cur {
			return set(cur, ReasonCapped, "the oldest waiting message is %ds old (target %ds) and the lag grows, but %d workers are as many as %s",
				in.Obs.LagSeconds, target, cur, limitSays(behind, lo, hi, limit))
		}
		return set(n, ReasonScaledOut, "the oldest waiting message is %ds old (target %ds) and the lag grows (%d messages): scaled out from %d to %d (at most %s)",
			in.Obs.LagSeconds, target, in.Obs.Lag, cur, n, limitSays(behind, lo, hi, limit))
	}
	if st.LastScaleTime != nil && now.Sub(st.LastScaleTime.Time) < StabilizationWindow {
		return set(cur, ReasonSteady, "holding %d workers", cur)
	}
	// A whole window since the last change: in by half when the lag stayed
	// within target, and down to the most partitions that had data
	// waiting at once in the window.
	n, reason := cur, ReasonCapped
	if !busy && (st.LastBusyTime == nil || now.Sub(st.LastBusyTime.Time) >= StabilizationWindow) {
		n, reason = (cur+1)/2, ReasonScaledIn
	}
	if peak := max(st.PeakPartitionsBehind, behind); peak > 0 && peak < n {
		n, reason = peak, ReasonCapped
	}
	switch n = clamp(n, lo, hi); {
	case n >= cur:
	case reason == ReasonScaledIn:
		return set(n, reason, "the lag stayed within target (%ds) for %s: scaled in from %d to %d", target, StabilizationWindow, cur, n)
	default:
		return set(n, reason, "at most %d partitions of the source had data waiting at once for %s: scaled in from %d to %d",
			max(st.PeakPartitionsBehind, behind), StabilizationWindow, cur, n)
	}
	return set(cur, ReasonSteady, "holding %d workers", cur)
}

// quiet says whether the source has been quiet for scaleToZeroAfter:
// nothing waits, and nothing was pushed since (or, when nothing ever was,
// since the autoscaler last changed the replicas). At zero it stays quiet
// until something waits or is pushed after the scale to zero. It returns
// how long it has been quiet.
//
// A window left open is not quiet: once the source stops, only a running
// worker's idle flush emits it, and at zero it would wait for the next
// push, however long that takes.
func quiet(in Input, st v1.AutoscaleStatus) (bool, time.Duration) {
	after, push := in.Spec.ScaleToZeroAfter, in.Obs.LastPush
	// Partitions behind rather than the lag: the lag counts offsets that
	// retention removed, which no worker can pop.
	if after == nil || in.Obs.PartitionsBehind > 0 || st.LastScaleTime == nil ||
		(st.Replicas > 0 && in.Obs.OpenWindows > 0) {
		return false, 0
	}
	since := st.LastScaleTime.Time
	if st.Replicas == 0 {
		return push == nil || !push.After(since), in.Now.Sub(since)
	}
	if push != nil {
		since = *push
	}
	idle := in.Now.Sub(since)
	return idle >= after.Duration, idle
}

// growing says whether the lag, or the age of its oldest message, rose
// since the previous observation; without one, a lag past target counts.
func growing(in Input) bool {
	p := in.Previous
	return p == nil || in.Obs.Lag > p.Lag || in.Obs.LagSeconds > p.LagSeconds
}

func limitSays(partitions, lo, hi, limit int32) string {
	switch {
	case limit == hi:
		return fmt.Sprintf("maxReplicas %d", hi)
	case limit == lo:
		return fmt.Sprintf("minReplicas %d (%d partitions of the source have data waiting)", lo, partitions)
	}
	return fmt.Sprintf("the %d partitions of the source with data waiting", partitions)
}

func clamp(n, lo, hi int32) int32 { return min(max(n, lo), hi) }

func ptime(t time.Time) *metav1.Time {
	m := metav1.NewTime(t)
	return &m
}
