// Package v1alpha1 holds Regent's Kubernetes API: StreamQuery, a streaming
// query the operator registers on the broker, and TenantQuota, a tenant's
// grant to register queries.
//
// +kubebuilder:object:generate=true
// +groupName=streams.regent.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of these types.
	GroupVersion = schema.GroupVersion{Group: "streams.regent.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the types with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this group and version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
