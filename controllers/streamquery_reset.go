package controllers

// Resets. A reset deletes every state row of a query, so it must happen
// exactly once for each new config hash (onConfigChange: Reset) and each new
// reset-token value, even when the operator dies half-way. The broker's
// reset cannot be made conditional, so the operator keeps a witness it can
// read back: the query's reset generation (see celldb.DB.ResetGeneration),
// which the broker raises in the same transaction that deletes the state.
//
//  1. Read the reset generation.
//  2. Record status.pendingReset with that generation, against the resource
//     version read.
//  3. Register with reset: true.
//  4. Record the reset as done (lastResetHash, lastResetToken) and clear
//     pendingReset.
//
// An operator that starts with pendingReset recorded reads the generation
// again: still the recorded one, no reset has committed since step 1, so it
// carries out step 3; any other, or no registration at all, and the state
// the reset was to discard is gone, so only step 4 is left. Dying between
// steps 1 and 2 leaves nothing behind, and the next attempt starts over
// from step 1. A cached copy of the object can lag behind the operator's own
// last write, which could make it start a reset it has already finished, so
// steps 1 and 2 and the generation read on resuming only run when a read
// past the cache shows the same resource version.
//
// The witness cannot see one case: a registration that someone else deletes
// after step 1 read generation 0 is created afresh, at 0, by step 3, and an
// operator that dies before step 4 then resets the new registration once
// more. The broker would close it by raising the generation of a reset
// registration that creates the query, too.
//
// A config change needs no witness to avoid a second reset (after the
// reset the broker holds the new hash, so the next registration no longer
// conflicts), but it goes through the same steps so that lastResetHash
// records it: a conflict over a hash already reset for means someone else
// re-registered the query, and the operator reports it instead of
// resetting again.

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
	"github.com/regent-mq/regent/broker/pg/celldb"
	"github.com/regent-mq/regent/controllers/registration"
)

// startReset commits to the reset pr and carries it out.
func (r *StreamQueryReconciler) startReset(ctx context.Context, s *step, pr v1.PendingReset) (ctrl.Result, error) {
	if current, err := r.cacheIsCurrent(ctx, s.q); err != nil || !current {
		return retrySoon, err
	}
	g, err := r.DB.ResetGeneration(ctx, s.tenant, s.q.QueryName())
	if errors.Is(err, celldb.ErrNoQuery) {
		// Not registered yet, so there is no state to discard: register,
		// and the token has had its effect.
		res := r.register(ctx, s, pr.ConfigHash, false)
		if res.Outcome == registration.Registered && pr.Token != "" {
			s.q.Status.LastResetToken = pr.Token
		}
		return r.settle(ctx, s, res)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	pr.Generation = g
	s.q.Status.PendingReset = &pr
	if err := r.writeStatus(ctx, s); err != nil {
		return conflictOr(err)
	}
	return r.carryOutReset(ctx, s)
}

// resumeReset finishes the reset recorded in status.pendingReset.
func (r *StreamQueryReconciler) resumeReset(ctx context.Context, s *step) (ctrl.Result, error) {
	if current, err := r.cacheIsCurrent(ctx, s.q); err != nil || !current {
		return retrySoon, err
	}
	g, err := r.DB.ResetGeneration(ctx, s.tenant, s.q.QueryName())
	if err != nil && !errors.Is(err, celldb.ErrNoQuery) {
		return ctrl.Result{}, err
	}
	if err == nil && g == s.q.Status.PendingReset.Generation {
		return r.carryOutReset(ctx, s)
	}
	// The reset committed before it could be recorded (or the registration
	// is gone, and its state with it): record it, then reconcile as usual.
	r.completeReset(s, "an earlier attempt had already done it")
	if err := r.writeStatus(ctx, s); err != nil {
		return conflictOr(err)
	}
	return retrySoon, nil
}

// carryOutReset sends the reset recorded in status.pendingReset.
func (r *StreamQueryReconciler) carryOutReset(ctx context.Context, s *step) (ctrl.Result, error) {
	res := r.register(ctx, s, s.q.Status.PendingReset.ConfigHash, true)
	if res.Outcome == registration.Registered {
		r.completeReset(s, "")
	}
	return r.settle(ctx, s, res)
}

func (r *StreamQueryReconciler) completeReset(s *step, note string) {
	st := &s.q.Status
	pr := *st.PendingReset
	st.LastResetHash = pr.ConfigHash
	if pr.Token != "" {
		st.LastResetToken = pr.Token
	}
	st.PendingReset = nil
	msg := fmt.Sprintf("reset query %q of tenant %q: deleted its state and registered config hash %q (%s)", s.q.QueryName(), s.tenant, pr.ConfigHash, why(pr))
	if note != "" {
		msg += "; " + note
	}
	r.event(s.q, corev1.EventTypeNormal, "Reset", "Reset", msg)
}

func why(pr v1.PendingReset) string {
	if pr.Token != "" {
		return fmt.Sprintf("%s annotation set to %q", v1.ResetTokenAnnotation, pr.Token)
	}
	return "config hash changed under upgradeMode Reset or Savepoint"
}

// cacheIsCurrent reports whether q, read from the cache, is the latest
// version of the object.
func (r *StreamQueryReconciler) cacheIsCurrent(ctx context.Context, q *v1.StreamQuery) (bool, error) {
	var live v1.StreamQuery
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(q), &live); err != nil {
		return false, fmt.Errorf("read StreamQuery %s/%s: %w", q.Namespace, q.Name, err)
	}
	return live.ResourceVersion == q.ResourceVersion, nil
}
