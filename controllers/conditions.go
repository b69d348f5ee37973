package controllers

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
)

// setReady sets the Ready condition and reports whether its status or
// reason changed, which is when an Event is worth sending.
func setReady(conds *[]metav1.Condition, generation int64, ready bool, reason, message string) bool {
	before := meta.FindStatusCondition(*conds, v1.ConditionReady)
	status := metav1.ConditionFalse
	if ready {
		status = metav1.ConditionTrue
	}
	changed := before == nil || before.Status != status || before.Reason != reason
	meta.SetStatusCondition(conds, metav1.Condition{
		Type: v1.ConditionReady, Status: status, Reason: reason, Message: message, ObservedGeneration: generation,
	})
	return changed
}
