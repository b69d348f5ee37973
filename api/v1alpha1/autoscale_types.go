package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Autoscale is the operator's own autoscaler for a query's workers, fed by
// the lag it reads at every resync. It is the alternative to
// spec.workers.replicas: with autoscale set the operator owns the replica
// count, and the /scale subresource (kubectl scale, an HPA, a KEDA
// ScaledObject), which writes spec.workers.replicas, is refused.
// +kubebuilder:validation:XValidation:rule="self.minReplicas <= self.maxReplicas",message="autoscale.minReplicas may not exceed autoscale.maxReplicas"
type Autoscale struct {
	// minReplicas is the fewest workers while the source has data; only
	// scaleToZeroAfter goes below it.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	MinReplicas int32 `json:"minReplicas,omitempty"`

	// maxReplicas is the most workers. The operator never runs more than
	// the source has partitions with unconsumed messages either: the broker
	// leases a partition to one worker of the query at a time.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	MaxReplicas int32 `json:"maxReplicas"`

	// targetLagSeconds is the age of the oldest unconsumed source message
	// (status.lagSeconds) the autoscaler keeps the query under: past it,
	// and while the lag or that age grows, it adds workers.
	// +optional
	// +kubebuilder:default=30
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	TargetLagSeconds int32 `json:"targetLagSeconds,omitempty"`

	// scaleToZeroAfter, when set, scales the workers to zero once nothing
	// was pushed to the source for this long and nothing waits; the first
	// new message brings back minReplicas at the next resync. Absent: the
	// workers never go below minReplicas.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10s')",message="scaleToZeroAfter is at least 10s"
	ScaleToZeroAfter *metav1.Duration `json:"scaleToZeroAfter,omitempty"`
}

// AutoscaleStatus is what the autoscaler decided last and when, so that a
// restarted operator keeps its stabilisation window.
type AutoscaleStatus struct {
	// replicas is the autoscaler's last decision (before spec.suspend).
	Replicas int32 `json:"replicas"`
	// reason is why the autoscaler last changed the replicas, in a word:
	// Started, ScaledOut, ScaledIn, ScaledToZero, Woke, Capped or Bounded.
	Reason string `json:"reason"`
	// message says why in a sentence.
	// +optional
	Message string `json:"message,omitempty"`
	// lastScaleTime is when the autoscaler last changed replicas.
	// +optional
	LastScaleTime *metav1.Time `json:"lastScaleTime,omitempty"`
	// peakPartitionsBehind is the most partitions of the source seen with
	// data waiting at once since lastScaleTime: the workers are never
	// scaled in below it.
	// +optional
	PeakPartitionsBehind int32 `json:"peakPartitionsBehind,omitempty"`
	// lastBusyTime is when the lag was last over targetLagSeconds; the
	// workers are scaled in only a stabilisation window after it.
	// +optional
	LastBusyTime *metav1.Time `json:"lastBusyTime,omitempty"`
}
