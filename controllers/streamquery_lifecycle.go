package controllers

// The StreamQuery lifecycle after registration: suspend, the one-shot
// rewind and the freshness objective.
//
// Suspend is a flag on the query row (queen_streams.query_suspend), read by
// the broker inside the pop and the cycle, so it costs the hot path no
// round trip and takes effect at the commit that sets it; the operator
// writes it at every reconcile, which changes nothing when it already
// holds.
//
// A rewind needs no intent recorded in the status beforehand, unlike a
// reset: queen_streams.query_rewind records the annotation value on the
// query row in the transaction that rewinds, and a second call with the
// same value changes nothing and answers what the first did. So an
// operator that dies after the rewind committed and before status.lastRewind
// was written records it at its next reconcile, without rewinding again.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
	"github.com/regent-mq/regent/broker/pg/celldb"
)

// consumerGroup is the consumer group the query's workers pop its source as.
func consumerGroup(q *v1.StreamQuery) string { return v1.ConsumerGroup(q.QueryName()) }

// lifecycle applies spec.suspend, the rewind-to annotation and the
// savepoint annotation to the registered query.
func (r *StreamQueryReconciler) lifecycle(ctx context.Context, s *step) error {
	if err := r.suspend(ctx, s); err != nil {
		return err
	}
	if err := r.rewind(ctx, s); err != nil {
		return err
	}
	return r.savepoints(ctx, s)
}

func (r *StreamQueryReconciler) suspend(ctx context.Context, s *step) error {
	q := s.q
	found, err := r.DB.Suspend(ctx, s.tenant, q.QueryName(), consumerGroup(q), q.Spec.Suspend)
	if err != nil || !found {
		return err // not found: deleted behind the operator's back; the next resync registers it again
	}
	status, reason, msg := metav1.ConditionFalse, v1.ReasonRunning, "the query's workers pop and cycle as usual"
	if q.Spec.Suspend {
		status, reason, msg = metav1.ConditionTrue, v1.ReasonSuspended,
			fmt.Sprintf("spec.suspend: the broker answers consumer group %s with nothing and refuses the query's cycles; the cursors stay where they are", consumerGroup(q))
	}
	before := conditionStatus(q.Status.Conditions, v1.ConditionSuspended)
	meta.SetStatusCondition(&q.Status.Conditions, metav1.Condition{
		Type: v1.ConditionSuspended, Status: status, Reason: reason, Message: msg, ObservedGeneration: q.Generation,
	})
	switch {
	case before == status:
	case q.Spec.Suspend:
		r.event(q, corev1.EventTypeNormal, "Suspended", "Suspend", msg)
	case before != "":
		r.event(q, corev1.EventTypeNormal, "Resumed", "Suspend", "spec.suspend is off: the query's workers resume where the cursors stand")
	}
	return nil
}

func (r *StreamQueryReconciler) rewind(ctx context.Context, s *step) error {
	q, st := s.q, &s.q.Status
	token := q.Annotations[v1.RewindToAnnotation]
	if token == "" || (st.LastRewind != nil && st.LastRewind.To == token) {
		return nil
	}
	to, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(token))
	if err != nil {
		r.event(q, corev1.EventTypeWarning, "InvalidRewind", "Rewind", fmt.Sprintf(
			"%s annotation %q is not an RFC 3339 time (such as 2026-08-17T10:00:00Z): nothing was rewound", v1.RewindToAnnotation, token))
		return nil
	}
	rw, err := r.DB.Rewind(ctx, s.tenant, q.QueryName(), consumerGroup(q), token, to)
	switch {
	case errors.Is(err, celldb.ErrNoQuery):
		return nil // deleted behind the operator's back; the next resync registers it again
	case err != nil:
		return err
	}
	st.LastRewind = &v1.Rewind{To: token, Time: metav1.NewTime(rw.At.Truncate(time.Second)), Partitions: rw.Partitions}
	msg := fmt.Sprintf("rewound query %q of tenant %q to %s: deleted its state and moved consumer group %s on %d source partitions to the first message at or after that time (%s annotation)",
		q.QueryName(), s.tenant, to.Format(time.RFC3339Nano), consumerGroup(q), rw.Partitions, v1.RewindToAnnotation)
	if rw.Already {
		msg += "; an earlier attempt had already done it"
	}
	r.event(q, corev1.EventTypeNormal, "Rewound", "Rewind", msg)
	return nil
}

// fresh sets the Fresh condition from the progress just read, with an
// Event when it changes; without spec.freshness there is no condition.
func (r *StreamQueryReconciler) fresh(s *step) {
	q, st := s.q, &s.q.Status
	f := q.Spec.Freshness
	if f == nil || st.Lag == nil || st.LagSeconds == nil {
		meta.RemoveStatusCondition(&st.Conditions, v1.ConditionFresh)
		return
	}
	var over []string
	if f.MaxLag != nil && *st.Lag > *f.MaxLag {
		over = append(over, fmt.Sprintf("lag %d messages exceeds maxLag %d", *st.Lag, *f.MaxLag))
	}
	if f.MaxLagSeconds != nil && *st.LagSeconds > *f.MaxLagSeconds {
		over = append(over, fmt.Sprintf("the oldest unconsumed message is %d s old, beyond maxLagSeconds %d", *st.LagSeconds, *f.MaxLagSeconds))
	}
	status, reason, msg := metav1.ConditionTrue, v1.ReasonWithinObjective,
		fmt.Sprintf("lag %d messages, oldest unconsumed message %d s old: within spec.freshness", *st.Lag, *st.LagSeconds)
	typ := corev1.EventTypeNormal
	if len(over) > 0 {
		status, reason, msg, typ = metav1.ConditionFalse, v1.ReasonLagExceeded, strings.Join(over, "; "), corev1.EventTypeWarning
	}
	before := conditionStatus(st.Conditions, v1.ConditionFresh)
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: v1.ConditionFresh, Status: status, Reason: reason, Message: msg, ObservedGeneration: q.Generation,
	})
	if before != status {
		r.event(q, typ, reason, "Freshness", msg)
	}
}

// conditionStatus is the status of the condition of type typ, empty when
// there is none. (SetStatusCondition changes a found condition in place.)
func conditionStatus(conds []metav1.Condition, typ string) metav1.ConditionStatus {
	if c := meta.FindStatusCondition(conds, typ); c != nil {
		return c.Status
	}
	return ""
}
