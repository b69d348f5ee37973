package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// UpgradeMode says how the operator moves a query to a new pipeline or
// configHash: its old workers never run beside the new ones, and old
// accumulators never meet the new fold.
// +kubebuilder:validation:Enum=Block;Reset;Savepoint
type UpgradeMode string

const (
	// UpgradeBlock leaves the registration alone and reports
	// ConfigConflict until someone resolves it.
	UpgradeBlock UpgradeMode = "Block"
	// UpgradeReset stops the old workers, waits until none of them holds a
	// lease, resets the query's state and registers the new hash, then
	// starts the new workers.
	UpgradeReset UpgradeMode = "Reset"
	// UpgradeSavepoint is UpgradeReset with a savepoint taken after the
	// old workers stopped and before the reset, so that spec.restoreFrom
	// can roll back to it.
	UpgradeSavepoint UpgradeMode = "Savepoint"
)

// SavepointAnnotation on a StreamQuery takes a savepoint on demand: each
// new value takes one, named after the value, which must be a savepoint
// name (letters, digits, '.', '_', '-', at most 63).
const SavepointAnnotation = "streams.regent.dev/savepoint"

// Reasons of the events and conditions of savepoints, restores and
// upgrades.
const (
	ReasonDraining         = "Draining"
	ReasonSavepointTaken   = "SavepointTaken"
	ReasonSavepointInvalid = "InvalidSavepoint"
	ReasonRestored         = "Restored"
	ReasonRestoreFailed    = "RestoreFailed"
	ReasonRestoreReleased  = "RestoreReleased"
)

// Savepoints bounds the query's savepoints.
type Savepoints struct {
	// keep is how many savepoints of the query are kept, newest first;
	// taking one more drops the oldest.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	Keep int32 `json:"keep,omitempty"`
}

// SavepointStatus describes one savepoint of the query.
type SavepointStatus struct {
	// name is the savepoint's name, what spec.restoreFrom names.
	Name string `json:"name"`
	// time is when it was taken.
	Time metav1.Time `json:"time"`
	// configHash is the hash the query was registered with then.
	ConfigHash string `json:"configHash"`
	// stateRows is how many state rows it holds.
	StateRows int64 `json:"stateRows"`
}

// RestoreStatus is the last restore carried out for spec.restoreFrom.
type RestoreStatus struct {
	// savepoint is the savepoint restored.
	Savepoint string `json:"savepoint"`
	// time is when the restore committed.
	Time metav1.Time `json:"time"`
	// configHash is the hash registered by the restore, the savepoint's.
	ConfigHash string `json:"configHash"`
	// pipeline is the savepoint's pipeline, which the workers run while
	// spec.restoreFrom names this savepoint; absent when it had none, and
	// once released.
	// +optional
	Pipeline *Pipeline `json:"pipeline,omitempty"`
	// count is how many restores this StreamQuery has carried out, this
	// one included. The next restore's fence in the database is made of
	// it, so that a restore is carried out once, and the same savepoint
	// can be restored again later.
	Count int64 `json:"count"`
	// released says that spec.restoreFrom was removed since: the query
	// runs spec.pipeline again.
	// +optional
	Released bool `json:"released,omitempty"`
}

// Upgrade is the effective upgradeMode: spec.upgradeMode, else the
// deprecated spec.onConfigChange, else Block.
func (s *StreamQuerySpec) Upgrade() UpgradeMode {
	switch {
	case s.UpgradeMode != "":
		return s.UpgradeMode
	case s.OnConfigChange != "":
		return UpgradeMode(s.OnConfigChange)
	}
	return UpgradeBlock
}

// Keep is how many savepoints the query keeps.
func (s *StreamQuerySpec) Keep() int32 {
	if s.Savepoints == nil || s.Savepoints.Keep < 1 {
		return 3
	}
	return s.Savepoints.Keep
}
