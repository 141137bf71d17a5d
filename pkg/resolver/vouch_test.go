package resolver

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// viewPod is a pod of testSvc at ips, Ready or not, whose container
// names port 8080 "web".
func viewPod(name string, uid types.UID, ready bool, ips ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: testSvc.Namespace, Name: name, UID: uid},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app",
			Ports: []corev1.ContainerPort{{Name: "web", ContainerPort: 8080}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	if len(ips) > 0 {
		p.Status.PodIP = ips[0]
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
	return p
}

func terminating(p *corev1.Pod) *corev1.Pod {
	p.DeletionTimestamp = &metav1.Time{}
	return p
}

// Every variant of a forged or stale address the issue names, and what
// the view adds: only an address a pod of the Service holds is ever
// forwarded to or probed (issue 38, hole 2), and a pod the kubelet wrote
// Ready is an endpoint before the slices say so (issue 39, item 2).
func TestVouch(t *testing.T) {
	web := intstr.FromString("web")
	genuine := UnreadyEndpoint{IP: "10.244.0.5", Port: 8080, Pod: "web-1", UID: "u1"}
	cases := []struct {
		name        string
		slices      Backends
		pods        []*corev1.Pod
		whole       bool
		wantAddrs   []string
		wantUnready []UnreadyEndpoint
		fromPods    bool
	}{{
		name:      "a forged Ready endpoint no pod holds",
		slices:    Backends{Addrs: []string{"10.0.0.9:8080"}, target: web},
		pods:      []*corev1.Pod{viewPod("web-1", "u1", false, "10.244.0.5")},
		whole:     true,
		wantAddrs: nil, wantUnready: []UnreadyEndpoint{genuine},
	}, {
		name:      "a forged Ready endpoint beside a genuine one",
		slices:    Backends{Addrs: []string{"10.0.0.9:8080", "10.244.0.5:8080"}, target: web},
		pods:      []*corev1.Pod{viewPod("web-1", "u1", true, "10.244.0.5")},
		whole:     true,
		wantAddrs: []string{"10.244.0.5:8080"},
	}, {
		name:      "another namespace's pod address, listed Ready",
		slices:    Backends{Addrs: []string{"10.244.7.7:8080"}, target: web},
		pods:      nil, // that pod is not one the Service selects
		whole:     true,
		wantAddrs: nil,
	}, {
		name:      "an address its pod left: the pod was deleted, the slice not yet written",
		slices:    Backends{Addrs: []string{"10.244.0.5:8080"}, target: web},
		pods:      []*corev1.Pod{terminating(viewPod("web-1", "u1", true, "10.244.0.5"))},
		whole:     true,
		wantAddrs: nil,
	}, {
		name:        "a forged not-ready endpoint naming a genuine pod at another address",
		slices:      Backends{Unready: []UnreadyEndpoint{{IP: "10.0.0.9", Port: 8080, Pod: "web-1", UID: "u1"}}, target: web},
		pods:        []*corev1.Pod{viewPod("web-1", "u1", false, "10.244.0.5")},
		whole:       true,
		wantUnready: []UnreadyEndpoint{genuine},
	}, {
		name:        "a not-ready endpoint naming a genuine pod's name with another UID",
		slices:      Backends{Unready: []UnreadyEndpoint{{IP: "10.244.0.5", Port: 8080, Pod: "web-1", UID: "other"}}, target: web},
		pods:        []*corev1.Pod{viewPod("web-1", "u1", false, "10.244.0.5")},
		whole:       true,
		wantUnready: []UnreadyEndpoint{genuine},
	}, {
		name:      "a pod the kubelet wrote Ready that the slices do not list yet",
		slices:    Backends{Unready: []UnreadyEndpoint{genuine}, target: web},
		pods:      []*corev1.Pod{viewPod("web-1", "u1", true, "10.244.0.5")},
		whole:     true,
		wantAddrs: []string{"10.244.0.5:8080"}, wantUnready: []UnreadyEndpoint{genuine}, fromPods: true,
	}, {
		name:      "a numeric targetPort",
		slices:    Backends{target: intstr.FromInt32(9090)},
		pods:      []*corev1.Pod{viewPod("web-1", "u1", true, "10.244.0.5")},
		whole:     true,
		wantAddrs: []string{"10.244.0.5:9090"}, fromPods: true,
	}, {
		name:   "a targetPort name no container gives",
		slices: Backends{target: intstr.FromString("metrics")},
		pods:   []*corev1.Pod{viewPod("web-1", "u1", true, "10.244.0.5")},
		whole:  true,
	}, {
		name:      "dual stack: the Service's first family",
		slices:    Backends{target: web, family: corev1.IPv6Protocol},
		pods:      []*corev1.Pod{viewPod("web-1", "u1", true, "10.244.0.5", "fd00::5")},
		whole:     true,
		wantAddrs: []string{"[fd00::5]:8080"}, fromPods: true,
	}, {
		name:   "a host-network pod is added by its slice only",
		slices: Backends{Addrs: []string{"192.168.1.10:8080"}, target: web},
		pods: func() []*corev1.Pod {
			p := viewPod("web-1", "u1", true, "192.168.1.10")
			p.Spec.HostNetwork = true
			return []*corev1.Pod{p, viewPod("web-2", "u2", true, "")}
		}(),
		whole:     true,
		wantAddrs: []string{"192.168.1.10:8080"},
	}, {
		name:        "a view that is not whole proves nothing: the slices as they are",
		slices:      Backends{Addrs: []string{"10.0.0.9:8080"}, Unready: []UnreadyEndpoint{genuine}, target: web},
		pods:        []*corev1.Pod{viewPod("web-2", "u2", true, "10.244.0.6")},
		whole:       false,
		wantAddrs:   []string{"10.0.0.9:8080"},
		wantUnready: []UnreadyEndpoint{genuine},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := vouch(c.slices, c.pods, c.whole)
			if !slices.Equal(got.Addrs, c.wantAddrs) {
				t.Errorf("Addrs = %q, want %q", got.Addrs, c.wantAddrs)
			}
			if !slices.Equal(got.Unready, c.wantUnready) {
				t.Errorf("Unready = %+v, want %+v", got.Unready, c.wantUnready)
			}
			if got.FromPods != c.fromPods {
				t.Errorf("FromPods = %v, want %v", got.FromPods, c.fromPods)
			}
		})
	}
}

// At most maxUnreadyEndpoints starting pods are handed to direct
// probing, however many the Service selects.
func TestVouchBoundsTheStartingPods(t *testing.T) {
	var pods []*corev1.Pod
	for i := range maxUnreadyEndpoints + 1 {
		pods = append(pods, viewPod("web-"+string(rune('a'+i)), types.UID("u"+string(rune('a'+i))), false, "10.244.1."+string(rune('1'+i))))
	}
	got := vouch(Backends{target: intstr.FromString("web")}, pods, true)
	if len(got.Unready) != maxUnreadyEndpoints {
		t.Errorf("%d starting pods handed on, want %d", len(got.Unready), maxUnreadyEndpoints)
	}
}
