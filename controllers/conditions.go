package controllers

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
)

// setReady sets the Ready condition and reports whether its status or
// reason changed, which is when an Event is worth sending.
func setReady(conds *[]metav1.Condition, generation int64, ready bool, reason, message string) bool {
	return setCondition(conds, v1.ConditionReady, generation, ready, reason, message)
}

// setCondition sets the condition typ and reports whether its status or
// reason changed.
func setCondition(conds *[]metav1.Condition, typ string, generation int64, on bool, reason, message string) bool {
	before := meta.FindStatusCondition(*conds, typ)
	status := metav1.ConditionFalse
	if on {
		status = metav1.ConditionTrue
	}
	changed := before == nil || before.Status != status || before.Reason != reason
	meta.SetStatusCondition(conds, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: message, ObservedGeneration: generation,
	})
	return changed
}
