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

// TenantQuotaSpec grants a tenant the right to register streaming queries.
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

	// conditions holds Ready, whose reason is Applied, Conflict or
	// DatabaseUnavailable.
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
