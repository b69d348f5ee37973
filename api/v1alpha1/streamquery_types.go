package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// OnConfigChange says what the operator does when the broker already holds
// the query under a different configHash.
// +kubebuilder:validation:Enum=Block;Reset
type OnConfigChange string

const (
	// OnConfigChangeBlock leaves the registration alone and reports
	// ConfigConflict until someone resolves it.
	OnConfigChangeBlock OnConfigChange = "Block"
	// OnConfigChangeReset re-registers with reset, deleting the query's
	// state, exactly once for each new hash.
	OnConfigChangeReset OnConfigChange = "Reset"
)

// DeletionPolicy says what happens to the registration when the
// StreamQuery is deleted.
// +kubebuilder:validation:Enum=Retain;Delete
type DeletionPolicy string

const (
	// DeletionPolicyRetain leaves the registration and its state in place.
	DeletionPolicyRetain DeletionPolicy = "Retain"
	// DeletionPolicyDelete deletes the registration and its state.
	DeletionPolicyDelete DeletionPolicy = "Delete"
)

// Reasons of the StreamQuery's Ready condition.
const (
	ReasonRegistered        = "Registered"
	ReasonConfigConflict    = "ConfigConflict"
	ReasonQuotaDenied       = "QuotaDenied"
	ReasonDuplicateName     = "DuplicateName"
	ReasonBrokerUnavailable = "BrokerUnavailable"
	// ReasonPipelineInvalid: spec.pipeline does not compile; the query is
	// not registered, so nothing runs it.
	ReasonPipelineInvalid = "PipelineInvalid"
	// ReasonSinkInvalid: spec.sink names a table the pipeline's output
	// does not fit, or that the query cannot write (absent without
	// createTable, no unique index on the key columns, another tenant's
	// schema); the query is not registered, so nothing runs it.
	ReasonSinkInvalid = "SinkInvalid"
)

// The StreamQuery's lifecycle conditions and their reasons.
const (
	// ConditionSuspended is True while spec.suspend holds the query's
	// workers idle.
	ConditionSuspended = "Suspended"
	ReasonSuspended    = "Suspended"
	ReasonRunning      = "Running"

	// ConditionFresh is False while the query's lag exceeds a bound of
	// spec.freshness.
	ConditionFresh        = "Fresh"
	ReasonWithinObjective = "WithinObjective"
	ReasonLagExceeded     = "LagExceeded"

	// ConditionWorkersReady is True when every worker the operator wants
	// for a query with a pipeline is ready (none, while suspended).
	ConditionWorkersReady  = "WorkersReady"
	ReasonWorkersAvailable = "Available"
	ReasonWorkersStarting  = "Starting"
	ReasonWorkersSuspended = "Suspended"
	// ReasonNoWorkerImage: the operator knows no worker image, so it runs
	// no workers; someone runs them by hand.
	ReasonNoWorkerImage = "NoWorkerImage"
)

// StreamQuerySpec is the streaming query to register on the broker.
// +kubebuilder:validation:XValidation:rule="!(has(self.pipeline) && has(self.sql))",message="pipeline and sql are two ways to write one pipeline: set one of them"
// +kubebuilder:validation:XValidation:rule="has(self.configHash) || has(self.pipeline) || has(self.sql)",message="configHash is required when there is no pipeline"
// +kubebuilder:validation:XValidation:rule="!has(self.workers) || has(self.pipeline) || has(self.sql)",message="workers run a pipeline: spec.workers needs spec.pipeline or spec.sql"
// +kubebuilder:validation:XValidation:rule="!(has(self.pipeline) || has(self.sql)) || has(self.sinkQueue) || has(self.sink)",message="a pipeline needs sinkQueue, sink or both: its workers write their output there"
// +kubebuilder:validation:XValidation:rule="!has(self.sink) || has(self.pipeline) || has(self.sql)",message="a table sink holds a pipeline's output: spec.sink needs spec.pipeline or spec.sql"
// +kubebuilder:validation:XValidation:rule="!has(self.upgradeMode) || !has(self.onConfigChange) || self.upgradeMode == self.onConfigChange",message="onConfigChange is the deprecated alias of upgradeMode: remove it, or make it equal"
type StreamQuerySpec struct {
	// queryName is the query's name on the broker, unique per tenant; a
	// worker's SDK registers and runs the query under the same name. When
	// absent, the StreamQuery's metadata.name is used. It cannot change.
	// +optional
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.-]{1,255}$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="queryName is immutable"
	QueryName string `json:"queryName,omitempty"`

	// sourceQueue is the queue the query's workers pop from, in the query's
	// tenant.
	// +required
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.-]{1,255}$`
	SourceQueue string `json:"sourceQueue"`

	// sinkQueue is the queue closed windows are pushed to, in the query's
	// tenant. Absent means the query has no sink.
	// +optional
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.-]{1,255}$`
	SinkQueue string `json:"sinkQueue,omitempty"`

	// sink writes the pipeline's output as rows of a table, in the cycle's
	// transaction (exactly once, with the state and the source ack), beside
	// sinkQueue or instead of it. The table is in the query's tenant's
	// schema, regent_<tenant>; its columns must fit the pipeline's output,
	// which the operator checks before registering (SinkInvalid otherwise).
	// +optional
	Sink *TableSink `json:"sink,omitempty"`

	// configHash is the hash the worker computes over its operator chain.
	// The broker refuses a different hash for an existing query unless the
	// registration resets the query's state (see onConfigChange). Required
	// without a pipeline; with one, the pipeline's own hash is registered
	// unless this is set, and then it must equal it.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	ConfigHash string `json:"configHash,omitempty"`

	// pipeline is the computation Regent's worker runs for the query. A
	// changed pipeline is a config change, under onConfigChange. With a
	// pipeline, the operator runs the query's workers (see workers).
	// +optional
	Pipeline *Pipeline `json:"pipeline,omitempty"`

	// sql is the pipeline written as one SQL SELECT (the subset is in the
	// README, section Pipelines), instead of pipeline. The operator
	// compiles it into a pipeline, shows that in status.compiledPipeline
	// and runs it as it runs spec.pipeline. Its FROM names sourceQueue. A
	// query outside the subset is Ready=False, PipelineInvalid.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=16384
	SQL string `json:"sql,omitempty"`

	// workers is how the operator runs the pipeline: a Deployment of
	// regent-worker in the query's namespace, a ConfigMap holding the
	// pipeline and a Secret holding the workers' broker token, all owned by
	// the StreamQuery. A query with a pipeline and no workers field gets the
	// defaults. Without a pipeline the operator runs nothing: the query's
	// workers are the user's own.
	// +optional
	Workers *Workers `json:"workers,omitempty"`

	// onConfigChange is the deprecated alias of upgradeMode, kept for one
	// release: used only when upgradeMode is absent.
	// +optional
	OnConfigChange OnConfigChange `json:"onConfigChange,omitempty"`

	// upgradeMode says what to do when the broker holds the query under a
	// different configHash (Block when absent): Block reports
	// ConfigConflict and changes nothing; Reset stops the old workers,
	// waits until none holds a lease, resets the query's state (exactly
	// once for each new hash) and starts the new workers; Savepoint takes
	// a savepoint before the reset.
	// +optional
	UpgradeMode UpgradeMode `json:"upgradeMode,omitempty"`

	// savepoints bounds the query's savepoints (3 when absent).
	// +optional
	Savepoints *Savepoints `json:"savepoints,omitempty"`

	// restoreFrom names a savepoint to roll back to: the operator stops the
	// workers, restores the savepoint's state rows, consumer group
	// positions and configHash in one transaction, and runs the
	// savepoint's pipeline until restoreFrom is removed. Each new value
	// restores once.
	// +optional
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.-]{1,63}$`
	RestoreFrom string `json:"restoreFrom,omitempty"`

	// deletionPolicy says what deleting this StreamQuery does to the
	// registration: Retain leaves it and its state in place; Delete removes
	// both.
	// +optional
	// +kubebuilder:default=Retain
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`

	// suspend, when true, idles the query's workers: the broker answers the
	// pops of the query's consumer group as an empty queue, taking no
	// lease, and refuses its cycles with "query suspended". Setting it back
	// to false resumes exactly where the cursors stand. It is not part of
	// the registration, so it never conflicts with the config hash.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// freshness is the objective the Fresh condition reports on.
	// +optional
	Freshness *Freshness `json:"freshness,omitempty"`
}

// Workers is the Deployment the operator runs a pipeline with.
// +kubebuilder:validation:XValidation:rule="has(self.replicas) != has(self.autoscale)",message="spec.workers needs exactly one of replicas and autoscale"
type Workers struct {
	// image is the regent-worker image. Absent: the operator's
	// --worker-image, which the Helm chart sets to its own worker image.
	// +optional
	// +kubebuilder:validation:MinLength=1
	Image string `json:"image,omitempty"`

	// replicas is how many worker pods run; spec.suspend scales them to
	// zero whatever this says. Each pod folds the partitions it holds a
	// lease on, so more replicas than the source has partitions with data
	// only wait. It is the /scale subresource's replicas. A query with a
	// pipeline and no spec.workers runs one.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Replicas *int32 `json:"replicas,omitempty"`

	// autoscale lets the operator set the replicas from the query's lag,
	// instead of replicas.
	// +optional
	Autoscale *Autoscale `json:"autoscale,omitempty"`

	// resources are the worker container's requests and limits.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`
}

// WorkersStatus is what the operator last saw of the query's workers.
type WorkersStatus struct {
	// desired is how many worker pods the operator asks for: spec.workers.replicas
	// or the autoscaler's decision, or 0 while suspended.
	Desired int32 `json:"desired"`
	// ready is how many of them are ready; the /scale subresource's
	// status.replicas.
	Ready int32 `json:"ready"`
	// selector selects the worker pods, for the /scale subresource (an
	// HPA reads their metrics through it).
	// +optional
	Selector string `json:"selector,omitempty"`
	// autoscaler is the autoscaler's last decision, with spec.workers.autoscale.
	// +optional
	Autoscaler *AutoscaleStatus `json:"autoscaler,omitempty"`
}

// Freshness is how far behind its source a query may fall. The query is
// Fresh while neither bound is exceeded; an absent bound does not count.
// +kubebuilder:validation:XValidation:rule="has(self.maxLag) || has(self.maxLagSeconds)",message="freshness needs maxLag, maxLagSeconds or both"
type Freshness struct {
	// maxLag is the most source messages the query's consumer group may
	// have left unconsumed (status.lag).
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxLag *int64 `json:"maxLag,omitempty"`

	// maxLagSeconds is the oldest an unconsumed source message may be, in
	// seconds (status.lagSeconds).
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxLagSeconds *int64 `json:"maxLagSeconds,omitempty"`
}

// Rewind is a rewind the operator carried out for the rewind-to
// annotation.
type Rewind struct {
	// to is the annotation value the rewind honoured.
	To string `json:"to"`
	// time is when the rewind committed.
	Time metav1.Time `json:"time"`
	// partitions is how many source partitions' cursors of the query's
	// consumer group it moved.
	Partitions int32 `json:"partitions"`
}

// PendingReset is a reset the operator has committed to and may already
// have sent to the broker. It is recorded before the broker is called, so
// that a restarted operator finishes it instead of starting another.
type PendingReset struct {
	// configHash is the hash the reset registers.
	ConfigHash string `json:"configHash"`
	// token is the reset-token annotation value the reset honours; empty
	// when a config change under onConfigChange: Reset asked for it.
	// +optional
	Token string `json:"token,omitempty"`
	// generation is the query's reset generation read before the reset
	// was recorded. The broker raises it in the transaction of every reset,
	// so a generation beyond this one means the reset has committed.
	// +required
	// +kubebuilder:validation:Minimum=0
	Generation int64 `json:"generation"`
}

// StreamQueryStatus is what the operator last saw of the registration.
type StreamQueryStatus struct {
	// observedGeneration is the generation of the spec the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// tenant is the tenant the query is registered under, from the
	// namespace's streams.regent.dev/tenant label (or the namespace name
	// with tenancy on, or default with tenancy off).
	// +optional
	Tenant string `json:"tenant,omitempty"`

	// queryId is the broker's id of the registration.
	// +optional
	QueryID string `json:"queryId,omitempty"`

	// compiledPipeline is the pipeline spec.sql compiled to, which the
	// query's workers run; absent without spec.sql, or when it does not
	// compile.
	// +optional
	CompiledPipeline *Pipeline `json:"compiledPipeline,omitempty"`

	// registeredHash is the configHash the broker last accepted.
	// +optional
	RegisteredHash string `json:"registeredHash,omitempty"`

	// lastResetHash is the configHash of the last reset the operator
	// carried out. A config change never resets twice for the same hash.
	// +optional
	LastResetHash string `json:"lastResetHash,omitempty"`

	// lastResetToken is the reset-token annotation value last honoured.
	// +optional
	LastResetToken string `json:"lastResetToken,omitempty"`

	// pendingReset is a reset in progress; see PendingReset.
	// +optional
	PendingReset *PendingReset `json:"pendingReset,omitempty"`

	// lag is the number of source messages not yet consumed by the query's
	// consumer group (streams.<queryName>), summed over the source queue's
	// partitions.
	// +optional
	Lag *int64 `json:"lag,omitempty"`

	// stateRows is the number of state rows the query holds.
	// +optional
	StateRows *int64 `json:"stateRows,omitempty"`

	// lagSeconds is the age, in seconds, of the oldest source message the
	// query's consumer group has not consumed (at segment granularity);
	// 0 when there is none.
	// +optional
	LagSeconds *int64 `json:"lagSeconds,omitempty"`

	// lastRewind is the last rewind carried out for the
	// streams.regent.dev/rewind-to annotation; a new annotation value
	// rewinds once.
	// +optional
	LastRewind *Rewind `json:"lastRewind,omitempty"`

	// savepoints are the query's savepoints, newest first.
	// +optional
	Savepoints []SavepointStatus `json:"savepoints,omitempty"`

	// lastSavepointRequest is the streams.regent.dev/savepoint annotation
	// value last honoured.
	// +optional
	LastSavepointRequest string `json:"lastSavepointRequest,omitempty"`

	// lastRestore is the last restore carried out for spec.restoreFrom.
	// +optional
	LastRestore *RestoreStatus `json:"lastRestore,omitempty"`

	// lastCycleTime is when a cycle of the query last wrote state or acked
	// the source, whichever is later.
	// +optional
	LastCycleTime *metav1.Time `json:"lastCycleTime,omitempty"`

	// workers is the query's worker Deployment as last seen; absent when the
	// operator runs no workers for the query.
	// +optional
	Workers *WorkersStatus `json:"workers,omitempty"`

	// conditions holds Ready, whose reason is Registered, ConfigConflict,
	// QuotaDenied, DuplicateName, BrokerUnavailable, PipelineInvalid
	// (spec.pipeline does not compile: nothing is registered) or
	// SinkInvalid (spec.sink cannot hold the pipeline's output: nothing is
	// registered); Suspended, once the
	// query is registered; Fresh, when spec.freshness is set; and
	// WorkersReady, when the operator runs the query's workers.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// StreamQuery declares a streaming query: the operator registers it on the
// broker, as the tenant of the StreamQuery's namespace, and reports its
// progress.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.workers.replicas,statuspath=.status.workers.ready,selectorpath=.status.workers.selector
// +kubebuilder:resource:shortName=sq,categories=regent
// +kubebuilder:printcolumn:name="Tenant",type=string,JSONPath=`.status.tenant`
// +kubebuilder:printcolumn:name="Source",type=string,JSONPath=`.spec.sourceQueue`
// +kubebuilder:printcolumn:name="Sink",type=string,JSONPath=`.spec.sinkQueue`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Suspended",type=string,JSONPath=`.status.conditions[?(@.type=="Suspended")].status`
// +kubebuilder:printcolumn:name="Fresh",type=string,JSONPath=`.status.conditions[?(@.type=="Fresh")].status`
// +kubebuilder:printcolumn:name="Workers",type=integer,JSONPath=`.status.workers.ready`,description="ready worker pods the operator runs"
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.status.workers.desired`,priority=1
// +kubebuilder:printcolumn:name="Lag",type=integer,JSONPath=`.status.lag`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="QueryID",type=string,JSONPath=`.status.queryId`
// +kubebuilder:validation:XValidation:rule="!has(self.spec.pipeline) || size(self.metadata.name) <= 63",message="a StreamQuery with a pipeline has a name of at most 63 characters: it labels the query's workers"
// +kubebuilder:validation:XValidation:rule="has(self.spec.queryName) == has(oldSelf.spec.queryName) || (has(self.spec.queryName) ? self.spec.queryName : self.metadata.name) == (has(oldSelf.spec.queryName) ? oldSelf.spec.queryName : oldSelf.metadata.name)",message="queryName is immutable: it may be added or removed only when it equals metadata.name"
type StreamQuery struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the query to register.
	// +required
	Spec StreamQuerySpec `json:"spec"`

	// status is what the operator last saw of the registration.
	// +optional
	Status StreamQueryStatus `json:"status,omitempty"`
}

// QueryName is the query's name on the broker: spec.queryName, or the
// StreamQuery's own name when that is empty.
func (q *StreamQuery) QueryName() string {
	if q.Spec.QueryName != "" {
		return q.Spec.QueryName
	}
	return q.Name
}

// ConsumerGroup is the consumer group a stream query's workers pop its
// source with: "streams." and the query's name, as the Queen streams SDKs
// name it.
func ConsumerGroup(queryName string) string { return "streams." + queryName }

// StreamQueryList is a list of StreamQueries.
//
// +kubebuilder:object:root=true
type StreamQueryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []StreamQuery `json:"items"`
}

func init() {
	SchemeBuilder.Register(&StreamQuery{}, &StreamQueryList{})
}
