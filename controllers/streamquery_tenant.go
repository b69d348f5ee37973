package controllers

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
)

// tenantOf resolves the tenant of the StreamQueries of a namespace: its
// streams.regent.dev/tenant label, else the namespace's name. With tenancy
// off the broker puts every request on the default tenant whatever the
// token says, so the operator does too: reading progress or deleting a
// registration under any other tenant would miss it.
func (r *StreamQueryReconciler) tenantOf(ctx context.Context, namespace string) (string, error) {
	if !r.Tenancy {
		return v1.DefaultTenant, nil
	}
	var ns corev1.Namespace
	if err := r.Get(ctx, client.ObjectKey{Name: namespace}, &ns); err != nil {
		return "", fmt.Errorf("resolve the tenant of namespace %q: %w", namespace, err)
	}
	if t := ns.Labels[v1.TenantLabel]; t != "" {
		return t, nil
	}
	return ns.Name, nil
}

// queriesOfTenant lists the StreamQueries whose namespaces resolve to
// tenant: the namespaces labelled with it, and the namespace of that name
// when it has no label.
func (r *StreamQueryReconciler) queriesOfTenant(ctx context.Context, tenant string) ([]v1.StreamQuery, error) {
	if !r.Tenancy {
		if tenant != v1.DefaultTenant {
			return nil, nil
		}
		var all v1.StreamQueryList
		if err := r.List(ctx, &all); err != nil {
			return nil, fmt.Errorf("list StreamQueries: %w", err)
		}
		return all.Items, nil
	}
	var labelled corev1.NamespaceList
	if err := r.List(ctx, &labelled, client.MatchingLabels{v1.TenantLabel: tenant}); err != nil {
		return nil, fmt.Errorf("list namespaces of tenant %q: %w", tenant, err)
	}
	namespaces := make([]string, 0, len(labelled.Items)+1)
	for _, ns := range labelled.Items {
		namespaces = append(namespaces, ns.Name)
	}
	var own corev1.Namespace
	switch err := r.Get(ctx, client.ObjectKey{Name: tenant}, &own); {
	case err == nil && own.Labels[v1.TenantLabel] == "":
		namespaces = append(namespaces, tenant)
	case err != nil && !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("read namespace %q: %w", tenant, err)
	}
	var queries []v1.StreamQuery
	for _, ns := range namespaces {
		var list v1.StreamQueryList
		if err := r.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return nil, fmt.Errorf("list StreamQueries of namespace %q: %w", ns, err)
		}
		queries = append(queries, list.Items...)
	}
	return queries, nil
}

// elder returns the oldest other StreamQuery that declares q's query name
// for the same tenant and is older than q (see older), or nil when q is the
// oldest.
func (r *StreamQueryReconciler) elder(ctx context.Context, q *v1.StreamQuery, tenant string) (*v1.StreamQuery, error) {
	var list v1.StreamQueryList
	if err := r.List(ctx, &list, client.MatchingFields{indexQueryName: q.QueryName()}); err != nil {
		return nil, fmt.Errorf("list StreamQueries named %q: %w", q.QueryName(), err)
	}
	// The holder of a registration is the one whose status names it.
	holds := func(o client.Object) bool {
		st := o.(*v1.StreamQuery).Status
		return st.QueryID != "" && st.Tenant == tenant
	}
	var oldest *v1.StreamQuery
	for i := range list.Items {
		o := &list.Items[i]
		if o.UID == q.UID || !older(o, q, holds) || (oldest != nil && !older(o, oldest, holds)) {
			continue
		}
		t, err := r.tenantOf(ctx, o.Namespace)
		if err != nil {
			return nil, err
		}
		if t == tenant {
			oldest = o
		}
	}
	return oldest, nil
}

// older says whether a comes before b, of two objects that claim the same
// thing: the earlier creation time wins. Creation times have a precision of
// a second, so for two made within one second the incumbent (the one that
// already holds the claim) wins, and then namespace and name decide. A
// younger object is therefore never made to give up a claim to one that
// the operator could not have seen when it granted it.
func older(a, b client.Object, incumbent func(client.Object) bool) bool {
	ta, tb := a.GetCreationTimestamp(), b.GetCreationTimestamp()
	if !ta.Equal(&tb) {
		return ta.Before(&tb)
	}
	if ia, ib := incumbent(a), incumbent(b); ia != ib {
		return ia
	}
	if c := strings.Compare(a.GetNamespace(), b.GetNamespace()); c != 0 {
		return c < 0
	}
	return a.GetName() < b.GetName()
}
