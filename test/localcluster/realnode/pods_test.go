package realnode

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// Preparing a pod spec twice, as make demo does when it runs again on the
// control plane it left running, gives the spec once prepared: one
// toleration, one token volume and mount, one of each Service variable.
// A second token volume is what the apiserver refused ("Duplicate value:
// kube-api-access").
func TestPrepareSpecIsIdempotent(t *testing.T) {
	spec := &corev1.PodSpec{
		ServiceAccountName: "elasti",
		Containers:         []corev1.Container{{Name: "manager", Env: []corev1.EnvVar{{Name: "POLLING_INTERVAL", Value: "2s"}}}},
	}
	if !prepareSpec(spec, "10.247.0.1", "6443") {
		t.Fatal("a pod with a ServiceAccount should mount its token")
	}
	if !prepareSpec(spec, "10.247.0.1", "6443") {
		t.Fatal("the second preparation should still report the token mount")
	}
	if n := len(spec.Tolerations); n != 1 {
		t.Errorf("%d tolerations, want 1: %v", n, spec.Tolerations)
	}
	if n := len(spec.Volumes); n != 1 || spec.Volumes[0].Name != apiAccessVolume {
		t.Errorf("volumes %v, want one %s", spec.Volumes, apiAccessVolume)
	}
	c := spec.Containers[0]
	if n := len(c.VolumeMounts); n != 1 || c.VolumeMounts[0].MountPath != serviceAccountDir {
		t.Errorf("mounts %v, want one at %s", c.VolumeMounts, serviceAccountDir)
	}
	count := map[string]int{}
	for _, e := range c.Env {
		count[e.Name]++
	}
	for _, name := range []string{"POLLING_INTERVAL", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "KUBERNETES_SERVICE_PORT_HTTPS"} {
		if count[name] != 1 {
			t.Errorf("%s appears %d times in %v, want once", name, count[name], c.Env)
		}
	}
	if c.ImagePullPolicy != corev1.PullNever {
		t.Errorf("imagePullPolicy %q, want Never", c.ImagePullPolicy)
	}
}

// A pod that opts out of its token gets no token volume.
func TestPrepareSpecWithoutTokenAddsNoVolume(t *testing.T) {
	no := false
	spec := &corev1.PodSpec{ServiceAccountName: "app", AutomountServiceAccountToken: &no, Containers: []corev1.Container{{Name: "app"}}}
	if prepareSpec(spec, "10.247.0.1", "6443") {
		t.Fatal("a pod with automountServiceAccountToken false should not mount a token")
	}
	if len(spec.Volumes) != 0 || len(spec.Containers[0].VolumeMounts) != 0 {
		t.Errorf("volumes %v, mounts %v; want none", spec.Volumes, spec.Containers[0].VolumeMounts)
	}
}
