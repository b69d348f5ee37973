package v1alpha1

const (
	// TenantLabel on a Namespace names the tenant of the StreamQueries in it.
	// Cluster administrators set it; a StreamQuery never names its tenant.
	TenantLabel = "streams.regent.dev/tenant"

	// ResetTokenAnnotation on a StreamQuery asks for a one-shot reset of the
	// query's state: each new value resets once.
	ResetTokenAnnotation = "streams.regent.dev/reset-token"

	// RewindToAnnotation on a StreamQuery asks for a one-shot rewind to an
	// RFC 3339 time: the query's state is deleted and its consumer group
	// moved back to the first message created at or after that time, once
	// for each new value.
	RewindToAnnotation = "streams.regent.dev/rewind-to"

	// DefaultTenant is the tenant of everything when tenancy is off. It is
	// not subject to quotas.
	DefaultTenant = "default"

	// ConditionReady is the one condition both kinds report.
	ConditionReady = "Ready"
)
