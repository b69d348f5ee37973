package chart_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/regent-mq/regent/test/chart"
)

// envtest runs no kubelet and no Job controller, so a hook Job would never
// finish and helm would wait for it until its timeout. helmWithHooks plays
// their part: while helm runs, it waits for the migration Job, records what
// the namespace held at that moment, and marks the Job complete, the way the
// Job controller does when the migration pod exits 0. Everything else
// (the hook ordering, the hook Secret, the deletion policies) is helm's and
// the kube-apiserver's own doing.
type hookRun struct {
	jobSeen          bool
	hookSecretSeen   bool // the Job's copy of the database URL existed
	brokerSeenBefore bool // the broker Deployment existed before the migration finished
}

func helmWithHooks(t *testing.T, release, ns string, args ...string) hookRun {
	t.Helper()
	if args[0] == "install" {
		// The release's cluster-scoped objects outlive the test's
		// namespace: the same test run again (go test -count) met them.
		t.Cleanup(func() {
			if _, err := chart.Run(kubeconfig, "uninstall", release, "--namespace", ns, "--wait=false", "--ignore-not-found"); err != nil {
				t.Errorf("uninstall %s: %v", release, err)
			}
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := chart.Run(kubeconfig, append(args, release, chart.Dir(), "--namespace", ns, "--timeout", "90s")...)
		done <- err
	}()
	var run hookRun
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			return run
		case <-ctx.Done():
			t.Fatal("helm did not finish within 2 minutes")
		case <-tick.C:
		}
		var job batchv1.Job
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: release + "-migrate"}, &job)
		if apierrors.IsNotFound(err) || (err == nil && job.Status.CompletionTime != nil) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		run.jobSeen = true
		run.hookSecretSeen = exists(t, ns, release+"-migrate", &corev1.Secret{})
		run.brokerSeenBefore = exists(t, ns, release+"-broker", &appsv1.Deployment{})
		completeJob(t, &job)
	}
}

// completeJob records a successful run in the Job's status, as the Job
// controller would.
func completeJob(t *testing.T, job *batchv1.Job) {
	t.Helper()
	now := metav1.Now()
	job.Status.StartTime = &now
	job.Status.CompletionTime = &now
	job.Status.Succeeded = 1
	job.Status.Conditions = []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now},
	}
	if err := k8s.Status().Update(context.Background(), job); err != nil {
		t.Fatalf("mark migration Job complete: %v", err)
	}
}

func exists(t *testing.T, ns, name string, obj client.Object) bool {
	t.Helper()
	err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

func secretData(t *testing.T, ns, name, key string) []byte {
	t.Helper()
	var s corev1.Secret
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Data[key]) == 0 {
		t.Fatalf("Secret %s has no %s", name, key)
	}
	return s.Data[key]
}

func TestInstallMigratesBeforeAnyWorkloadExists(t *testing.T) {
	const release = "regent-install"
	ns := namespace(t, nil)
	run := helmWithHooks(t, release, ns, "install")
	switch {
	case !run.jobSeen:
		t.Fatal("helm install finished without creating the migration Job")
	case !run.hookSecretSeen:
		t.Error("the migration Job ran without its copy of the database URL")
	case run.brokerSeenBefore:
		t.Error("the broker Deployment existed before the migration finished")
	}
	// hook-succeeded: the Job and its Secret go once the migration succeeded.
	if exists(t, ns, release+"-migrate", &batchv1.Job{}) || exists(t, ns, release+"-migrate", &corev1.Secret{}) {
		t.Error("the migration Job or its Secret outlived a successful migration")
	}
	for _, d := range []string{release + "-broker", release + "-operator"} {
		if !exists(t, ns, d, &appsv1.Deployment{}) {
			t.Errorf("Deployment %s was not installed", d)
		}
	}
	hooks, err := chart.Run(kubeconfig, "get", "hooks", release, "--namespace", ns)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := chart.Decode(hooks)
	if err != nil {
		t.Fatal(err)
	}
	var job batchv1.Job
	chart.Into(t, objs.Find(t, "Job", release+"-migrate"), &job)
	if job.Annotations["helm.sh/hook"] != "pre-install,pre-upgrade" {
		t.Errorf("the release's migration hook is %q", job.Annotations["helm.sh/hook"])
	}
}

func TestUpgradeKeepsTheSigningSecretAndMigratesAgain(t *testing.T) {
	const release = "regent-upgrade"
	ns := namespace(t, nil)
	helmWithHooks(t, release, ns, "install")
	before := secretData(t, ns, release+"-signing", "signing-secret")

	run := helmWithHooks(t, release, ns, "upgrade", "--set", "broker.replicaCount=3", "--set", "broker.logLevel=debug")
	if !run.jobSeen {
		t.Error("helm upgrade finished without running the migration Job")
	}
	if after := secretData(t, ns, release+"-signing", "signing-secret"); !bytes.Equal(before, after) {
		t.Fatal("the upgrade replaced the signing secret: every token in use would stop verifying")
	}
	var broker appsv1.Deployment
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: release + "-broker"}, &broker); err != nil {
		t.Fatal(err)
	}
	if broker.Spec.Replicas == nil || *broker.Spec.Replicas != 3 {
		t.Fatalf("the upgrade was not applied: broker replicas %v", broker.Spec.Replicas)
	}
}

func TestGeneratedEncryptionKeySurvivesUpgradeUninstallAndReinstall(t *testing.T) {
	const release = "regent-keys"
	ns := namespace(t, nil)
	on := []string{"--set", "encryption.enabled=true"}
	helmWithHooks(t, release, ns, append([]string{"install"}, on...)...)
	key := secretData(t, ns, release+"-encryption", "encryption-key")

	helmWithHooks(t, release, ns, append([]string{"upgrade"}, on...)...)
	if got := secretData(t, ns, release+"-encryption", "encryption-key"); !bytes.Equal(got, key) {
		t.Fatal("the upgrade replaced the encryption key")
	}
	if _, err := chart.Run(kubeconfig, "uninstall", release, "--namespace", ns, "--wait=false"); err != nil {
		t.Fatal(err)
	}
	if exists(t, ns, release+"-broker", &appsv1.Deployment{}) {
		t.Fatal("uninstall left the broker Deployment")
	}
	if got := secretData(t, ns, release+"-encryption", "encryption-key"); !bytes.Equal(got, key) {
		t.Fatal("uninstall did not keep the encryption key")
	}
	helmWithHooks(t, release, ns, append([]string{"install"}, on...)...)
	if got := secretData(t, ns, release+"-encryption", "encryption-key"); !bytes.Equal(got, key) {
		t.Fatal("a reinstall generated a new encryption key instead of reusing the kept one")
	}
}

func TestInstallIntoAClusterBelowKubeVersionIsRefused(t *testing.T) {
	_, err := chart.TemplateErr("--kube-version", "v1.29.9")
	if err == nil || !strings.Contains(err.Error(), "kubeVersion") {
		t.Fatalf("rendering for Kubernetes 1.29 gave %v, want a kubeVersion refusal", err)
	}
}
