package resolver

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	elastifake "github.com/elasti-dev/elasti/pkg/generated/clientset/versioned/fake"
	elastiinformers "github.com/elasti-dev/elasti/pkg/generated/informers/externalversions"
)

// fakePodAPI is a ListerWatcher of pods for one view: a list, then a
// watch the test feeds. It records the selectors it was asked for.
type fakePodAPI struct {
	mu        sync.Mutex
	pods      []corev1.Pod
	listErr   error
	watchErr  error
	selectors []string
	watchers  []*watch.FakeWatcher
}

func (f *fakePodAPI) listWatch(namespace, selector string) cache.ListerWatcherWithContext {
	f.mu.Lock()
	f.selectors = append(f.selectors, namespace+" "+selector)
	f.mu.Unlock()
	return noWatchList{&cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.listErr != nil {
				return nil, f.listErr
			}
			return &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: slices.Clone(f.pods)}, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			f.mu.Lock()
			err := f.watchErr
			f.mu.Unlock()
			if err != nil {
				return nil, err
			}
			w := watch.NewFakeWithChanSize(16, false)
			f.mu.Lock()
			f.watchers = append(f.watchers, w)
			f.mu.Unlock()
			return w, nil
		},
	}}
}

// noWatchList is a fake that says it cannot stream a list, so the
// reflector lists, then watches.
type noWatchList struct{ *cache.ListWatch }

func (noWatchList) IsWatchListSemanticsUnSupported() bool { return true }

func (f *fakePodAPI) watcher() *watch.FakeWatcher {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.watchers) == 0 {
		return nil
	}
	return f.watchers[len(f.watchers)-1]
}

func serviceLister(t *testing.T, svcs ...*corev1.Service) corelisters.ServiceLister {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, s := range svcs {
		if err := idx.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	return corelisters.NewServiceLister(idx)
}

func selectingService(ns, name string, sel map[string]string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Selector: sel, Ports: []corev1.ServicePort{{Port: 80}}}}
}

func newTestPodView(t *testing.T, api *fakePodAPI, svcs ...*corev1.Service) (*InformerPodView, *prometheus.Registry) {
	_, ctx := ktesting.NewTestContext(t)
	reg := prometheus.NewRegistry()
	v, err := NewInformerPodView(ctx, serviceLister(t, svcs...), api.listWatch, newFakePods(), reg)
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
	api := &fakePodAPI{pods: []corev1.Pod{*viewPod("web-1", "u1", false, "10.244.0.5")}}
	v, _ := newTestPodView(t, api, selectingService("team", "web", map[string]string{"app": "web"}))
	v.linger = 100 * time.Millisecond

	if pods, whole := v.Pods(testSvc); pods != nil || whole {
		t.Fatalf("before a join: %d pods, whole %v", len(pods), whole)
	}
	changed, stop := v.Watch(testSvc)
	defer stop()
	leave, listed := v.Join(testSvc)
	<-changed
	<-listed
	eventually(t, 5*time.Second, "listed", func() bool { _, whole := v.Pods(testSvc); return whole })
	if got := api.selectors; !slices.Equal(got, []string{"team app=web"}) {
		t.Errorf("watched %q, want the Service's namespace and selector", got)
	}

	changed, stop2 := v.Watch(testSvc)
	defer stop2()
	eventually(t, 5*time.Second, "watching", func() bool { return api.watcher() != nil })
	api.watcher().Modify(viewPod("web-1", "u1", true, "10.244.0.5"))
	<-changed
	pods, _ := v.Pods(testSvc)
	if len(pods) != 1 || !podReady(pods[0]) {
		t.Fatalf("pods after the kubelet's Ready = %+v", pods)
	}

	leave()
	eventually(t, 5*time.Second, "the watch ended after the linger", func() bool { return v.Viewing() == 0 })
	if pods, whole := v.Pods(testSvc); pods != nil || whole {
		t.Errorf("after the linger: %d pods, whole %v", len(pods), whole)
	}
}

// A Service without a selector, or with one too large to cache, gets no
// view; a list the resolver may not make ends the view, which is then
// never whole.
func TestInformerPodViewWithoutPods(t *testing.T) {
	big := map[string]string{"app": strings.Repeat("x", maxCachedSelector)}
	api := &fakePodAPI{}
	v, _ := newTestPodView(t, api,
		selectingService("team", "none", nil),
		selectingService("team", "big", trimSelector(big)))
	for _, name := range []string{"none", "big", "missing"} {
		leave, listed := v.Join(ServiceRef{"team", name})
		<-listed // at once: there is nothing to list
		leave()
	}
	if n := v.Viewing(); n != 0 {
		t.Errorf("%d views for Services without a selector the cache keeps", n)
	}

	api.listErr = apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", fmt.Errorf("no"))
	v2, _ := newTestPodView(t, api, selectingService("team", "web", map[string]string{"app": "web"}))
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
	api := &fakePodAPI{pods: []corev1.Pod{*viewPod("web-1", "u1", false, "10.244.0.5")}}
	v, _ := newTestPodView(t, api, selectingService("team", "web", map[string]string{"app": "web"}))
	v.refusals.pause = 200 * time.Millisecond
	leave, listed := v.Join(testSvc)
	defer leave()
	<-listed
	eventually(t, 5*time.Second, "watching", func() bool { return api.watcher() != nil })

	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", fmt.Errorf("RBAC: not synced"))
	api.mu.Lock()
	api.listErr, api.watchErr = forbidden, forbidden
	api.mu.Unlock()
	changed, stop := v.Watch(testSvc)
	defer stop()
	api.watcher().Stop() // the apiserver went away; the reflector watches again, and is refused
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("no change said after the refusal: the holds would not look again")
	}
	eventually(t, 5*time.Second, "the refused view gone", func() bool { return v.Viewing() == 0 })
	if pods, whole := v.Pods(testSvc); whole || pods != nil {
		t.Fatalf("after the refusal: %d pods, whole %v; want no view", len(pods), whole)
	}
	again, listedAgain := v.Join(testSvc) // within the pause: no view
	<-listedAgain
	again()
	if n := v.Viewing(); n != 0 {
		t.Fatalf("%d views started within the pause", n)
	}

	api.mu.Lock()
	api.listErr, api.watchErr = nil, nil
	api.pods = []corev1.Pod{*viewPod("web-1", "u1", true, "10.244.0.5")}
	api.mu.Unlock()
	time.Sleep(v.refusals.pause)
	back, listedBack := v.Join(testSvc)
	defer back()
	<-listedBack
	eventually(t, 5*time.Second, "a new view, whole", func() bool {
		pods, whole := v.Pods(testSvc)
		return whole && len(pods) == 1 && podReady(pods[0])
	})
}

// The bounds: maxPodViewsPerNamespace views in one namespace and
// maxPodViews in all, refused past them and counted; a view that only
// lingers gives its place up.
func TestInformerPodViewBounds(t *testing.T) {
	var svcs []*corev1.Service
	for i := range maxPodViews + 1 {
		svcs = append(svcs, selectingService(fmt.Sprintf("ns-%d", i%(maxPodViews/maxPodViewsPerNamespace+1)), fmt.Sprintf("s-%d", i), map[string]string{"app": "x"}))
	}
	svcs = append(svcs, selectingService("crowded", "extra", map[string]string{"app": "x"}))
	for i := range maxPodViewsPerNamespace {
		svcs = append(svcs, selectingService("crowded", fmt.Sprintf("s-%d", i), map[string]string{"app": "x"}))
	}
	v, reg := newTestPodView(t, &fakePodAPI{}, svcs...)
	refused := func() float64 { return gatheredValue(t, reg, "elasti_resolver_pod_views_refused_total") }
	join := func(svc ServiceRef) func() { leave, _ := v.Join(svc); return leave }

	var leaves []func()
	for i := range maxPodViewsPerNamespace {
		leaves = append(leaves, join(ServiceRef{"crowded", fmt.Sprintf("s-%d", i)}))
	}
	leaves = append(leaves, join(ServiceRef{"crowded", "extra"}))
	if got := refused(); got != 1 {
		t.Fatalf("refused = %v after one past the namespace's share, want 1", got)
	}
	for _, s := range svcs[:maxPodViews-maxPodViewsPerNamespace] {
		leaves = append(leaves, join(ServiceRef{s.Namespace, s.Name}))
	}
	if n := v.Viewing(); n != maxPodViews {
		t.Fatalf("%d views, want %d", n, maxPodViews)
	}
	last := svcs[maxPodViews-maxPodViewsPerNamespace]
	leaves = append(leaves, join(ServiceRef{last.Namespace, last.Name}))
	if got := refused(); got != 2 {
		t.Fatalf("refused = %v after one past the total, want 2", got)
	}
	leaves[0]() // lingers now: its place can be taken
	leave := join(ServiceRef{last.Namespace, last.Name})
	defer leave()
	if got, n := refused(), v.Viewing(); got != 2 || n != maxPodViews {
		t.Errorf("after a view lingers: refused %v, %d views; want the lingering one replaced", got, n)
	}
	for _, l := range leaves {
		l()
	}
}

// A view keeps at most MaxViewPods pods, and says it is not whole past
// them until a list fits again; a pod's spec past maxViewPodBytes is not
// kept.
func TestPodStoreBounds(t *testing.T) {
	s := newPodStore(2, func() {})
	for i := range 3 {
		_ = s.Add(viewPod(fmt.Sprintf("web-%d", i), "", false, "10.244.0.5"))
	}
	if pods, whole := s.list(); len(pods) != 2 || whole {
		t.Fatalf("past the bound: %d pods, whole %v; want 2, not whole", len(pods), whole)
	}
	_ = s.Replace([]any{viewPod("web-0", "", false), viewPod("web-1", "", false)}, "2")
	if pods, whole := s.list(); len(pods) != 2 || !whole {
		t.Fatalf("a list that fits: %d pods, whole %v", len(pods), whole)
	}
	_ = s.Delete(viewPod("web-0", "", false))
	if pods, _ := s.list(); len(pods) != 1 {
		t.Fatalf("after a delete: %d pods", len(pods))
	}

	huge := viewPod("web-9", "u9", true, "10.244.0.9")
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
	if trimmed.Annotations[specDroppedAnnotation] == "" {
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
	checkNoLeaks(t)
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	web := service("team", "web", svcPort("http", 80, intstr.FromString("web")))
	ready := slice("team", "web-abc", "web", map[string]int32{"http": 8080}, ep("10.244.0.5"))
	ready.Endpoints[0].TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: "team", Name: "web-1", UID: "u1"}
	objs := []runtime.Object{web, ready}
	for i := range maxPodViewsPerNamespace {
		objs = append(objs, service("team", fmt.Sprintf("s-%d", i), svcPort("http", 80, intstr.FromInt32(8080))))
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
	pods := newFakePods()
	view, err := NewInformerPodView(ctx, factory.Core().V1().Services().Lister(), (&fakePodAPI{}).listWatch, pods, nil)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	defer cancel() // before Shutdown, which waits for the informers to end
	defer view.Close()
	factory.WaitForCacheSync(ctx.Done())
	eventually(t, 5*time.Second, "handlers synced", eps.HasSynced)
	for i := range maxPodViewsPerNamespace { // the namespace's views, all in use
		leave, _ := view.Join(ServiceRef{"team", fmt.Sprintf("s-%d", i)})
		defer leave()
	}
	leave, _ := view.Join(testSvc)
	defer leave()
	if _, whole := view.Pods(testSvc); whole || view.Viewing() != maxPodViewsPerNamespace {
		t.Fatalf("web has a view (%d views); want it past the bounds", view.Viewing())
	}

	vouched := vouchedEndpoints{EndpointSource: eps, view: view}
	b, err := vouched.Lookup(testSvc, "")
	if err != nil || len(b.Addrs) != 0 || !b.unread {
		t.Fatalf("before the read: %+v, %v; want no address, waiting on a read", b, err)
	}
	changed, stop := view.Watch(testSvc)
	defer stop()
	pod := labelled(viewPod("web-1", "u1", true, "10.244.0.5"), map[string]string{"app": "web"})
	pods.mu.Lock()
	pods.pods[pod.Namespace+"/"+pod.Name] = pod
	pods.mu.Unlock()
	if _, err := vouched.Lookup(testSvc, ""); err != nil { // starts the read now that the pod exists
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("no read came in")
	}
	eventually(t, 5*time.Second, "the address vouched for", func() bool {
		b, err := vouched.Lookup(testSvc, "")
		return err == nil && slices.Equal(b.Addrs, []string{"10.244.0.5:8080"})
	})
}
