package chart_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/regent-mq/regent/test/chart"
)

// dryRunApply server-side applies obj without persisting it: the
// kube-apiserver decodes it strictly, validates it and runs admission.
func dryRunApply(obj *unstructured.Unstructured) error {
	return k8s.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(obj),
		client.DryRunAll, client.FieldOwner("regent-chart-test"), client.ForceOwnership)
}

func TestEveryRenderedObjectPassesServerSideDryRun(t *testing.T) {
	for _, set := range chart.ValueSets() {
		t.Run(set.Name, func(t *testing.T) {
			ns := namespace(t, nil)
			objs := chart.Template(t, append(set.Args(), "--namespace", ns)...)
			for _, obj := range objs {
				if err := dryRunApply(obj); err != nil {
					t.Errorf("%s/%s: %v", obj.GetKind(), obj.GetName(), err)
				}
			}
		})
	}
}

// restricted labels a namespace so that its Pod Security admission enforces
// the restricted profile.
var restricted = map[string]string{
	"pod-security.kubernetes.io/enforce":         "restricted",
	"pod-security.kubernetes.io/enforce-version": "latest",
}

// dryRunPods creates, without persisting, one Pod from each pod template the
// chart renders, in a namespace that enforces the restricted profile.
func dryRunPods(t *testing.T, args ...string) map[string]error {
	t.Helper()
	ns := namespace(t, restricted)
	errs := map[string]error{}
	for _, p := range podSpecs(t, chart.Template(t, append(args, "--namespace", ns)...)) {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: strings.ToLower(strings.ReplaceAll(p.name, "/", "-")), Namespace: ns},
			Spec:       p.spec,
		}
		errs[p.name] = k8s.Create(context.Background(), pod, client.DryRunAll)
	}
	return errs
}

func TestPodsMeetTheRestrictedPodSecurityStandard(t *testing.T) {
	for _, set := range chart.ValueSets() {
		t.Run(set.Name, func(t *testing.T) {
			for name, err := range dryRunPods(t, set.Args()...) {
				if err != nil {
					t.Errorf("%s: %v", name, err)
				}
			}
		})
	}
	// The control: the same admission refuses a pod that breaks the profile,
	// so the passes above are the profile's, not an absent check's.
	t.Run("privilege escalation is refused", func(t *testing.T) {
		for name, err := range dryRunPods(t, "--set", "containerSecurityContext.allowPrivilegeEscalation=true") {
			if err == nil || !strings.Contains(err.Error(), "allowPrivilegeEscalation") {
				t.Errorf("%s with allowPrivilegeEscalation=true: %v, want a restricted-profile refusal", name, err)
			}
		}
	})
}

// heredoc matches the manifests NOTES.txt tells the user to apply.
var heredoc = regexp.MustCompile(`(?s)<<'YAML'\n(.*?)\n\s*YAML\n`)

func TestNotesManifestsAreAcceptedByTheCRDs(t *testing.T) {
	ns := namespace(t, nil)
	out, err := chart.Run(kubeconfig, "install", chart.Release, chart.Dir(), "--namespace", ns,
		"--dry-run=server", "--set", "tenancy.enabled=true")
	if err != nil {
		t.Fatal(err)
	}
	_, notes, ok := strings.Cut(out, "\nNOTES:\n")
	if !ok {
		t.Fatalf("helm printed no NOTES:\n%s", out)
	}
	for _, name := range []string{"deployment/" + chart.Broker, "deployment/" + chart.Operator, "job/" + chart.Migrate} {
		if !strings.Contains(notes, name) {
			t.Errorf("NOTES never name %s", name)
		}
	}
	docs := heredoc.FindAllStringSubmatch(notes, -1)
	if len(docs) != 2 {
		t.Fatalf("NOTES hold %d manifests, want a StreamQuery and a TenantQuota:\n%s", len(docs), notes)
	}
	kinds := map[string]bool{}
	for _, d := range docs {
		objs, err := chart.Decode(dedent(d[1]))
		if err != nil || len(objs) != 1 {
			t.Fatalf("NOTES manifest does not decode to one object (%v):\n%s", err, d[1])
		}
		kinds[objs[0].GetKind()] = true
		if err := dryRunApply(objs[0]); err != nil {
			t.Errorf("the %s in NOTES is refused: %v", objs[0].GetKind(), err)
		}
	}
	if !kinds["StreamQuery"] || !kinds["TenantQuota"] {
		t.Errorf("NOTES manifests are %v, want a StreamQuery and a TenantQuota", kinds)
	}
}

// dedent removes the indentation of the first line from every line.
func dedent(s string) string {
	indent := s[:len(s)-len(strings.TrimLeft(s, " "))]
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, indent)
	}
	return strings.Join(lines, "\n")
}
