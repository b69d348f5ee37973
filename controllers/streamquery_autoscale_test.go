package controllers_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
	"github.com/regent-mq/regent/broker/pg/celldb"
	"github.com/regent-mq/regent/controllers"
	"github.com/regent-mq/regent/controllers/autoscaler"
	"github.com/regent-mq/regent/test/brokertest"
)

func autoscaled(min, max, target int32) func(*v1.StreamQuery) {
	return func(q *v1.StreamQuery) {
		q.Spec.Workers = &v1.Workers{Autoscale: &v1.Autoscale{MinReplicas: min, MaxReplicas: max, TargetLagSeconds: target}}
	}
}

// pushPartitions pushes one message to each of acme's orders partitions
// p0 .. p<n-1>.
func (h *harness) pushPartitions(n int) {
	h.t.Helper()
	items := make([]map[string]any, n)
	for i := range items {
		items[i] = map[string]any{"queue": "orders", "partition": fmt.Sprintf("p%d", i), "payload": map[string]any{"n": i}}
	}
	if r := h.broker.Do(h.t, "POST", "/api/v1/push", h.token(h.tenant("acme")), map[string]any{"items": items}); r.Status != http.StatusCreated {
		h.t.Fatalf("push: %d %s", r.Status, r.Body)
	}
}

// A burst nobody consumes, on three partitions: the oldest message ages
// past targetLagSeconds while the lag grows, so the operator scales the
// Deployment out, and no further than the three partitions with data,
// though maxReplicas is 4.
func TestTheWorkersDeploymentFollowsTheAutoscalerOnAFedLag(t *testing.T) {
	const resync = 300 * time.Millisecond
	h, _, _, q := registered(t, operatorOpts{resync: resync}, revenuePipeline, autoscaled(1, 4, 1))
	dep, _, _ := h.workers(q)
	eventually(h, dep, "started at minReplicas", func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == 1 })
	h.wantEvent(q, autoscaler.ReasonStarted, "minReplicas 1")

	start := time.Now()
	brokertest.Eventually(t, 30*time.Second, func() error {
		h.pushPartitions(3)
		if err := h.k8s.Get(h.ctx, client.ObjectKeyFromObject(dep), dep); err != nil {
			return err
		}
		if *dep.Spec.Replicas < 3 {
			return fmt.Errorf("the Deployment has %d replicas %s into the burst, want 3", *dep.Spec.Replicas, time.Since(start).Round(time.Second))
		}
		return nil
	})
	t.Logf("scaled out from 1 to 3 workers %s into the burst", time.Since(start).Round(100*time.Millisecond))
	h.wantEvent(q, autoscaler.ReasonScaledOut, "scaled out from 1 to 2")
	h.wantEvent(q, autoscaler.ReasonScaledOut, "to 3 (at most the 3 partitions of the source with data waiting)")

	// Ten more resyncs of a growing lag: still three. Real time: the
	// autoscaler decides once per resync, and nothing tells a test that
	// it decided to stay.
	for range 10 {
		h.pushPartitions(3)
		time.Sleep(resync)
	}
	q = eventually(h, q, "capped at 3", func(q *v1.StreamQuery) bool {
		w := q.Status.Workers
		return w != nil && w.Desired == 3 && w.Autoscaler != nil && w.Autoscaler.Replicas == 3 && w.Autoscaler.Reason == autoscaler.ReasonScaledOut
	})
	if err := h.k8s.Get(h.ctx, client.ObjectKeyFromObject(dep), dep); err != nil || *dep.Spec.Replicas != 3 {
		t.Fatalf("Deployment replicas %d (%v) after ten more resyncs, want 3: the partitions with data", *dep.Spec.Replicas, err)
	}
}

// A source nobody pushes to: after scaleToZeroAfter the Deployment has no
// replicas; the first message wakes minReplicas within a resync or two.
// The source's last message, consumed, is aged by scaleToZeroAfter (the
// API's least, 10 s) rather than waited out; the autoscaler's own tests
// cover a source that never had one.
func TestAQuietSourceScalesTheWorkersToZeroAndNewDataWakesThem(t *testing.T) {
	const resync = 300 * time.Millisecond
	const after = 10 * time.Second
	h, _, _, q := registered(t, operatorOpts{resync: resync}, revenuePipeline, func(q *v1.StreamQuery) {
		autoscaled(2, 4, 30)(q)
		q.Spec.Workers.Autoscale.ScaleToZeroAfter = &metav1.Duration{Duration: after}
	})
	dep, _, _ := h.workers(q)
	eventually(h, dep, "started at minReplicas", func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == 2 })
	h.pushOrders(1)
	if n := h.consumeOrders(1); n != 1 {
		t.Fatalf("consumed %d messages of the source, want its one", n)
	}
	if err := h.broker.DB.Age(h.ctx, h.tenant("acme"), "orders", after); err != nil {
		t.Fatal(err)
	}
	eventually(h, dep, "scaled to zero", func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == 0 })
	h.wantEvent(q, autoscaler.ReasonScaledToZero, "scaled to zero")

	h.pushPartitions(1)
	pushed := time.Now()
	eventually(h, dep, "woken", func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == 2 })
	t.Logf("woke 2 workers %s after the push", time.Since(pushed).Round(100*time.Millisecond))
	h.wantEvent(q, autoscaler.ReasonWoke, "woke 2 workers")
}

// Suspend scales an autoscaled query's workers to zero and forgets the
// decision; resume starts again at minReplicas.
func TestSuspendScalesAnAutoscaledQueryToZeroAndResumeStartsAtMinReplicas(t *testing.T) {
	h, _, _, q := registered(t, operatorOpts{}, revenuePipeline, autoscaled(2, 4, 30))
	dep, _, _ := h.workers(q)
	eventually(h, dep, "at minReplicas", func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == 2 })

	edit(h, q, func(q *v1.StreamQuery) { q.Spec.Suspend = true })
	eventually(h, dep, "scaled to zero", func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == 0 })
	eventually(h, q, "without a decision", func(q *v1.StreamQuery) bool {
		return q.Status.Workers != nil && q.Status.Workers.Desired == 0 && q.Status.Workers.Autoscaler == nil
	})

	edit(h, q, func(q *v1.StreamQuery) { q.Spec.Suspend = false })
	eventually(h, dep, "back at minReplicas", func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == 2 })
	eventually(h, q, "started again", func(q *v1.StreamQuery) bool {
		w := q.Status.Workers
		return w != nil && w.Desired == 2 && w.Autoscaler != nil && w.Autoscaler.Reason == autoscaler.ReasonStarted
	})
}

// kubectl scale, an HPA or KEDA write spec.workers.replicas through the
// /scale subresource; the Deployment follows, and /scale reads the ready
// workers and the selector of their pods.
func TestScalingTheStreamQueryThroughTheScaleSubresourceScalesItsWorkers(t *testing.T) {
	h, _, _, q := registered(t, operatorOpts{}, revenuePipeline, func(q *v1.StreamQuery) {
		q.Spec.Workers = &v1.Workers{Replicas: ptr.To[int32](1)}
	})
	dep, _, _ := h.workers(q)
	var sc autoscalingv1.Scale
	q = eventually(h, q, "with a selector", func(q *v1.StreamQuery) bool { return q.Status.Workers != nil && q.Status.Workers.Selector != "" })
	if err := h.k8s.SubResource("scale").Get(h.ctx, q, &sc); err != nil {
		t.Fatal(err)
	}
	if want := "app.kubernetes.io/name=regent-worker,streams.regent.dev/streamquery=" + q.Name; sc.Spec.Replicas != 1 || sc.Status.Selector != want {
		t.Fatalf("scale %+v, want 1 replica and selector %s", sc, want)
	}
	sc.Spec.Replicas = 3
	if err := h.k8s.SubResource("scale").Update(h.ctx, q, client.WithSubResourceBody(&sc)); err != nil {
		t.Fatal(err)
	}
	eventually(h, dep, "scaled to 3", func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == 3 })
	eventually(h, q, "desiring 3", func(q *v1.StreamQuery) bool { return q.Status.Workers != nil && q.Status.Workers.Desired == 3 })
}

// unreadableSource is a cell database whose source load cannot be read.
type unreadableSource struct{ controllers.CellDB }

func (unreadableSource) SourceLoad(context.Context, string, string, string, string, celldb.WindowKeys) (celldb.SourceLoad, error) {
	return celldb.SourceLoad{}, errors.New("the source cannot be read")
}

// When the source's load cannot be read the autoscaler decides nothing,
// and the Deployment is applied all the same, at minReplicas.
func TestAnUnreadableSourceDecidesNothingAndTheWorkersStillRun(t *testing.T) {
	h, _, _, q := registered(t, operatorOpts{db: func(db controllers.CellDB) controllers.CellDB { return unreadableSource{db} }},
		revenuePipeline, autoscaled(2, 4, 30))
	dep, _, _ := h.workers(q)
	if *dep.Spec.Replicas != 2 {
		t.Fatalf("Deployment replicas %d, want minReplicas 2", *dep.Spec.Replicas)
	}
	q = eventually(h, q, "reporting its workers", func(q *v1.StreamQuery) bool {
		return q.Status.Workers != nil && q.Status.Workers.Desired == 2
	})
	if q.Status.Workers.Autoscaler != nil {
		t.Fatalf("a decision %+v without the source's load", q.Status.Workers.Autoscaler)
	}
	h.noEvent(q, autoscaler.ReasonStarted)
}
