package clusterview

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/elasti-dev/elasti/pkg/resolver/internal/resolvertest"
)

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
		wantAddrs   []string
		wantUnready []UnreadyEndpoint
		fromPods    bool
	}{{
		name:      "a forged Ready endpoint no pod holds",
		slices:    Backends{Addrs: []string{"10.0.0.9:8080"}, target: web},
		pods:      []*corev1.Pod{resolvertest.ViewPod("web-1", "u1", false, "10.244.0.5")},
		wantAddrs: nil, wantUnready: []UnreadyEndpoint{genuine},
	}, {
		name:      "a forged Ready endpoint beside a genuine one",
		slices:    Backends{Addrs: []string{"10.0.0.9:8080", "10.244.0.5:8080"}, target: web},
		pods:      []*corev1.Pod{resolvertest.ViewPod("web-1", "u1", true, "10.244.0.5")},
		wantAddrs: []string{"10.244.0.5:8080"},
	}, {
		name:      "another namespace's pod address, listed Ready",
		slices:    Backends{Addrs: []string{"10.244.7.7:8080"}, target: web},
		pods:      nil, // that pod is not one the resolvertest.Service selects
		wantAddrs: nil,
	}, {
		name:      "an address its pod left: the pod was deleted, the slice not yet written",
		slices:    Backends{Addrs: []string{"10.244.0.5:8080"}, target: web},
		pods:      []*corev1.Pod{resolvertest.Terminating(resolvertest.ViewPod("web-1", "u1", true, "10.244.0.5"))},
		wantAddrs: nil,
	}, {
		name:        "a forged not-ready endpoint naming a genuine pod at another address",
		slices:      Backends{Unready: []UnreadyEndpoint{{IP: "10.0.0.9", Port: 8080, Pod: "web-1", UID: "u1"}}, target: web},
		pods:        []*corev1.Pod{resolvertest.ViewPod("web-1", "u1", false, "10.244.0.5")},
		wantUnready: []UnreadyEndpoint{genuine},
	}, {
		name:        "a not-ready endpoint naming a genuine pod's name with another UID",
		slices:      Backends{Unready: []UnreadyEndpoint{{IP: "10.244.0.5", Port: 8080, Pod: "web-1", UID: "other"}}, target: web},
		pods:        []*corev1.Pod{resolvertest.ViewPod("web-1", "u1", false, "10.244.0.5")},
		wantUnready: []UnreadyEndpoint{genuine},
	}, {
		name:      "a pod the kubelet wrote Ready that the slices do not list yet",
		slices:    Backends{Unready: []UnreadyEndpoint{genuine}, target: web},
		pods:      []*corev1.Pod{resolvertest.ViewPod("web-1", "u1", true, "10.244.0.5")},
		wantAddrs: []string{"10.244.0.5:8080"}, wantUnready: []UnreadyEndpoint{genuine}, fromPods: true,
	}, {
		name:      "a numeric targetPort",
		slices:    Backends{target: intstr.FromInt32(9090)},
		pods:      []*corev1.Pod{resolvertest.ViewPod("web-1", "u1", true, "10.244.0.5")},
		wantAddrs: []string{"10.244.0.5:9090"}, fromPods: true,
	}, {
		name:   "a targetPort name no container gives",
		slices: Backends{target: intstr.FromString("metrics")},
		pods:   []*corev1.Pod{resolvertest.ViewPod("web-1", "u1", true, "10.244.0.5")},
	}, {
		name:      "dual stack: the Service's first family",
		slices:    Backends{target: web, family: corev1.IPv6Protocol},
		pods:      []*corev1.Pod{resolvertest.ViewPod("web-1", "u1", true, "10.244.0.5", "fd00::5")},
		wantAddrs: []string{"[fd00::5]:8080"}, fromPods: true,
	}, {
		name:   "a host-network pod is added by its slice only",
		slices: Backends{Addrs: []string{"192.168.1.10:8080"}, target: web},
		pods: func() []*corev1.Pod {
			p := resolvertest.ViewPod("web-1", "u1", true, "192.168.1.10")
			p.Spec.HostNetwork = true
			return []*corev1.Pod{p, resolvertest.ViewPod("web-2", "u2", true, "")}
		}(),
		wantAddrs: []string{"192.168.1.10:8080"},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := vouch(c.slices, c.pods)
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
	for i := range MaxUnreadyEndpoints + 1 {
		pods = append(pods, resolvertest.ViewPod("web-"+string(rune('a'+i)), types.UID("u"+string(rune('a'+i))), false, "10.244.1."+string(rune('1'+i))))
	}
	got := vouch(Backends{target: intstr.FromString("web")}, pods)
	if len(got.Unready) != MaxUnreadyEndpoints {
		t.Errorf("%d starting pods handed on, want %d", len(got.Unready), MaxUnreadyEndpoints)
	}
}

// Where the view is not whole, each Ready address is checked against the
// pod its slice names, from the view or a read: the boundary cases of
// vouchByName.
func TestVouchByName(t *testing.T) {
	genuine := resolvertest.ViewPod("web-1", "u1", true, "10.244.0.5")
	slicesSay := Backends{Addrs: []string{"10.0.0.9:8080", "10.244.0.5:8080"},
		Unready:   []UnreadyEndpoint{{IP: "10.0.0.8", Port: 8080, Pod: "web-2", UID: "u2"}},
		readyPods: map[string]podRef{"10.0.0.9": {"web-1", "u1"}, "10.244.0.5": {"web-1", "u1"}}}
	readable := func(ok bool, pods ...*corev1.Pod) func([]string) ([]*corev1.Pod, bool) {
		return func([]string) ([]*corev1.Pod, bool) { return pods, ok }
	}
	cases := []struct {
		name      string
		view      []*corev1.Pod
		read      func([]string) ([]*corev1.Pod, bool)
		wantAddrs []string
	}{
		{"read: only the genuine pod's own address", nil, readable(true, genuine), []string{"10.244.0.5:8080"}},
		{"in the view: no read needed", []*corev1.Pod{genuine}, func([]string) ([]*corev1.Pod, bool) {
			t.Error("read what the view has")
			return nil, true
		}, []string{"10.244.0.5:8080"}},
		{"nothing read yet: nothing forwarded to", nil, readable(true), nil},
		{"the resolver may not read pods: the slices as they are", nil, readable(false), slicesSay.Addrs},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := vouchByName(slicesSay, c.view, c.read)
			if !slices.Equal(got.Addrs, c.wantAddrs) {
				t.Errorf("Addrs = %q, want %q", got.Addrs, c.wantAddrs)
			}
			if !slices.Equal(got.Unready, slicesSay.Unready) {
				t.Errorf("Unready = %+v, want the slices' (direct probing reads their pods)", got.Unready)
			}
		})
	}
}

// testSvc is the Service the view's tests hold requests for; its pods
// are resolvertest.ViewPod's.
var testSvc = ServiceRef{Namespace: "team", Name: "web"}
