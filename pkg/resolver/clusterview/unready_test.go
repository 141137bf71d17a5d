package clusterview

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/elasti-dev/elasti/pkg/resolver/internal/resolvertest"
)

// The slices' not-ready endpoints reach a hold with the pod they name,
// only when that pod is in the Service's namespace and not terminating,
// and at most maxUnreadyEndpoints of them; Ready ones are never listed
// there.
func TestResolveBackendsListsUnreadyPods(t *testing.T) {
	pub := resolvertest.Service("team", "web", resolvertest.SvcPort("http", 80, intstr.FromInt32(8080)))
	no, yes := ptr.To(false), ptr.To(true)
	s := resolvertest.Slice("team", "a", "web", map[string]int32{"http": 8080},
		resolvertest.EP("10.244.0.1"),                     // Ready
		resolvertest.SliceEP{IP: "10.244.0.2", Ready: no}, // starting
		resolvertest.SliceEP{IP: "10.244.0.3", Ready: no}, // targetRef elsewhere
		resolvertest.SliceEP{IP: "10.244.0.4", Ready: no}, // no targetRef
		resolvertest.SliceEP{IP: "10.244.0.5", Ready: no, Terminating: yes},
		resolvertest.SliceEP{IP: "10.244.0.6", Ready: no}) // targetRef not a Pod
	refs := []*corev1.ObjectReference{
		{Kind: "Pod", Namespace: "team", Name: "web-0", UID: "u0"},
		{Kind: "Pod", Namespace: "team", Name: "web-2", UID: "u2"},
		{Kind: "Pod", Namespace: "other", Name: "db-0", UID: "u3"},
		nil,
		{Kind: "Pod", Namespace: "team", Name: "web-5", UID: "u5"},
		{Kind: "Node", Namespace: "team", Name: "n", UID: "u6"},
	}
	for i := range s.Endpoints {
		s.Endpoints[i].TargetRef = refs[i]
	}
	trimmed, _ := TrimForCache(s.DeepCopy())
	ts := trimmed.(*discoveryv1.EndpointSlice)
	// A Ready endpoint keeps its pod too: past the pod view's bounds a
	// read of that pod vouches for its address (vouchByName).
	if ref := ts.Endpoints[0].TargetRef; ref == nil || ref.Name != "web-0" || ref.UID != "u0" {
		t.Errorf("the cache dropped the pod of a Ready endpoint: %+v", ref)
	}
	b, err := ResolveBackends(pub, []*discoveryv1.EndpointSlice{ts}, "")
	if err != nil {
		t.Fatal(err)
	}
	want := []UnreadyEndpoint{{IP: "10.244.0.2", Port: 8080, Pod: "web-2", UID: "u2"}}
	if !slices.Equal(b.Addrs, []string{"10.244.0.1:8080"}) || !slices.Equal(b.Unready, want) {
		t.Errorf("Addrs %v, Unready %+v; want [10.244.0.1:8080], %+v", b.Addrs, b.Unready, want)
	}

	many := resolvertest.Slice("team", "b", "web", map[string]int32{"http": 8080})
	for i := range MaxUnreadyEndpoints + 5 {
		many.Endpoints = append(many.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.244.1.%d", i)},
			Conditions: discoveryv1.EndpointConditions{Ready: no},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: "team", Name: fmt.Sprint("p", i), UID: types.UID(fmt.Sprint(i))}})
	}
	trimmed, _ = TrimForCache(many)
	if b, _ := ResolveBackends(pub, []*discoveryv1.EndpointSlice{trimmed.(*discoveryv1.EndpointSlice)}, ""); len(b.Unready) != MaxUnreadyEndpoints {
		t.Errorf("%d unready endpoints listed, bound %d", len(b.Unready), MaxUnreadyEndpoints)
	}
}
