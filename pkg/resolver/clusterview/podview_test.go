package clusterview

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	elastifake "github.com/elasti-dev/elasti/pkg/generated/clientset/versioned/fake"
	elastiinformers "github.com/elasti-dev/elasti/pkg/generated/informers/externalversions"
	"github.com/elasti-dev/elasti/pkg/resolver/internal/resolvertest"
)

func newTestPodView(t *testing.T, api *resolvertest.FakePodAPI, svcs ...*corev1.Service) (*InformerPodView, *prometheus.Registry) {
	_, ctx := ktesting.NewTestContext(t)
	reg := prometheus.NewRegistry()
	v, err := NewInformerPodView(ctx, resolvertest.ServiceLister(t, svcs...), api.ListWatch, resolvertest.NewFakePods(), reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Close)
	return v, reg
}

// The view lists and watches the pods the Service's selector selects, in
// its namespace, says so when a pod changes, and ends its watch once it
// outlived its last hold by the linger.
func TestInformerPodViewWatchesTheSelectedPodsWhileJoined(t *testing.T) {
	api := &resolvertest.FakePodAPI{Pods: []corev1.Pod{*resolvertest.ViewPod("web-1", "u1", false, "10.244.0.5")}}
	v, _ := newTestPodView(t, api, resolvertest.SelectingService("team", "web", map[string]string{"app": "web"}))
	v.linger = 100 * time.Millisecond

	if pods, whole := v.Pods(testSvc); pods != nil || whole {
		t.Fatalf("before a join: %d pods, whole %v", len(pods), whole)
	}
	changed, stop := v.Watch(testSvc)
	defer stop()
	leave, listed := v.Join(testSvc)
	<-changed
	<-listed
	resolvertest.Eventually(t, 5*time.Second, "listed", func() bool { _, whole := v.Pods(testSvc); return whole })
	if got := api.Selectors; !slices.Equal(got, []string{"team app=web"}) {
		t.Errorf("watched %q, want the Service's namespace and selector", got)
	}

	changed, stop2 := v.Watch(testSvc)
	defer stop2()
	resolvertest.Eventually(t, 5*time.Second, "watching", func() bool { return api.Watcher() != nil })
	api.Watcher().Modify(resolvertest.ViewPod("web-1", "u1", true, "10.244.0.5"))
	<-changed
	pods, _ := v.Pods(testSvc)
	if len(pods) != 1 || !podReady(pods[0]) {
		t.Fatalf("pods after the kubelet's Ready = %+v", pods)
	}

	leave()
	resolvertest.Eventually(t, 5*time.Second, "the watch ended after the linger", func() bool { return v.Viewing() == 0 })
	if pods, whole := v.Pods(testSvc); pods != nil || whole {
		t.Errorf("after the linger: %d pods, whole %v", len(pods), whole)
	}
}

// A Service without a selector, or with one too large to cache, gets no
// view; a list the resolver may not make ends the view, which is then
// never whole.
func TestInformerPodViewWithoutPods(t *testing.T) {
	big := map[string]string{"app": strings.Repeat("x", maxCachedSelector)}
	api := &resolvertest.FakePodAPI{}
	v, _ := newTestPodView(t, api,
		resolvertest.SelectingService("team", "none", nil),
		resolvertest.SelectingService("team", "big", trimSelector(big)))
	for _, name := range []string{"none", "big", "missing"} {
		leave, listed := v.Join(ServiceRef{"team", name})
		<-listed // at once: there is nothing to list
		leave()
	}
	if n := v.Viewing(); n != 0 {
		t.Errorf("%d views for Services without a selector the cache keeps", n)
	}

	api.SetErrors(apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", fmt.Errorf("no")), nil)
	v2, _ := newTestPodView(t, api, resolvertest.SelectingService("team", "web", map[string]string{"app": "web"}))
	leave, listed := v2.Join(testSvc)
	defer leave()
	select {
	case <-listed:
	case <-time.After(5 * time.Second):
		t.Fatal("a refused list did not end the listing: unheld forwards would wait for it")
	}
	if _, whole := v2.Pods(testSvc); whole {
		t.Error("a view whose list was forbidden says it is whole")
	}
}

// A view refused after it listed (an apiserver restarted, its authorizer
// not synced yet) is not kept whole with what it last had: it leaves at
// once, its holds go on without it, and once the pause is over a join
// starts a view that lists the pods as they are now. Before, the view
// stayed, whole and stale, for as long as anything was held: in the soak
// two cold starts whose pods were Ready were held until their clients
// gave up after 60 s, across the apiserver's restart.
func TestInformerPodViewRefusedAfterItListedLeaves(t *testing.T) {
	api := &resolvertest.FakePodAPI{Pods: []corev1.Pod{*resolvertest.ViewPod("web-1", "u1", false, "10.244.0.5")}}
	v, _ := newTestPodView(t, api, resolvertest.SelectingService("team", "web", map[string]string{"app": "web"}))
	v.refusals.pause = 200 * time.Millisecond
	leave, listed := v.Join(testSvc)
	defer leave()
	<-listed
	resolvertest.Eventually(t, 5*time.Second, "watching", func() bool { return api.Watcher() != nil })

	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", fmt.Errorf("RBAC: not synced"))
	api.SetErrors(forbidden, forbidden)
	changed, stop := v.Watch(testSvc)
	defer stop()
	api.Watcher().Stop() // the apiserver went away; the reflector watches again, and is refused
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("no change said after the refusal: the holds would not look again")
	}
	resolvertest.Eventually(t, 5*time.Second, "the refused view gone", func() bool { return v.Viewing() == 0 })
	if v.HasView(testSvc) {
		t.Fatal("HasView after the refusal: the holds would not join again")
	}
	if pods, whole := v.Pods(testSvc); whole || pods != nil {
		t.Fatalf("after the refusal: %d pods, whole %v; want no view", len(pods), whole)
	}
	again, listedAgain := v.Join(testSvc) // within the pause: no view
	<-listedAgain
	again()
	if n := v.Viewing(); n != 0 || v.HasView(testSvc) {
		t.Fatalf("%d views started within the pause (HasView %v)", n, v.HasView(testSvc))
	}

	api.SetErrors(nil, nil)
	api.SetPods(*resolvertest.ViewPod("web-1", "u1", true, "10.244.0.5"))
	time.Sleep(v.refusals.pause)
	back, listedBack := v.Join(testSvc)
	defer back()
	<-listedBack
	if !v.HasView(testSvc) {
		t.Fatal("no HasView after a Join past the pause")
	}
	resolvertest.Eventually(t, 5*time.Second, "a new view, whole", func() bool {
		pods, whole := v.Pods(testSvc)
		return whole && len(pods) == 1 && podReady(pods[0])
	})
}

// The bounds: MaxPodViews views in all. A namespace that holds more
// Services at once than its share (MaxPodViewsPerNamespace) borrows views
// while there is room (the soak's slow cold starts of 3 December 2026:
// the 65th hold of a namespace got no view, and waited on the
// EndpointSlice controller and a read); when the views are full, a
// namespace within its share takes a borrowed one back, one past its
// share is refused and counted, and a view that only lingers gives its
// place up.
func TestInformerPodViewBounds(t *testing.T) {
	services := func(ns string, n int) (refs []ServiceRef, svcs []*corev1.Service) {
		for i := range n {
			refs = append(refs, ServiceRef{ns, fmt.Sprintf("s-%d", i)})
			svcs = append(svcs, resolvertest.SelectingService(ns, fmt.Sprintf("s-%d", i), map[string]string{"app": "x"}))
		}
		return refs, svcs
	}
	// crowded holds one more than its share at once, then one more; ns-0
	// to ns-2 fill the rest; ns-2 and ns-3 then ask within their shares.
	crowded, all := services("crowded", MaxPodViewsPerNamespace+2)
	var others [4][]ServiceRef
	for i, n := range []int{MaxPodViewsPerNamespace, MaxPodViewsPerNamespace, MaxPodViews - 3*MaxPodViewsPerNamespace, 1} {
		var svcs []*corev1.Service
		others[i], svcs = services(fmt.Sprintf("ns-%d", i), n)
		all = append(all, svcs...)
	}
	v, reg := newTestPodView(t, &resolvertest.FakePodAPI{}, all...)
	refused := func() float64 { return gatheredValue(t, reg, "elasti_resolver_pod_views_refused_total") }
	var leaves []func()
	t.Cleanup(func() {
		for _, l := range leaves {
			l()
		}
	})
	join := func(svc ServiceRef) {
		leave, listed := v.Join(svc)
		leaves = append(leaves, leave)
		<-listed
	}
	viewed := func(svc ServiceRef) bool { _, whole := v.Pods(svc); return whole }

	for _, svc := range crowded[:MaxPodViewsPerNamespace+1] {
		join(svc)
	}
	if got, n := refused(), v.Viewing(); got != 0 || n != MaxPodViewsPerNamespace+1 || !viewed(crowded[MaxPodViewsPerNamespace]) {
		t.Fatalf("one past the namespace's share with room to spare: refused %v, %d views, the last viewed %v; want 0, %d, true",
			got, n, viewed(crowded[MaxPodViewsPerNamespace]), MaxPodViewsPerNamespace+1)
	}
	for _, svc := range slices.Concat(others[0], others[1], others[2][:len(others[2])-1]) {
		join(svc)
	}
	if got, n := refused(), v.Viewing(); got != 0 || n != MaxPodViews {
		t.Fatalf("filled: refused %v, %d views; want 0, %d", got, n, MaxPodViews)
	}

	// Full: ns-2, within its share, takes crowded's borrowed view back.
	join(others[2][len(others[2])-1])
	lost := 0
	for _, svc := range crowded[:MaxPodViewsPerNamespace+1] {
		if !viewed(svc) {
			lost++
		}
	}
	if got, n := refused(), v.Viewing(); got != 0 || n != MaxPodViews || lost != 1 || !viewed(others[2][len(others[2])-1]) {
		t.Fatalf("a namespace within its share, the views full: refused %v, %d views, crowded lost %d; want 0, %d, 1, and a view for it", got, n, lost, MaxPodViews)
	}
	// Nobody is past a share now: ns-3 is refused, and so is crowded.
	join(others[3][0])
	join(crowded[MaxPodViewsPerNamespace+1])
	if got, n := refused(), v.Viewing(); got != 2 || n != MaxPodViews || viewed(others[3][0]) || viewed(crowded[MaxPodViewsPerNamespace+1]) {
		t.Fatalf("full, none past its share: refused %v, %d views; want 2, %d, no new view", got, n, MaxPodViews)
	}
	// One of crowded's views lingers now (leaves are in join order): its
	// place can be taken.
	still := slices.IndexFunc(crowded[:MaxPodViewsPerNamespace+1], viewed)
	leaves[still]()
	leaves[still] = func() {}
	join(others[3][0])
	if got, n := refused(), v.Viewing(); got != 2 || n != MaxPodViews || !viewed(others[3][0]) {
		t.Errorf("after a view lingers: refused %v, %d views, ns-3 viewed %v; want the lingering one replaced", got, n, viewed(others[3][0]))
	}
}

// A view keeps at most MaxViewPods pods, and says it is not whole past
// them until a list fits again; a pod's spec past maxViewPodBytes is not
// kept.
func TestPodStoreBounds(t *testing.T) {
	s := newPodStore(2, func() {})
	for i := range 3 {
		_ = s.Add(resolvertest.ViewPod(fmt.Sprintf("web-%d", i), "", false, "10.244.0.5"))
	}
	if pods, whole := s.list(); len(pods) != 2 || whole {
		t.Fatalf("past the bound: %d pods, whole %v; want 2, not whole", len(pods), whole)
	}
	_ = s.Replace([]any{resolvertest.ViewPod("web-0", "", false), resolvertest.ViewPod("web-1", "", false)}, "2")
	if pods, whole := s.list(); len(pods) != 2 || !whole {
		t.Fatalf("a list that fits: %d pods, whole %v", len(pods), whole)
	}
	_ = s.Delete(resolvertest.ViewPod("web-0", "", false))
	if pods, _ := s.list(); len(pods) != 1 {
		t.Fatalf("after a delete: %d pods", len(pods))
	}

	huge := resolvertest.ViewPod("web-9", "u9", true, "10.244.0.9")
	huge.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
		HTTPHeaders: []corev1.HTTPHeader{{Name: "X", Value: strings.Repeat("x", 64<<10)}}}}}
	huge.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: strings.Repeat("m", 1<<10)}}
	trimmed := trimPod(huge)
	if trimmed.Size() > maxViewPodBytes {
		t.Errorf("trimmed pod is %d bytes, bound %d", trimmed.Size(), maxViewPodBytes)
	}
	if !podReady(trimmed) || !slices.Equal(podIPs(trimmed), []string{"10.244.0.9"}) || trimmed.UID != "u9" {
		t.Errorf("the trimmed pod lost what vouches for its address: %+v", trimmed)
	}
	if trimmed.Annotations[SpecDroppedAnnotation] == "" {
		t.Error("a pod whose spec was dropped is not marked for direct probing to read")
	}
}

// gatheredValue is the value of the unlabelled metric name in reg.
func gatheredValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// The same through the resolver's own cache (the informers' TrimForCache
// transform), the way the command composes it: a Service past the view's
// bounds has its Ready address vouched for by a read of the pod the
// cached slice names, and not before the read is in. With the old trim
// the cached slice named no pod: nothing was read and the address never
// came back (the soak's 60 s holds).
func TestACachedReadyEndpointPastTheViewsBoundsIsVouchedForByARead(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	web := resolvertest.Service("team", "web", resolvertest.SvcPort("http", 80, intstr.FromString("web")))
	ready := resolvertest.Slice("team", "web-abc", "web", map[string]int32{"http": 8080}, resolvertest.EP("10.244.0.5"))
	ready.Endpoints[0].TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: "team", Name: "web-1", UID: "u1"}
	objs := []runtime.Object{web, ready}
	for i := range MaxPodViews {
		objs = append(objs, resolvertest.Service("team", fmt.Sprintf("s-%d", i), resolvertest.SvcPort("http", 80, intstr.FromInt32(8080))))
	}
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(TrimForCache))
	named, err := NewNamedIndex(elastiinformers.NewSharedInformerFactory(elastifake.NewSimpleClientset(), 0).Elasti().V1alpha1().ElastiServices())
	if err != nil {
		t.Fatal(err)
	}
	eps, err := NewInformerEndpoints(ctx, factory.Core().V1().Services(), factory.Discovery().V1().EndpointSlices(), named, DefaultFrontDrain)
	if err != nil {
		t.Fatal(err)
	}
	pods := resolvertest.NewFakePods()
	view, err := NewInformerPodView(ctx, factory.Core().V1().Services().Lister(), (&resolvertest.FakePodAPI{}).ListWatch, pods, nil)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	defer cancel() // before Shutdown, which waits for the informers to end
	defer view.Close()
	factory.WaitForCacheSync(ctx.Done())
	resolvertest.Eventually(t, 5*time.Second, "handlers synced", eps.HasSynced)
	for i := range MaxPodViews { // every view, in use by the namespace
		leave, _ := view.Join(ServiceRef{"team", fmt.Sprintf("s-%d", i)})
		defer leave()
	}
	leave, _ := view.Join(testSvc)
	defer leave()
	if _, whole := view.Pods(testSvc); whole || view.Viewing() != MaxPodViews {
		t.Fatalf("web has a view (%d views); want it past the bounds", view.Viewing())
	}

	vouched := VouchedEndpoints{EndpointSource: eps, View: view}
	b, err := vouched.Lookup(testSvc, "")
	if err != nil || len(b.Addrs) != 0 || !b.Unread {
		t.Fatalf("before the read: %+v, %v; want no address, waiting on a read", b, err)
	}
	changed, stop := view.Watch(testSvc)
	defer stop()
	pod := resolvertest.Labelled(resolvertest.ViewPod("web-1", "u1", true, "10.244.0.5"), map[string]string{"app": "web"})
	pods.Set(pod)
	if _, err := vouched.Lookup(testSvc, ""); err != nil { // starts the read now that the pod exists
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("no read came in")
	}
	resolvertest.Eventually(t, 5*time.Second, "the address vouched for", func() bool {
		b, err := vouched.Lookup(testSvc, "")
		return err == nil && slices.Equal(b.Addrs, []string{"10.244.0.5:8080"})
	})
}
