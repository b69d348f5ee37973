package cluster_test

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/cluster"
	"github.com/regent-mq/regent/test/pgtest"
	"github.com/regent-mq/regent/test/pushload"
)

// TestAFailOverLosesNoAcknowledgedPush pushes through three brokers on a
// primary with a synchronous standby, crashes the primary (immediate
// shutdown) and promotes the standby. The brokers use a multi-host URL with
// target_session_attrs=read-write, so they reconnect to the new primary
// without a restart. Every push answered 201 must be there afterwards, once.
func TestAFailOverLosesNoAcknowledgedPush(t *testing.T) {
	t.Parallel()
	pair := pgtest.StartPair(t)
	bs := cluster.Start(t, pair.URL("postgres"), 3)
	load := pushload.Start(urls(bs), "fo", "")

	var failed, sawDown, sawUp atomic.Bool
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			resp, err := pushload.Client.Get(bs[0].URL + "/health")
			if err != nil || !failed.Load() {
				continue
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusServiceUnavailable {
				sawDown.Store(true)
			} else if resp.StatusCode == http.StatusOK && sawDown.Load() {
				sawUp.Store(true)
			}
		}
	})
	defer func() {
		close(stop)
		wg.Wait()
	}()

	if !load.WaitFlowing(20, 30*time.Second) {
		load.Halt()
		t.Fatal("the load never flowed through every broker")
	}
	load.Mark(true)
	failed.Store(true)
	crashed := time.Now()
	if err := pair.FailOver(); err != nil {
		load.Halt()
		t.Fatal(err)
	}
	promoted := time.Since(crashed)
	recovered := load.WaitFlowing(20, 60*time.Second)
	load.Halt()
	t.Logf("failover: standby promoted %v after the crash; answers %v; health down %v, then up %v; push p99 from the crash on %v",
		promoted.Round(time.Millisecond), load.Statuses, sawDown.Load(), sawUp.Load(), load.P99().Round(time.Millisecond))
	if !recovered {
		t.Fatalf("the brokers did not recover within 60s of the promotion without a restart: 201s since it per broker %v", load.Since)
	}
	if !sawDown.Load() || !sawUp.Load() {
		t.Errorf("/health reported the outage %v and the recovery %v, want both", sawDown.Load(), sawUp.Load())
	}
	acked, lost, dup := load.Verify(t, brokertest.At(bs[0].URL))
	t.Logf("figures: 1 failover, %d pushes acknowledged, %d lost, %d duplicated", acked, lost, dup)
}
