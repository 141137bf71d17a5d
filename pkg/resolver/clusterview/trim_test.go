package clusterview

import (
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/endpointready"
	"github.com/elasti-dev/elasti/pkg/resolver/internal/resolvertest"
)

// bulk is what a cached object must not keep: managed fields and
// annotations such as kubectl's last-applied-configuration.
func bulk(m *metav1.ObjectMeta) {
	m.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 4096)}
	m.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", FieldsV1: &metav1.FieldsV1{Raw: []byte(strings.Repeat("{}", 1024))}}}
	m.Labels["team"] = "shop"
}

// The resolver caches every Service and EndpointSlice of the cluster:
// TrimForCache keeps what routing, the front check and the owner checks
// read, and drops the rest.
func TestTrimForCacheKeepsWhatTheResolverReads(t *testing.T) {
	svc := resolvertest.Service("team", "web", resolvertest.SvcPort("http", 80, intstr.FromInt32(8080)))
	svc.Labels = map[string]string{}
	bulk(&svc.ObjectMeta)
	svc.Spec.ClusterIPs = []string{"10.0.0.7"}
	svc.Spec.Selector = map[string]string{"app": "web", "tier": strings.Repeat("x", 63)}
	got, _ := TrimForCache(svc.DeepCopy())
	ts := got.(*corev1.Service)
	if ts.UID != svc.UID || ts.Spec.ClusterIPs[0] != "10.0.0.7" || len(ts.Spec.Ports) != 1 || ts.Annotations != nil || ts.ManagedFields != nil || ts.Labels != nil {
		t.Errorf("trimmed resolvertest.Service = %+v", ts)
	}
	// The pod view watches what a selector selects: one of a few labels
	// is kept; one past maxCachedSelector becomes the one shared marker,
	// which still says Kubernetes keeps the Service's slices.
	if !maps.Equal(ts.Spec.Selector, svc.Spec.Selector) || endpointready.Unkept(ts) != "" {
		t.Errorf("trimmed selector = %v, unkept %q; want it kept", ts.Spec.Selector, endpointready.Unkept(ts))
	}
	large := svc.DeepCopy()
	large.Spec.Selector["tier"] = strings.Repeat("x", maxCachedSelector)
	got, _ = TrimForCache(large)
	if sel := got.(*corev1.Service).Spec.Selector; len(sel) != 1 || !maps.Equal(sel, oversizedSelector) || endpointready.Unkept(got.(*corev1.Service)) != "" {
		t.Errorf("trimmed large selector = %v; want the one shared marker, kept", sel)
	}
	for name, change := range map[string]func(*corev1.Service){
		"no selector":  func(s *corev1.Service) { s.Spec.Selector = nil },
		"ExternalName": func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeExternalName },
	} {
		unkept := svc.DeepCopy()
		change(unkept)
		got, _ := TrimForCache(unkept)
		if want, trimmed := endpointready.Unkept(unkept), endpointready.Unkept(got.(*corev1.Service)); trimmed != want {
			t.Errorf("%s: trimmed resolvertest.Service unkept %q, want %q", name, trimmed, want)
		}
	}

	pods := resolvertest.Slice("team", "web-abc", "web", map[string]int32{"http": 8080}, resolvertest.EP("10.244.0.1"))
	bulk(&pods.ObjectMeta)
	pods.Endpoints[0].NodeName = ptr.To("node-1")
	pods.Endpoints[0].TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: "team", Name: "web-1", UID: "u1", ResourceVersion: "9", APIVersion: "v1"}
	got, _ = TrimForCache(pods.DeepCopy())
	tp := got.(*discoveryv1.EndpointSlice)
	if podSlicesOf(tp) != "web" || !controlledBy(tp, svc) || len(tp.Ports) != 1 || len(tp.Endpoints) != 1 ||
		tp.Endpoints[0].Addresses[0] != "10.244.0.1" || tp.Endpoints[0].NodeName != nil ||
		tp.Annotations != nil || tp.ManagedFields != nil || len(tp.Labels) != 2 {
		t.Errorf("trimmed pod slice = %+v", tp)
	}
	// A Ready endpoint keeps the pod it names, and only that: past the
	// pod view's bounds a read of that pod vouches for its address.
	if ref := tp.Endpoints[0].TargetRef; ref == nil || *ref != (corev1.ObjectReference{Kind: "Pod", Namespace: "team", Name: "web-1", UID: "u1"}) {
		t.Errorf("trimmed Ready endpoint's targetRef = %+v, want the pod's kind, namespace, name and UID alone", ref)
	}
	if b, err := ResolveBackends(svc, []*discoveryv1.EndpointSlice{tp}, ""); err != nil || b.readyPods["10.244.0.1"] != (podRef{name: "web-1", uid: "u1"}) {
		t.Errorf("the trimmed slice's Ready endpoint names pod %+v (%v), want web-1 u1: vouchByName could not read it", b.readyPods, err)
	}

	rs := resolvertest.ResolverSlice("team", "web")
	bulk(&rs.ObjectMeta)
	got, _ = TrimForCache(rs.DeepCopy())
	tr := got.(*discoveryv1.EndpointSlice)
	if resolverSliceOf(tr) != "web" || tr.Endpoints != nil || tr.Annotations != nil {
		t.Errorf("trimmed resolver slice = %+v", tr)
	}

	es := &elastiv1alpha1.ElastiService{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web", UID: "es", Generation: 3, CreationTimestamp: metav1.Now(), Labels: map[string]string{}},
		Spec: elastiv1alpha1.ElastiServiceSpec{
			Service:       "web",
			Triggers:      []elastiv1alpha1.ScaleTrigger{{Type: "prometheus"}},
			ProbeResponse: []elastiv1alpha1.ProbeResponseRule{{Response: elastiv1alpha1.ProbeCannedAnswer{Status: 200}}},
		},
		Status: elastiv1alpha1.ElastiServiceStatus{
			ResolverPorts: []elastiv1alpha1.ResolverPort{{Service: "web", Port: 80, ResolverPort: 20000}},
			Conditions:    []metav1.Condition{{Type: "Ready"}},
		},
	}
	waiting := es.DeepCopy()
	bulk(&es.ObjectMeta)
	got, _ = TrimForCache(es.DeepCopy())
	te := got.(*elastiv1alpha1.ElastiService)
	if te.Spec.Service != "web" || len(te.Spec.ProbeResponse) != 1 || len(te.Status.ResolverPorts) != 1 || te.Generation != 3 ||
		!te.CreationTimestamp.Equal(&es.CreationTimestamp) || te.Spec.Triggers != nil || te.Status.Conditions != nil || te.Annotations != nil {
		t.Errorf("trimmed ElastiService = %+v", te)
	}

	// Of the conditions, only a wake group's DependenciesReady=False
	// waiting on a dependency is kept: a timed-out hold names it.
	notReady := metav1.Condition{Type: elastiv1alpha1.ConditionDependenciesReady, Status: metav1.ConditionFalse,
		Reason: elastiv1alpha1.ReasonDependencyNotReady, Message: `dependency 1 of 1, StatefulSet "db", has 0/1 replicas ready`,
		LastTransitionTime: metav1.Now(), ObservedGeneration: 3}
	waiting.Status.Conditions = append(waiting.Status.Conditions, notReady)
	got, _ = TrimForCache(waiting)
	want := []metav1.Condition{{Type: notReady.Type, Status: notReady.Status, Reason: notReady.Reason, Message: notReady.Message}}
	if te := got.(*elastiv1alpha1.ElastiService); !reflect.DeepEqual(te.Status.Conditions, want) {
		t.Errorf("trimmed conditions = %+v, want %+v", te.Status.Conditions, want)
	}
	for _, reason := range []string{elastiv1alpha1.ReasonGroupAsleep, elastiv1alpha1.ReasonDependenciesReady} {
		other := waiting.DeepCopy()
		other.Status.Conditions[1].Reason = reason
		if got, _ := TrimForCache(other); got.(*elastiv1alpha1.ElastiService).Status.Conditions != nil {
			t.Errorf("%s kept: %+v", reason, got.(*elastiv1alpha1.ElastiService).Status.Conditions)
		}
	}
	// spec.hold is kept, its timeout bounded as the CRD bounds it (an
	// older CRD may not), and the last MaxRecentColdStarts cold starts,
	// whose median is a Retry-After.
	slow := waiting.DeepCopy()
	slow.Spec.Hold = &elastiv1alpha1.Hold{Timeout: "10m", MaxRequests: 5}
	for i := range elastiv1alpha1.MaxRecentColdStarts + 1 {
		slow.Status.RecentColdStarts = append(slow.Status.RecentColdStarts, metav1.Duration{Duration: time.Duration(i) * time.Second})
	}
	got, _ = TrimForCache(slow.DeepCopy())
	th := got.(*elastiv1alpha1.ElastiService)
	if !reflect.DeepEqual(th.Spec.Hold, slow.Spec.Hold) {
		t.Errorf("trimmed hold = %+v, want %+v", th.Spec.Hold, slow.Spec.Hold)
	}
	if n := len(th.Status.RecentColdStarts); n != elastiv1alpha1.MaxRecentColdStarts || th.Status.RecentColdStarts[0].Duration != time.Second {
		t.Errorf("trimmed recentColdStarts = %v, want the last %d", th.Status.RecentColdStarts, elastiv1alpha1.MaxRecentColdStarts)
	}
	for _, timeout := range []string{strings.Repeat("1", elastiv1alpha1.MaxHoldTimeoutLength-1) + "s", strings.Repeat("1", elastiv1alpha1.MaxHoldTimeoutLength) + "s"} {
		slow.Spec.Hold.Timeout = timeout
		got, _ = TrimForCache(slow.DeepCopy())
		h := got.(*elastiv1alpha1.ElastiService).Spec.Hold
		kept := len(timeout) <= elastiv1alpha1.MaxHoldTimeoutLength
		if (h.Timeout == timeout) != kept || h.MaxRequests != 5 || len(h.Timeout) > elastiv1alpha1.MaxHoldTimeoutLength {
			t.Errorf("a timeout of %d characters trimmed to %q (kept %v)", len(timeout), h.Timeout, kept)
		}
		if _, ok, _ := elastiv1alpha1.ParseHoldTimeout(h.Timeout); !kept && ok {
			t.Errorf("an oversized timeout parses as %q", h.Timeout)
		}
	}
}
