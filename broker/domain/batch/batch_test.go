package batch_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/regent-mq/regent/broker/domain/batch"
	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/pgtest"
)

func newSizes() prometheus.Observer {
	return prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sizes"})
}

func newWaiting() prometheus.Gauge { return prometheus.NewGauge(prometheus.GaugeOpts{Name: "waiting"}) }

// call is a request whose answer the run function writes.
type call struct {
	n     int
	batch int // the size of the batch that answered it
}

// Every request a test sends ends before it does.
func TestMain(m *testing.M) { os.Exit(pgtest.NoLeaks(m.Run())) }

func TestARequestThatFindsACallFreeRunsAloneAndAtOnce(t *testing.T) {
	var sizes []int
	j := batch.New(1, 8, newSizes(), newWaiting(), func(_ context.Context, b []*call) {
		sizes = append(sizes, len(b))
		for _, c := range b {
			c.batch = len(b)
		}
	})
	for i := range 3 {
		c := &call{n: i}
		if err := j.Do(context.Background(), c); err != nil {
			t.Fatal(err)
		}
		if c.batch != 1 {
			t.Fatalf("request %d ran in a batch of %d, want 1", i, c.batch)
		}
	}
	if len(sizes) != 3 {
		t.Fatalf("%d calls, want 3", len(sizes))
	}
}

// held is a run function whose first call waits until release is closed,
// so that the requests sent meanwhile queue.
type held struct {
	mu      sync.Mutex
	started chan struct{}
	release chan struct{}
	sizes   []int
	first   bool
}

func newHeld() *held {
	return &held{started: make(chan struct{}), release: make(chan struct{}), first: true}
}

func (h *held) run(_ context.Context, b []*call) {
	h.mu.Lock()
	first := h.first
	h.first = false
	h.sizes = append(h.sizes, len(b))
	h.mu.Unlock()
	if first {
		close(h.started)
		<-h.release
	}
	for _, c := range b {
		c.batch = len(b)
	}
}

// sendWhileHeld sends n requests while the first call is held, and returns
// once they all wait.
// waiting waits until at least n requests wait for j's next call.
func waiting(t *testing.T, j *batch.Joiner[*call], n int) {
	t.Helper()
	brokertest.Eventually(t, 10*time.Second, func() error {
		if w := j.Waiting(); w < n {
			return fmt.Errorf("%d requests wait, want %d", w, n)
		}
		return nil
	})
}

func sendWhileHeld(t *testing.T, j *batch.Joiner[*call], h *held, ctx context.Context, n int) ([]*call, chan error) {
	t.Helper()
	errs := make(chan error, n+1)
	go func() { errs <- j.Do(context.Background(), &call{n: -1}) }()
	<-h.started
	calls := make([]*call, n)
	for i := range calls {
		calls[i] = &call{n: i}
		go func() { errs <- j.Do(ctx, calls[i]) }()
	}
	waiting(t, j, n)
	return calls, errs
}

func TestRequestsThatArriveWhileTheCallIsInFlightJoinTheNextCall(t *testing.T) {
	h := newHeld()
	j := batch.New(1, 64, newSizes(), newWaiting(), h.run)
	calls, errs := sendWhileHeld(t, j, h, context.Background(), 5)
	close(h.release)
	for range 6 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range calls {
		if c.batch != 5 {
			t.Errorf("request %d ran in a batch of %d, want 5 (sizes %v)", c.n, c.batch, h.sizes)
		}
	}
}

func TestABatchIsAtMostMaxBatchRequests(t *testing.T) {
	h := newHeld()
	j := batch.New(1, 2, newSizes(), newWaiting(), h.run)
	_, errs := sendWhileHeld(t, j, h, context.Background(), 5)
	close(h.release)
	for range 6 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	total := 0
	for _, n := range h.sizes {
		if n > 2 {
			t.Errorf("a batch of %d, want at most 2 (sizes %v)", n, h.sizes)
		}
		total += n
	}
	if total != 6 {
		t.Errorf("%d requests answered, want 6 (sizes %v)", total, h.sizes)
	}
}

func TestAWaitingRequestWhoseContextEndsLeavesTheQueue(t *testing.T) {
	h := newHeld()
	j := batch.New(1, 64, newSizes(), newWaiting(), h.run)
	ctx, cancel := context.WithCancel(context.Background())
	calls, errs := sendWhileHeld(t, j, h, ctx, 3)
	cancel()
	for range 3 {
		if err := <-errs; !errors.Is(err, context.Canceled) {
			t.Fatalf("Do = %v, want context.Canceled", err)
		}
	}
	close(h.release)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	for _, c := range calls {
		if c.batch != 0 {
			t.Errorf("request %d was run after its context ended", c.n)
		}
	}
	// The slot is free again: the next request runs alone.
	c := &call{}
	if err := j.Do(context.Background(), c); err != nil || c.batch != 1 {
		t.Fatalf("Do = %v in a batch of %d, want a batch of 1", err, c.batch)
	}
}

func TestCallsRunInParallelUpToTheirNumber(t *testing.T) {
	var mu sync.Mutex
	inflight, peak := 0, 0
	release := make(chan struct{})
	j := batch.New(3, 64, newSizes(), newWaiting(), func(_ context.Context, b []*call) {
		mu.Lock()
		inflight++
		peak = max(peak, inflight)
		mu.Unlock()
		<-release
		mu.Lock()
		inflight--
		mu.Unlock()
	})
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := j.Do(context.Background(), &call{}); err != nil {
				t.Error(err)
			}
		}()
	}
	waiting(t, j, 7)
	close(release)
	wg.Wait()
	if peak != 3 {
		t.Fatalf("%d calls in flight at most, want 3", peak)
	}
}
