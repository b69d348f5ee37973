package autoscaler_test

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
	"github.com/regent-mq/regent/controllers/autoscaler"
)

// resync is the interval of the fed series: the operator's default.
const resync = 30 * time.Second

// sim feeds Decide one observation per resync on a fake clock, carrying
// the decision and the observation over as the operator's status does.
type sim struct {
	t       *testing.T
	spec    v1.Autoscale
	now     time.Time
	start   time.Time
	prev    *autoscaler.Observation
	last    *v1.AutoscaleStatus
	reasons []string
}

func newSim(t *testing.T, spec v1.Autoscale) *sim {
	start := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	return &sim{t: t, spec: spec, now: start, start: start}
}

// tick advances the clock by one resync and decides on obs.
func (s *sim) tick(obs autoscaler.Observation) int32 {
	s.now = s.now.Add(resync)
	d := autoscaler.Decide(autoscaler.Input{Spec: s.spec, Now: s.now, Obs: obs, Previous: s.prev, Last: s.last, Interval: resync})
	if d.Message == "" {
		s.t.Fatalf("decision %+v has no message", d.Status)
	}
	s.prev, s.last = &obs, &d.Status
	s.reasons = append(s.reasons, d.Reason)
	return d.Status.Replicas
}

// series ticks once per observation and returns the replicas decided.
func (s *sim) series(obs ...autoscaler.Observation) []int32 {
	var got []int32
	for _, o := range obs {
		got = append(got, s.tick(o))
	}
	return got
}

// quietFor ticks n resyncs with nothing waiting and returns the replicas
// decided.
func (s *sim) quietFor(n int, lastPush *time.Time) []int32 {
	var got []int32
	for range n {
		got = append(got, s.tick(autoscaler.Observation{LastPush: lastPush}))
	}
	return got
}

func (s *sim) elapsed() time.Duration { return s.now.Sub(s.start) }

func behind(lag, age, partitions int64) autoscaler.Observation {
	return autoscaler.Observation{Lag: lag, LagSeconds: age, PartitionsBehind: partitions}
}

func spec(min, max, target int32) v1.Autoscale {
	return v1.Autoscale{MinReplicas: min, MaxReplicas: max, TargetLagSeconds: target}
}

func want(t *testing.T, what string, got, want []int32) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: replicas %v, want %v", what, got, want)
	}
}

func TestTheFirstDecisionIsMinReplicas(t *testing.T) {
	s := newSim(t, spec(2, 8, 30))
	want(t, "a lag past target at the first resync", s.series(behind(5000, 300, 8)), []int32{2})
	if s.reasons[0] != autoscaler.ReasonStarted {
		t.Fatalf("reason %s, want Started", s.reasons[0])
	}
}

// Switching a running query from replicas to autoscale keeps its workers,
// within the bounds.
func TestTheFirstDecisionKeepsTheWorkersThatRunWithinTheBounds(t *testing.T) {
	for _, c := range []struct{ running, want int32 }{{0, 2}, {3, 3}, {12, 8}} {
		d := autoscaler.Decide(autoscaler.Input{Spec: spec(2, 8, 30), Now: time.Now(), Running: c.running})
		if d.Status.Replicas != c.want || d.Reason != autoscaler.ReasonStarted {
			t.Errorf("%d running: starts at %d (%s), want %d", c.running, d.Status.Replicas, d.Reason, c.want)
		}
	}
}

// A burst: the oldest message ages past target while the lag grows. The
// workers double at most per resync, in proportion to how far past target
// the age is, up to maxReplicas.
func TestABurstScalesOutWhileTheLagGrowsPastTarget(t *testing.T) {
	s := newSim(t, spec(1, 8, 30))
	got := s.series(
		behind(0, 0, 0),      // started: 1
		behind(200, 20, 8),   // within target: 1
		behind(900, 45, 8),   // 1.5 x target: 2
		behind(2000, 75, 8),  // 2.5 x target on 2: 5, at most twice: 4
		behind(3000, 100, 8), // 3.3 x on 4: 14, at most twice: 8
		behind(3500, 130, 8), // at maxReplicas: 8
		behind(2000, 100, 8), // the lag shrinks: hold
		behind(2100, 110, 8), // grows again, but at max
	)
	want(t, "the burst", got, []int32{1, 1, 2, 4, 8, 8, 8, 8})
	if !slices.Equal(s.reasons[2:6], []string{autoscaler.ReasonScaledOut, autoscaler.ReasonScaledOut, autoscaler.ReasonScaledOut, autoscaler.ReasonCapped}) {
		t.Fatalf("reasons %v", s.reasons)
	}
}

// Past target but catching up: more workers would not be needed.
func TestALagPastTargetThatShrinksDoesNotScaleOut(t *testing.T) {
	s := newSim(t, spec(1, 8, 30))
	want(t, "catching up", s.series(behind(0, 0, 0), behind(5000, 120, 8), behind(4000, 110, 8), behind(3000, 90, 8)), []int32{1, 2, 2, 2})
}

func TestScaleOutStopsAtThePartitionsWithData(t *testing.T) {
	s := newSim(t, spec(1, 8, 10))
	got := s.series(behind(0, 0, 0), behind(100, 40, 3), behind(200, 80, 3), behind(300, 120, 3))
	want(t, "three partitions behind", got, []int32{1, 2, 3, 3})
	if s.reasons[3] != autoscaler.ReasonCapped {
		t.Fatalf("reasons %v, want Capped at the partitions", s.reasons)
	}
	// minReplicas wins over the partitions: it is the user's floor.
	s = newSim(t, spec(2, 8, 10))
	want(t, "one partition behind, minReplicas 2", s.series(behind(0, 0, 0), behind(100, 40, 1), behind(200, 80, 1)), []int32{2, 2, 2})
}

// After a burst the workers stay until the lag has been within target for
// a whole stabilisation window, then halve, one window at a time.
func TestScaleInWaitsForTheStabilisationWindow(t *testing.T) {
	s := newSim(t, spec(1, 8, 30))
	want(t, "the burst", s.series(behind(0, 0, 0), behind(900, 60, 8), behind(2000, 120, 8), behind(3000, 180, 8)), []int32{1, 2, 4, 8})
	busyUntil := s.now
	perWindow := int(autoscaler.StabilizationWindow / resync)
	got := s.series(slices.Repeat([]autoscaler.Observation{behind(10, 1, 8)}, perWindow-1)...)
	want(t, "within the window", got, slices.Repeat([]int32{8}, perWindow-1))
	want(t, "at the window's end", s.series(behind(10, 1, 8)), []int32{4})
	if d := s.now.Sub(busyUntil); d != autoscaler.StabilizationWindow {
		t.Fatalf("scaled in %s after the last busy resync, want %s", d, autoscaler.StabilizationWindow)
	}
	calm := slices.Repeat([]autoscaler.Observation{behind(10, 1, 8)}, 2*perWindow)
	got = s.series(calm...)
	if got[perWindow-1] != 2 || got[2*perWindow-1] != 1 || got[perWindow-2] != 4 {
		t.Fatalf("the next two windows: %v, want 4 until the window ends, then 2, then 1", got)
	}
	// One busy reading restarts the window.
	s.series(behind(900, 40, 8)) // 1 to 2
	got = s.series(slices.Repeat([]autoscaler.Observation{behind(10, 1, 8)}, perWindow)...)
	if got[perWindow-2] != 2 || got[perWindow-1] != 1 {
		t.Fatalf("after a new busy reading: %v, want 2 for a window, then 1", got)
	}
}

// More workers than partitions with data: after a window, down to the
// most partitions that had data waiting at once, even while busy.
func TestWorkersBeyondThePartitionsWithDataAreShedAfterAWindow(t *testing.T) {
	s := newSim(t, spec(1, 8, 30))
	s.series(behind(0, 0, 0), behind(900, 60, 8), behind(2000, 120, 8), behind(3000, 180, 8))
	perWindow := int(autoscaler.StabilizationWindow / resync)
	obs := slices.Repeat([]autoscaler.Observation{behind(5000, 200, 2)}, perWindow)
	obs[3] = behind(5000, 200, 3) // the most at once in the window
	got := s.series(obs...)
	if got[perWindow-2] != 8 || got[perWindow-1] != 3 || s.reasons[len(s.reasons)-1] != autoscaler.ReasonCapped {
		t.Fatalf("busy on two or three partitions for a window: %v (%v), want 8, then 3, Capped", got, s.reasons)
	}
}

// Quiet for scaleToZeroAfter: zero. The first resync that sees data again
// wakes minReplicas.
func TestAQuietSourceScalesToZeroAndNewDataWakesMinReplicas(t *testing.T) {
	sp := spec(2, 8, 30)
	sp.ScaleToZeroAfter = &metav1.Duration{Duration: 2 * time.Minute}
	s := newSim(t, sp)
	pushed := s.now
	want(t, "started", s.series(behind(0, 0, 0)), []int32{2})
	got := s.quietFor(4, &pushed)
	want(t, "quiet", got, []int32{2, 2, 0, 0})
	if zeroAt := s.now.Add(-resync).Sub(pushed); zeroAt != 2*time.Minute {
		t.Fatalf("zero %s after the last push, want scaleToZeroAfter (2m)", zeroAt)
	}
	if s.reasons[3] != autoscaler.ReasonScaledToZero {
		t.Fatalf("reasons %v", s.reasons)
	}
	pushed = s.now.Add(time.Second)
	data := behind(40, 1, 1)
	data.LastPush = &pushed
	want(t, "data again", s.series(data), []int32{2})
	if s.reasons[len(s.reasons)-1] != autoscaler.ReasonWoke {
		t.Fatalf("reasons %v, want Woke", s.reasons)
	}
	// Pushed and consumed at once: not quiet, though nothing waits.
	pushed = s.now
	want(t, "busy without a lag", s.quietFor(3, &pushed), []int32{2, 2, 2})
}

// Windows left open keep the workers past scaleToZeroAfter: only a running
// worker's idle flush emits them once the source is quiet. Zero comes at
// the first resync that finds them all emitted.
func TestOpenWindowsKeepTheWorkersUntilTheyAreEmitted(t *testing.T) {
	sp := spec(1, 4, 30)
	sp.ScaleToZeroAfter = &metav1.Duration{Duration: time.Minute}
	s := newSim(t, sp)
	pushed := s.now
	open := autoscaler.Observation{LastPush: &pushed, OpenWindows: 40}
	want(t, "windows open", s.series(open, open, open, open, open), []int32{1, 1, 1, 1, 1})
	want(t, "emitted", s.quietFor(1, &pushed), []int32{0})
	if s.reasons[len(s.reasons)-1] != autoscaler.ReasonScaledToZero {
		t.Fatalf("reasons %v, want ScaledToZero last", s.reasons)
	}
}

// Without scaleToZeroAfter the workers stay at minReplicas however quiet.
func TestWithoutScaleToZeroAfterTheWorkersStayAtMinReplicas(t *testing.T) {
	s := newSim(t, spec(1, 4, 30))
	long := s.now.Add(-24 * time.Hour)
	got := s.quietFor(100, &long)
	if slices.Min(got) != 1 || s.elapsed() < 50*time.Minute {
		t.Fatalf("quiet for %s: replicas %v, want 1 throughout", s.elapsed(), got)
	}
}

// A source never pushed to counts as quiet from the autoscaler's start.
func TestASourceNeverPushedToIsQuietFromTheStart(t *testing.T) {
	sp := spec(1, 4, 30)
	sp.ScaleToZeroAfter = &metav1.Duration{Duration: time.Minute}
	s := newSim(t, sp)
	want(t, "never pushed", s.quietFor(4, nil), []int32{1, 1, 0, 0})
}

// Lowering maxReplicas or raising minReplicas applies at the next resync.
func TestChangedBoundsApplyAtOnce(t *testing.T) {
	s := newSim(t, spec(1, 8, 30))
	s.series(behind(0, 0, 0), behind(900, 60, 8), behind(2000, 120, 8))
	s.spec.MaxReplicas = 2
	want(t, "max lowered to 2", s.series(behind(2000, 100, 8)), []int32{2})
	s.spec.MinReplicas, s.spec.MaxReplicas = 3, 8
	want(t, "min raised to 3", s.series(behind(2000, 100, 8)), []int32{3})
	if s.reasons[len(s.reasons)-1] != autoscaler.ReasonBounded {
		t.Fatalf("reasons %v", s.reasons)
	}
}

// A reading between two resyncs (the workers' Deployment changed) does
// not scale out again before the added workers could show in the lag.
func TestTheWorkersScaleOutAtMostOncePerInterval(t *testing.T) {
	s := newSim(t, spec(1, 8, 30))
	s.series(behind(0, 0, 0), behind(900, 60, 8))
	d := autoscaler.Decide(autoscaler.Input{Spec: s.spec, Now: s.now.Add(time.Second), Obs: behind(1000, 61, 8),
		Previous: s.prev, Last: s.last, Interval: resync})
	if d.Status.Replicas != 2 {
		t.Fatalf("a second after scaling out to 2: %d (%s), want 2", d.Status.Replicas, d.Message)
	}
}
