package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Reasons of the TenantQuota's Ready condition.
const (
	// ReasonApplied: the quota row holds this TenantQuota's grant.
	ReasonApplied = "Applied"
	// ReasonConflict: an older TenantQuota names the same tenant, and this
	// one is ignored.
	ReasonConflict = "Conflict"
	// ReasonDatabaseUnavailable: the quota row could not be written.
	ReasonDatabaseUnavailable = "DatabaseUnavailable"
)

// ConditionQuotaExceeded is True while a limit of the quota refuses the
// tenant's requests; its reasons are ReasonRefusing and ReasonWithinLimits.
const ConditionQuotaExceeded = "QuotaExceeded"

// Reasons of the QuotaExceeded condition, and of the Events when it changes.
const (
	// ReasonRefusing: the brokers refused requests of the tenant by a limit
	// within the last refresh; the message names the limits.
	ReasonRefusing = "Refusing"
	// ReasonWithinLimits: no limit refused the tenant within the last
	// refresh.
	ReasonWithinLimits = "WithinLimits"
)

// TenantQuotaSpec grants a tenant the right to register streaming queries,
// and sets the limits that keep it from starving its neighbours. Every limit
// is optional: absent means none. The default tenant is never limited.
type TenantQuotaSpec struct {
	// tenant is the tenant granted. It is a namespace's
	// streams.regent.dev/tenant label value or, with tenancy on, a namespace
	// name, so it has the syntax of a label value. It cannot change.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="tenant is immutable"
	Tenant string `json:"tenant"`

	// enabled says whether the tenant may register new query names. A
	// disabled grant refuses new names; existing queries keep running.
	// +optional
	// +kubebuilder:default=true
	Enabled *bool `json:"enabled,omitempty"`

	// maxQueries is the most queries the tenant may have registered; absent
	// means no cap. The broker enforces it exactly, even when registrations
	// race.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxQueries *int32 `json:"maxQueries,omitempty"`

	// maxQueues is the most queues the tenant may have; a push or configure
	// that would create one more is refused (429). Exact, even when creates
	// race. Absent means no cap.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxQueues *int32 `json:"maxQueues,omitempty"`

	// push limits the tenant's pushes, across every broker replica
	// together. A push over a limit stores nothing and is refused (429 with
	// Retry-After).
	// +optional
	Push *PushQuota `json:"push,omitempty"`

	// pop limits the messages the tenant's pops deliver, across every broker
	// replica together.
	// +optional
	Pop *PopQuota `json:"pop,omitempty"`

	// maxStoredBytes caps the compressed log bytes the tenant's queues hold;
	// a push that would pass it stores nothing and is refused (429), and a
	// cycle whose sink emits would fails as a whole (success false). The
	// brokers check it against the stored bytes they read every second, so
	// the pushes of the last second to other replicas can pass it.
	// Retention frees room. Absent means no cap.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxStoredBytes *int64 `json:"maxStoredBytes,omitempty"`

	// maxStateRows caps the state rows of all the tenant's queries
	// together; a cycle that would pass it fails as a whole (success false,
	// an error naming maxStateRows). Exact. Absent means no cap.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxStateRows *int64 `json:"maxStateRows,omitempty"`
}

// PushQuota holds the push rates: token buckets that refill at the rate per
// second up to the burst (the rate when absent).
// +kubebuilder:validation:XValidation:rule="!has(self.messagesBurst) || has(self.messagesPerSecond)",message="messagesBurst needs messagesPerSecond"
// +kubebuilder:validation:XValidation:rule="!has(self.messagesBurst) || !has(self.messagesPerSecond) || self.messagesBurst >= self.messagesPerSecond",message="messagesBurst must be at least messagesPerSecond"
// +kubebuilder:validation:XValidation:rule="!has(self.bytesBurst) || has(self.bytesPerSecond)",message="bytesBurst needs bytesPerSecond"
// +kubebuilder:validation:XValidation:rule="!has(self.bytesBurst) || !has(self.bytesPerSecond) || self.bytesBurst >= self.bytesPerSecond",message="bytesBurst must be at least bytesPerSecond"
type PushQuota struct {
	// messagesPerSecond is the messages the tenant may push per second.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MessagesPerSecond *int64 `json:"messagesPerSecond,omitempty"`
	// messagesBurst is the most messages pushed at once after a pause; a
	// push of more items is always refused.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MessagesBurst *int64 `json:"messagesBurst,omitempty"`
	// bytesPerSecond is the compressed bytes the tenant may push per second.
	// +optional
	// +kubebuilder:validation:Minimum=1
	BytesPerSecond *int64 `json:"bytesPerSecond,omitempty"`
	// bytesBurst is the most compressed bytes pushed at once after a pause.
	// +optional
	// +kubebuilder:validation:Minimum=1
	BytesBurst *int64 `json:"bytesBurst,omitempty"`
}

// PopQuota holds the pop rate.
type PopQuota struct {
	// messagesPerSecond is the messages the tenant's pops may deliver per
	// second; a pop while the rate is spent is refused (429).
	// +optional
	// +kubebuilder:validation:Minimum=1
	MessagesPerSecond *int64 `json:"messagesPerSecond,omitempty"`
}

// TenantQuotaUsage is what the tenant uses, read from the counters the
// brokers keep.
type TenantQuotaUsage struct {
	// queues the tenant has.
	Queues int64 `json:"queues"`
	// queries the tenant has registered.
	Queries int64 `json:"queries"`
	// storedBytes are the compressed log bytes the tenant's queues hold.
	StoredBytes int64 `json:"storedBytes"`
	// stateRows are the state rows of all the tenant's queries.
	StateRows int64 `json:"stateRows"`
	// pushedLastMinute are the messages pushed over the last minute (in
	// 10-second buckets, so 50 to 60 seconds of them).
	PushedLastMinute int64 `json:"pushedLastMinute"`
	// poppedLastMinute are the messages popped over the last minute.
	PoppedLastMinute int64 `json:"poppedLastMinute"`
	// refreshedAt is when the operator read these.
	RefreshedAt metav1.Time `json:"refreshedAt"`
}

// TenantQuotaStatus is what the operator last wrote and counted.
type TenantQuotaStatus struct {
	// observedGeneration is the generation of the spec the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// registeredQueries is the number of queries the tenant has registered
	// on the broker.
	// +optional
	RegisteredQueries *int64 `json:"registeredQueries,omitempty"`

	// usage is what the tenant uses, refreshed every 15 seconds (or the
	// operator's resync interval, when shorter); absent on a TenantQuota
	// that is ignored.
	// +optional
	Usage *TenantQuotaUsage `json:"usage,omitempty"`

	// conditions holds Ready, whose reason is Applied, Conflict or
	// DatabaseUnavailable, and QuotaExceeded, True while a limit refuses
	// the tenant's requests.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// TenantQuota grants a tenant the right to register streaming queries,
// up to a cap. The operator writes it to the broker's quota table; deleting
// it removes the grant, which refuses new query names but leaves existing
// queries running.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=tq,categories=regent
// +kubebuilder:printcolumn:name="Tenant",type=string,JSONPath=`.spec.tenant`
// +kubebuilder:printcolumn:name="Enabled",type=boolean,JSONPath=`.spec.enabled`
// +kubebuilder:printcolumn:name="Max",type=integer,JSONPath=`.spec.maxQueries`
// +kubebuilder:printcolumn:name="Registered",type=integer,JSONPath=`.status.registeredQueries`
// +kubebuilder:printcolumn:name="Stored",type=integer,JSONPath=`.status.usage.storedBytes`
// +kubebuilder:printcolumn:name="Exceeded",type=string,JSONPath=`.status.conditions[?(@.type=="QuotaExceeded")].status`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
type TenantQuota struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the grant.
	// +required
	Spec TenantQuotaSpec `json:"spec"`

	// status is what the operator last wrote and counted.
	// +optional
	Status TenantQuotaStatus `json:"status,omitempty"`
}

// IsEnabled reads spec.enabled, which defaults to true.
func (q *TenantQuota) IsEnabled() bool { return q.Spec.Enabled == nil || *q.Spec.Enabled }

// TenantQuotaList is a list of TenantQuotas.
//
// +kubebuilder:object:root=true
type TenantQuotaList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TenantQuota `json:"items"`
}

func init() {
	SchemeBuilder.Register(&TenantQuota{}, &TenantQuotaList{})
}
