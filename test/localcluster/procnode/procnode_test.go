package procnode

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

func TestExpandFollowsKubeletRules(t *testing.T) {
	vars := map[string]string{"NS": "elasti", "PORT": "8013"}
	for in, want := range map[string]string{
		"plain":             "plain",
		"$(NS).svc:$(PORT)": "elasti.svc:8013",
		"$(MISSING) stays":  "$(MISSING) stays",
		"$$(NS) is escaped": "$(NS) is escaped",
		"unterminated $(NS": "unterminated $(NS",
		"a lone $ sign":     "a lone $ sign",
	} {
		if got := expand(in, vars); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestBinaryForMatchesTheImageName(t *testing.T) {
	n := &Node{opts: Options{Binaries: map[string]string{"elasti-operator": "/bin/op", "elasti-operator:v2": "/bin/op2", "coredns": "/bin/dns"}}}
	for image, want := range map[string]string{
		"ghcr.io/elasti-dev/elasti-operator:latest":                  "/bin/op",
		"ghcr.io/elasti-dev/elasti-operator:v2":                      "/bin/op2",
		"elasti-operator:v2@sha256:0123456789abcdef":                 "/bin/op2",
		"elasti-operator":                                            "/bin/op",
		"registry.k8s.io/coredns/coredns:v1.15.0":                    "/bin/dns",
		"localhost:5000/coredns@sha256:0123456789abcdef0123456789ab": "/bin/dns",
	} {
		got, err := n.binaryFor(image)
		if err != nil || got != want {
			t.Errorf("binaryFor(%q) = %q, %v; want %q", image, got, err, want)
		}
	}
	_, err := n.binaryFor("nginx:1.27")
	if err == nil || !strings.Contains(err.Error(), "coredns, elasti-operator, elasti-operator:v2") {
		t.Errorf("an unknown image must name what the node runs; got %v", err)
	}
}

func TestRunAsPrefersTheContainerAndSkipsRoot(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](1001)}}}
	c := &corev1.Container{}
	if uid, gid, ok := runAs(pod, c); !ok || uid != 1000 || gid != 1001 {
		t.Errorf("pod-level user: got %d:%d %t", uid, gid, ok)
	}
	c.SecurityContext = &corev1.SecurityContext{RunAsUser: ptr.To[int64](65532)}
	if uid, gid, ok := runAs(pod, c); !ok || uid != 65532 || gid != 1001 {
		t.Errorf("container user wins: got %d:%d %t", uid, gid, ok)
	}
	if _, _, ok := runAs(&corev1.Pod{}, &corev1.Container{SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To[int64](0)}}); ok {
		t.Error("uid 0 needs no setpriv")
	}
}

func TestUnsupportedPodsAreNamed(t *testing.T) {
	for _, tc := range []struct {
		pod  corev1.Pod
		want string
	}{
		{corev1.Pod{}, ""},
		{corev1.Pod{Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: "i"}}}}, "init containers"},
		{corev1.Pod{Spec: corev1.PodSpec{HostNetwork: true}}, "hostNetwork"},
		{corev1.Pod{Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}}}, `volume "data"`},
		{corev1.Pod{Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{
			EmptyDir: &corev1.EmptyDirVolumeSource{}}}}}}, ""},
	} {
		got := unsupported(&tc.pod)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("unsupported(%+v) = %q, want it to mention %q", tc.pod.Spec, got, tc.want)
		}
	}
}

func TestLookupKeyHonoursOptional(t *testing.T) {
	data := map[string]string{"dsn": "https://x"}
	if v, err := lookupKey(data, nil, "secret", "s", "dsn", nil); err != nil || *v != "https://x" {
		t.Errorf("present key: %v, %v", v, err)
	}
	if _, err := lookupKey(data, nil, "secret", "s", "other", nil); err == nil || !strings.Contains(err.Error(), "secret s has no key other") {
		t.Errorf("a missing required key must be an error naming it; got %v", err)
	}
	if v, err := lookupKey(data, nil, "secret", "s", "other", ptr.To(true)); err != nil || v != nil {
		t.Errorf("a missing optional key leaves the variable unset; got %v, %v", v, err)
	}
	notFound := apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, "s")
	if v, err := lookupKey[string](nil, notFound, "secret", "s", "dsn", ptr.To(true)); err != nil || v != nil {
		t.Errorf("a missing optional secret leaves the variable unset; got %v, %v", v, err)
	}
	if _, err := lookupKey[string](nil, notFound, "secret", "s", "dsn", nil); !apierrors.IsNotFound(err) {
		t.Errorf("a missing required secret is an error; got %v", err)
	}
}

func TestResolvConfIsAPodsClusterFirst(t *testing.T) {
	got := ResolvConf("shop", "cluster.local", "10.0.0.10")
	want := "search shop.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.0.0.10\noptions ndots:5\n"
	if got != want {
		t.Errorf("ResolvConf = %q, want %q", got, want)
	}
}

// A resourceFieldRef gives the request or limit in units of its divisor,
// rounded up, as the kubelet does; GOMEMLIMIT in elasti's manifests reads
// limits.memory this way.
func TestResourceFieldRefIsInUnitsOfItsDivisor(t *testing.T) {
	c := corev1.Container{Name: "app", Resources: corev1.ResourceRequirements{
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
	}}
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{c}}}
	for _, tc := range []struct {
		resource, divisor, want string
	}{
		{"limits.memory", "", "536870912"},
		{"limits.memory", "1Mi", "512"},
		{"requests.cpu", "", "1"}, // rounded up
		{"requests.cpu", "1m", "100"},
	} {
		ref := &corev1.ResourceFieldSelector{Resource: tc.resource}
		if tc.divisor != "" {
			ref.Divisor = resource.MustParse(tc.divisor)
		}
		got, err := resourceValue(pod, &c, ref)
		if err != nil || *got != tc.want {
			t.Errorf("%s / %q = %v, %v; want %s", tc.resource, tc.divisor, got, err, tc.want)
		}
	}
	if _, err := resourceValue(pod, &c, &corev1.ResourceFieldSelector{Resource: "limits.cpu"}); err == nil {
		t.Error("an unset limit gave a value; a process node has no allocatable to fall back on")
	}
}

// restartPolicy decides which exits a container comes back from, as a
// kubelet decides for a Job's pod.
func TestRestartsFollowsRestartPolicy(t *testing.T) {
	for _, tc := range []struct {
		policy corev1.RestartPolicy
		code   int32
		want   bool
	}{
		{"", 0, true}, {corev1.RestartPolicyAlways, 0, true}, {corev1.RestartPolicyAlways, 1, true},
		{corev1.RestartPolicyOnFailure, 0, false}, {corev1.RestartPolicyOnFailure, 2, true},
		{corev1.RestartPolicyNever, 0, false}, {corev1.RestartPolicyNever, 1, false},
	} {
		if got := restarts(tc.policy, tc.code); got != tc.want {
			t.Errorf("restarts(%q, exit %d) = %t, want %t", tc.policy, tc.code, got, tc.want)
		}
	}
}

// A pod whose containers all finished for good is Succeeded when each
// exited 0 and Failed otherwise; while one still runs it is Running.
func TestPodPhaseOfFinishedContainers(t *testing.T) {
	exited := func(code int32) *container {
		return &container{spec: &corev1.Container{Name: "c"}, finished: &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Completed"}}
	}
	running := &container{spec: &corev1.Container{Name: "r"}, running: true}
	for _, tc := range []struct {
		name       string
		containers []*container
		want       corev1.PodPhase
	}{
		{"all exited 0", []*container{exited(0), exited(0)}, corev1.PodSucceeded},
		{"one exited 1", []*container{exited(0), exited(1)}, corev1.PodFailed},
		{"one still runs", []*container{exited(0), running}, corev1.PodRunning},
	} {
		p := &pod{containers: tc.containers}
		s := p.status(&corev1.Pod{})
		if s.Phase != tc.want {
			t.Errorf("%s: phase %s, want %s", tc.name, s.Phase, tc.want)
		}
		for _, cs := range s.ContainerStatuses {
			if cs.Ready {
				t.Errorf("%s: container %s Ready", tc.name, cs.Name)
			}
		}
	}
}
