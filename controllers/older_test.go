package controllers

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
)

func sq(ns, name string, created time.Time, queryID string) *v1.StreamQuery {
	return &v1.StreamQuery{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(created)},
		Status:     v1.StreamQueryStatus{Tenant: "acme", QueryID: queryID},
	}
}

func holdsForAcme(o client.Object) bool {
	st := o.(*v1.StreamQuery).Status
	return st.QueryID != "" && st.Tenant == "acme"
}

func TestTheEarlierCreationTimeWins(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	a, b := sq("z", "z", now, ""), sq("a", "a", now.Add(time.Second), "held")
	if !older(a, b, holdsForAcme) || older(b, a, holdsForAcme) {
		t.Fatal("the earlier creation time must win over names and holding")
	}
}

func TestTiesInCreationTimeGoToTheHolder(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	holder, late := sq("z", "z", now, "held"), sq("a", "a", now, "")
	if !older(holder, late, holdsForAcme) || older(late, holder, holdsForAcme) {
		t.Fatal("within one second, the holder of the registration must win")
	}
}

func TestTiesWithoutAHolderGoByNamespaceThenName(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	for _, c := range [][2]*v1.StreamQuery{
		{sq("a", "z", now, ""), sq("b", "a", now, "")},
		{sq("a", "a", now, ""), sq("a", "b", now, "")},
	} {
		if !older(c[0], c[1], holdsForAcme) || older(c[1], c[0], holdsForAcme) {
			t.Fatalf("%s/%s must come before %s/%s", c[0].Namespace, c[0].Name, c[1].Namespace, c[1].Name)
		}
	}
}
