package controllers

// The operator's autoscaler for a query with spec.workers.autoscale: at
// every reconcile that read the query's progress, it reads how loaded the
// source is (celldb.SourceLoad) and lets package autoscaler decide the
// replicas, which status.workers.autoscaler keeps (so that a restarted
// operator keeps its stabilisation window) and the Deployment follows.
// Every change is an Event. spec.suspend forgets the decision: resume
// starts again at minReplicas.

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
	"github.com/regent-mq/regent/broker/pg/celldb"
	"github.com/regent-mq/regent/controllers/autoscaler"
	"github.com/regent-mq/regent/pipeline"
)

func autoscaleOf(q *v1.StreamQuery) *v1.Autoscale {
	if q.Spec.Workers == nil {
		return nil
	}
	return q.Spec.Workers.Autoscale
}

// autoscale records the autoscaler's decision for the query in
// status.workers.autoscaler.
func (r *StreamQueryReconciler) autoscale(ctx context.Context, s *step) error {
	q := s.q
	spec := autoscaleOf(q)
	if spec == nil || q.Spec.Suspend {
		if q.Status.Workers != nil {
			q.Status.Workers.Autoscaler = nil
		}
		return nil
	}
	if !s.progressRead {
		return nil // nothing new to decide on: the last decision holds
	}
	load, err := r.DB.SourceLoad(ctx, s.tenant, q.QueryName(), q.Spec.SourceQueue, consumerGroup(q),
		celldb.WindowKeys{Prefix: pipeline.Prefix, Clock: pipeline.ClockKey})
	if err != nil {
		return err
	}
	in := autoscaler.Input{
		Spec: *spec,
		Now:  time.Now(),
		Obs: autoscaler.Observation{Lag: *q.Status.Lag, LagSeconds: *q.Status.LagSeconds,
			PartitionsBehind: load.PartitionsBehind, LastPush: load.LastPush, OpenWindows: load.OpenWindows},
		Interval: r.ResyncInterval,
	}
	if b := s.before; b.Lag != nil && b.LagSeconds != nil {
		in.Previous = &autoscaler.Observation{Lag: *b.Lag, LagSeconds: *b.LagSeconds}
	}
	if q.Status.Workers == nil {
		q.Status.Workers = &v1.WorkersStatus{}
	}
	in.Last, in.Running = q.Status.Workers.Autoscaler, q.Status.Workers.Desired
	d := autoscaler.Decide(in)
	if d.Changed(in) {
		r.event(q, corev1.EventTypeNormal, d.Reason, "Autoscale", d.Message)
	}
	q.Status.Workers.Autoscaler = &d.Status
	return nil
}

// autoscaledReplicas is the autoscaler's last decision, or minReplicas
// before the first.
func autoscaledReplicas(q *v1.StreamQuery, spec *v1.Autoscale) int32 {
	if w := q.Status.Workers; w != nil && w.Autoscaler != nil {
		return w.Autoscaler.Replicas
	}
	return max(spec.MinReplicas, 1)
}
