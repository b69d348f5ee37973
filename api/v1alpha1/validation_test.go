package v1alpha1_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
	"github.com/regent-mq/regent/test/kubetest"
)

// The CRDs are checked by a real kube-apiserver: each rule the schema states
// gets a manifest that breaks it, and the apiserver's error must name it.

var (
	k8s client.Client
	env *kubetest.Environment
)

const ns = "validation"

func TestMain(m *testing.M) {
	var err error
	env, err = kubetest.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := run(m, env)
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop envtest:", err)
	}
	os.Exit(code)
}

func run(m *testing.M, env *kubetest.Environment) int {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := v1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	var err error
	k8s, err = client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// manifest is a StreamQuery or TenantQuota as a user writes it, so that
// omitted fields stay omitted.
func manifest(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatalf("bad test manifest: %v", err)
	}
	if u.GetKind() == "StreamQuery" {
		u.SetNamespace(ns)
	}
	return u
}

// query is a StreamQuery manifest with the given spec lines.
func query(t *testing.T, name string, spec ...string) *unstructured.Unstructured {
	return manifest(t, "apiVersion: streams.regent.dev/v1alpha1\nkind: StreamQuery\nmetadata: {name: "+name+"}\nspec:\n  "+strings.Join(spec, "\n  "))
}

// quota is a TenantQuota manifest with the given spec lines.
func quota(t *testing.T, name string, spec ...string) *unstructured.Unstructured {
	return manifest(t, "apiVersion: streams.regent.dev/v1alpha1\nkind: TenantQuota\nmetadata: {name: "+name+"}\nspec:\n  "+strings.Join(spec, "\n  "))
}

const (
	source = "sourceQueue: orders"
	hash   = "configHash: h1"
)

// rejected fails unless err mentions every want.
func rejected(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("the apiserver accepted the object; want an error mentioning %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("error %q does not mention %q", err, w)
		}
	}
}

// create sends obj, and deletes it when the test ends, so that the names
// are free again for a second run in the same process (go test -count).
func create(t *testing.T, obj client.Object) error {
	err := k8s.Create(context.Background(), obj)
	if err == nil {
		t.Cleanup(func() {
			if err := k8s.Delete(context.Background(), obj); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete %s: %v", obj.GetName(), err)
			}
		})
	}
	return err
}

// update sets spec.<field> (or removes it when value is nil) and sends it.
func update(t *testing.T, u *unstructured.Unstructured, field string, value any) error {
	t.Helper()
	if value == nil {
		unstructured.RemoveNestedField(u.Object, "spec", field)
	} else if err := unstructured.SetNestedField(u.Object, value, "spec", field); err != nil {
		t.Fatal(err)
	}
	return k8s.Update(context.Background(), u)
}

func TestStreamQueryAcceptsAValidManifestAndDefaultsItsPolicies(t *testing.T) {
	u := query(t, "valid", source, hash, "sinkQueue: orders.per_minute")
	if err := create(t, u); err != nil {
		t.Fatal(err)
	}
	var q v1.StreamQuery
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(u), &q); err != nil {
		t.Fatal(err)
	}
	if q.Spec.Upgrade() != v1.UpgradeBlock || q.Spec.Keep() != 3 || q.Spec.DeletionPolicy != v1.DeletionPolicyRetain {
		t.Fatalf("defaults: upgrade mode %q, keep %d, deletionPolicy %q; want Block, 3 and Retain", q.Spec.Upgrade(), q.Spec.Keep(), q.Spec.DeletionPolicy)
	}
}

func TestStreamQuerySpecIsRequired(t *testing.T) {
	u := manifest(t, "apiVersion: streams.regent.dev/v1alpha1\nkind: StreamQuery\nmetadata: {name: no-spec}")
	rejected(t, create(t, u), "spec", "Required value")
}

func TestStreamQuerySourceQueueIsRequired(t *testing.T) {
	rejected(t, create(t, query(t, "no-source", hash)), "spec.sourceQueue", "Required value")
}

func TestStreamQueryConfigHashIsRequiredWithoutAPipeline(t *testing.T) {
	rejected(t, create(t, query(t, "no-hash", source)), "configHash is required when there is no pipeline")
}

func TestStreamQueryConfigHashIsNotEmpty(t *testing.T) {
	rejected(t, create(t, query(t, "empty-hash", source, `configHash: ""`)), "spec.configHash", "at least 1 chars long")
}

func TestStreamQueryConfigHashIsAtMost1024Bytes(t *testing.T) {
	rejected(t, create(t, query(t, "long-hash", source, "configHash: "+strings.Repeat("a", 1025))), "spec.configHash", "may not be more than 1024 bytes")
}

func TestStreamQuerySourceQueueMustBeAQueueName(t *testing.T) {
	for _, bad := range []string{`"has space"`, "slash/queue", `""`, strings.Repeat("q", 256)} {
		rejected(t, create(t, query(t, "bad-source", hash, "sourceQueue: "+bad)), "spec.sourceQueue", "should match '^[A-Za-z0-9_.-]{1,255}$'")
	}
}

func TestStreamQuerySinkQueueMustBeAQueueName(t *testing.T) {
	rejected(t, create(t, query(t, "bad-sink", source, hash, `sinkQueue: "sink:queue"`)), "spec.sinkQueue", "should match")
}

func TestStreamQueryQueryNameMustBeAQueueName(t *testing.T) {
	rejected(t, create(t, query(t, "bad-name", source, hash, `queryName: "orders per minute"`)), "spec.queryName", "should match")
}

func TestStreamQueryOnConfigChangeIsBlockOrReset(t *testing.T) {
	rejected(t, create(t, query(t, "bad-on-change", source, hash, "onConfigChange: Ignore")), "spec.onConfigChange", `supported values: "Block", "Reset"`)
}

func TestStreamQueryDeletionPolicyIsRetainOrDelete(t *testing.T) {
	rejected(t, create(t, query(t, "bad-deletion", source, hash, "deletionPolicy: Orphan")), "spec.deletionPolicy", `supported values: "Retain", "Delete"`)
}

func TestStreamQueryRejectsUnknownFields(t *testing.T) {
	err := k8s.Create(context.Background(), query(t, "unknown-field", source, hash, "tenant: globex"), client.FieldValidation("Strict"))
	rejected(t, err, `unknown field "spec.tenant"`)
}

func TestStreamQueryQueryNameIsImmutable(t *testing.T) {
	u := query(t, "rename", source, hash, "queryName: orders.v1")
	if err := create(t, u); err != nil {
		t.Fatal(err)
	}
	rejected(t, update(t, u, "queryName", "orders.v2"), "spec.queryName", "queryName is immutable")
}

func TestStreamQueryQueryNameCannotBeAddedToChangeTheName(t *testing.T) {
	u := query(t, "add-name", source, hash)
	if err := create(t, u); err != nil {
		t.Fatal(err)
	}
	rejected(t, update(t, u, "queryName", "something.else"), "queryName is immutable: it may be added or removed only when it equals metadata.name")
}

func TestStreamQueryQueryNameCannotBeRemovedToChangeTheName(t *testing.T) {
	u := query(t, "remove-name", source, hash, "queryName: explicit")
	if err := create(t, u); err != nil {
		t.Fatal(err)
	}
	rejected(t, update(t, u, "queryName", nil), "queryName is immutable: it may be added or removed only when it equals metadata.name")
}

func TestStreamQueryQueryNameMayBeSpelledOutAsTheDefault(t *testing.T) {
	u := query(t, "spelled-out", source, hash)
	if err := create(t, u); err != nil {
		t.Fatal(err)
	}
	if err := update(t, u, "queryName", "spelled-out"); err != nil {
		t.Fatalf("writing the default name out must be allowed: %v", err)
	}
}

func TestTenantQuotaAcceptsAValidManifestAndDefaultsEnabled(t *testing.T) {
	u := quota(t, "valid", "tenant: acme", "maxQueries: 10")
	if err := create(t, u); err != nil {
		t.Fatal(err)
	}
	var q v1.TenantQuota
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(u), &q); err != nil {
		t.Fatal(err)
	}
	if q.Spec.Enabled == nil || !*q.Spec.Enabled {
		t.Fatalf("enabled = %v, want the default true", q.Spec.Enabled)
	}
}

func TestTenantQuotaTenantIsRequired(t *testing.T) {
	rejected(t, create(t, quota(t, "no-tenant", "maxQueries: 1")), "spec.tenant", "Required value")
}

func TestTenantQuotaTenantIsALabelValue(t *testing.T) {
	for _, bad := range []string{`""`, "-acme", `"acme corp"`, strings.Repeat("t", 64)} {
		rejected(t, create(t, quota(t, "bad-tenant", "tenant: "+bad)), "spec.tenant")
	}
}

func TestTenantQuotaTenantIsImmutable(t *testing.T) {
	u := quota(t, "retenant", "tenant: acme")
	if err := create(t, u); err != nil {
		t.Fatal(err)
	}
	rejected(t, update(t, u, "tenant", "globex"), "spec.tenant", "tenant is immutable")
}

func TestTenantQuotaMaxQueriesIsAtLeastZero(t *testing.T) {
	rejected(t, create(t, quota(t, "negative", "tenant: acme", "maxQueries: -1")), "spec.maxQueries", "should be greater than or equal to 0")
}

func TestTenantQuotaMaxQueriesMayBeZero(t *testing.T) {
	if err := create(t, quota(t, "zero", "tenant: acme", "maxQueries: 0")); err != nil {
		t.Fatalf("maxQueries 0 (no new names) must be allowed: %v", err)
	}
}

func TestTenantQuotaEnabledIsABoolean(t *testing.T) {
	rejected(t, create(t, quota(t, "bad-enabled", "tenant: acme", `enabled: "yes"`)), "spec.enabled", "must be of type boolean")
}
