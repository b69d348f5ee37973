package v1alpha1_test

import (
	"context"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
)

func TestStreamQueryUpgradeModeIsBlockResetOrSavepoint(t *testing.T) {
	rejected(t, create(t, query(t, "bad-upgrade", source, hash, "upgradeMode: Ignore")), "spec.upgradeMode", `supported values: "Block", "Reset", "Savepoint"`)
}

// onConfigChange is kept for one release as an alias of upgradeMode.
func TestOnlyOnConfigChangeSetMapsToTheUpgradeMode(t *testing.T) {
	u := query(t, "alias", source, hash, "onConfigChange: Reset")
	if err := create(t, u); err != nil {
		t.Fatal(err)
	}
	var q v1.StreamQuery
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(u), &q); err != nil {
		t.Fatal(err)
	}
	if q.Spec.Upgrade() != v1.UpgradeReset {
		t.Fatalf("onConfigChange Reset alone gives upgrade mode %q, want Reset", q.Spec.Upgrade())
	}
	q.Spec.UpgradeMode = v1.UpgradeSavepoint
	if q.Spec.Upgrade() != v1.UpgradeSavepoint {
		t.Fatalf("upgradeMode Savepoint gives %q", q.Spec.Upgrade())
	}
}

func TestUpgradeModeAndOnConfigChangeMustNotConflict(t *testing.T) {
	rejected(t, create(t, query(t, "conflict", source, hash, "onConfigChange: Reset", "upgradeMode: Savepoint")),
		"onConfigChange is the deprecated alias of upgradeMode")
	if err := create(t, query(t, "agree", source, hash, "onConfigChange: Reset", "upgradeMode: Reset")); err != nil {
		t.Fatalf("equal onConfigChange and upgradeMode rejected: %v", err)
	}
}

func TestSavepointsKeepIsAtLeastOne(t *testing.T) {
	rejected(t, create(t, query(t, "keep-zero", source, hash, "savepoints: {keep: 0}")), "spec.savepoints.keep", "greater than or equal to 1")
}

func TestRestoreFromIsASavepointName(t *testing.T) {
	rejected(t, create(t, query(t, "bad-restore", source, hash, `restoreFrom: "no such/name"`)), "spec.restoreFrom", "should match")
}
