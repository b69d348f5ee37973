package chart_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/regent-mq/regent/test/chart"
)

// spoolMount returns the volume mount of the broker container that holds
// REGENT_SPOOL_DIR, failing the test when there is none.
func spoolMount(t *testing.T, pod corev1.PodSpec) corev1.VolumeMount {
	t.Helper()
	c := pod.Containers[0]
	dir := env(c)["REGENT_SPOOL_DIR"].Value
	if dir == "" {
		t.Fatal("the broker sets no REGENT_SPOOL_DIR")
	}
	if ro := c.SecurityContext.ReadOnlyRootFilesystem; ro == nil || !*ro {
		t.Fatal("the broker's root filesystem is not read-only")
	}
	for _, m := range c.VolumeMounts {
		if m.MountPath == dir {
			if m.ReadOnly {
				t.Fatalf("the spool volume %s is mounted read-only", m.Name)
			}
			return m
		}
	}
	t.Fatalf("REGENT_SPOOL_DIR %s is no volume mount: on a read-only root the broker would not start", dir)
	return corev1.VolumeMount{}
}

func TestTheBrokerSpoolIsAnEmptyDirOfItsOwnByDefault(t *testing.T) {
	broker := deployment(t, chart.Template(t), chart.Broker)
	m := spoolMount(t, broker.Spec.Template.Spec)
	for _, v := range broker.Spec.Template.Spec.Volumes {
		if v.Name != m.Name {
			continue
		}
		if v.EmptyDir == nil {
			t.Fatalf("the spool volume is %+v, want an emptyDir", v.VolumeSource)
		}
		if v.EmptyDir.SizeLimit == nil || !v.EmptyDir.SizeLimit.Equal(resource.MustParse("1Gi")) {
			t.Fatalf("the spool emptyDir's sizeLimit is %v, want 1Gi", v.EmptyDir.SizeLimit)
		}
		return
	}
	t.Fatalf("the spool mount %s names no volume", m.Name)
}

func TestAPersistentSpoolIsAClaimPerReplicaOfAStatefulSet(t *testing.T) {
	objs := chart.Template(t, chart.Set(t, "spool-persistent").Args()...)
	var broker appsv1.StatefulSet
	chart.Into(t, objs.Find(t, "StatefulSet", chart.Broker), &broker)
	m := spoolMount(t, broker.Spec.Template.Spec)
	for _, v := range broker.Spec.Template.Spec.Volumes {
		if v.Name == m.Name {
			t.Fatalf("the pod template has a volume %s of its own, which would hide the claim", v.Name)
		}
	}
	if len(broker.Spec.VolumeClaimTemplates) != 1 || broker.Spec.VolumeClaimTemplates[0].Name != m.Name {
		t.Fatalf("volumeClaimTemplates %+v, want one named %s", broker.Spec.VolumeClaimTemplates, m.Name)
	}
	claim := broker.Spec.VolumeClaimTemplates[0].Spec
	if got := claim.Resources.Requests[corev1.ResourceStorage]; !got.Equal(resource.MustParse("5Gi")) {
		t.Errorf("the claim requests %v, want 5Gi", got.String())
	}
	if claim.StorageClassName == nil || *claim.StorageClassName != "fast-ssd" {
		t.Errorf("the claim's storage class is %v, want fast-ssd", claim.StorageClassName)
	}
	if broker.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Errorf("podManagementPolicy %q: the brokers would start one at a time", broker.Spec.PodManagementPolicy)
	}
	if broker.Spec.ServiceName != chart.Broker {
		t.Errorf("serviceName %q, want the broker Service %s", broker.Spec.ServiceName, chart.Broker)
	}
	if broker.Spec.Replicas != nil {
		t.Errorf("autoscaled broker StatefulSet fixes replicas at %d", *broker.Spec.Replicas)
	}
	var hpa autoscalingv2.HorizontalPodAutoscaler
	chart.Into(t, objs.Find(t, "HorizontalPodAutoscaler", chart.Broker), &hpa)
	if ref := hpa.Spec.ScaleTargetRef; ref.Kind != "StatefulSet" || ref.Name != chart.Broker {
		t.Errorf("the HPA scales %s/%s, want StatefulSet/%s", ref.Kind, ref.Name, chart.Broker)
	}
}
