package v1alpha1_test

import (
	"context"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
)

func TestStreamQueryAcceptsSuspendAndAFreshnessObjective(t *testing.T) {
	u := query(t, "lifecycle", source, hash, "suspend: true", "freshness: {maxLag: 0, maxLagSeconds: 30}")
	if err := create(t, u); err != nil {
		t.Fatal(err)
	}
	var q v1.StreamQuery
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(u), &q); err != nil {
		t.Fatal(err)
	}
	if f := q.Spec.Freshness; !q.Spec.Suspend || f == nil || f.MaxLag == nil || *f.MaxLag != 0 || *f.MaxLagSeconds != 30 {
		t.Fatalf("spec %+v did not keep suspend and the freshness bounds", q.Spec)
	}
}

func TestStreamQueryFreshnessNamesAtLeastOneBound(t *testing.T) {
	rejected(t, create(t, query(t, "empty-freshness", source, hash, "freshness: {}")), "spec.freshness", "freshness needs maxLag, maxLagSeconds or both")
}

func TestStreamQueryFreshnessMaxLagIsAtLeastZero(t *testing.T) {
	rejected(t, create(t, query(t, "negative-lag", source, hash, "freshness: {maxLag: -1}")), "spec.freshness.maxLag", "should be greater than or equal to 0")
}

func TestStreamQueryFreshnessMaxLagSecondsIsAtLeastZero(t *testing.T) {
	rejected(t, create(t, query(t, "negative-age", source, hash, "freshness: {maxLagSeconds: -5}")), "spec.freshness.maxLagSeconds", "should be greater than or equal to 0")
}

func TestStreamQuerySuspendIsABoolean(t *testing.T) {
	rejected(t, create(t, query(t, "bad-suspend", source, hash, "suspend: sometimes")), "spec.suspend", "boolean")
}
