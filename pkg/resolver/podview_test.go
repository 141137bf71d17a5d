package resolver

import (
	"context"
	"fmt"
	"net/http"
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
	"k8s.io/apimachinery/pkg/types"
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

// memPodView is a PodView set by hand: the pods of each Service, whole
// or not, and the joins it saw.
type memPodView struct {
	mu     sync.Mutex
	pods   map[ServiceRef][]*corev1.Pod
	whole  map[ServiceRef]bool
	joined map[ServiceRef]int
	b      *broadcaster[ServiceRef]
	// readable are the pods Read finds, by namespace and name; readNames
	// the names it was asked for.
	readable  map[string]*corev1.Pod
	readNames []string
}

func newMemPodView() *memPodView {
	return &memPodView{pods: map[ServiceRef][]*corev1.Pod{}, whole: map[ServiceRef]bool{}, joined: map[ServiceRef]int{}, b: newBroadcaster[ServiceRef](),
		readable: map[string]*corev1.Pod{}}
}

// readableAs makes p what Read finds of its name.
func (m *memPodView) readableAs(p *corev1.Pod) {
	m.mu.Lock()
	m.readable[p.Namespace+"/"+p.Name] = p
	m.mu.Unlock()
}

func (m *memPodView) Read(svc ServiceRef, names []string) ([]*corev1.Pod, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.readNames = append(m.readNames, names...)
	var out []*corev1.Pod
	for _, n := range names {
		if p := m.readable[svc.Namespace+"/"+n]; p != nil {
			out = append(out, p)
		}
	}
	return out, true
}

func (m *memPodView) set(svc ServiceRef, whole bool, pods ...*corev1.Pod) {
	m.mu.Lock()
	m.pods[svc], m.whole[svc] = pods, whole
	m.mu.Unlock()
	m.b.broadcast(svc)
}

func (m *memPodView) Join(svc ServiceRef) (func(), <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.joined[svc]++
	return sync.OnceFunc(func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.joined[svc]--
	}), closed
}

func (m *memPodView) Pods(svc ServiceRef) ([]*corev1.Pod, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pods[svc], m.whole[svc]
}

func (m *memPodView) Watch(svc ServiceRef) (<-chan struct{}, func()) { return m.b.watch(svc) }

func (m *memPodView) joins(svc ServiceRef) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.joined[svc]
}

// viewEnv is a test resolver with a pod view; testSvc's port targets
// container port "web".
func viewEnv(t *testing.T, probe bool, pods *fakePods) (*testEnv, *memPodView) {
	cfg := testConfig()
	cfg.ProbePods = probe
	view := newMemPodView()
	e := newEnv(t, cfg, func(o *Options) { o.PodView = view; o.Pods = pods })
	e.eps.SetTarget(testSvc, intstr.FromString("web"))
	return e, view
}

// The tail's mechanism (issue 39): the EndpointSlice controller's slice
// cache trails its writes and it backs off, so the slice lists a pod the
// kubelet wrote Ready long after. Here the slices never list it at all:
// the hold is released by the pod view alone, once the pod is Ready and
// not before, to the pod's address on the container port the Service's
// targetPort names.
func TestHoldIsReleasedByThePodsReadyWhenTheSliceNeverIs(t *testing.T) {
	checkNoLeaks(t)
	e, view := viewEnv(t, false, newFakePods())
	app := newStartingApp(t, "127.0.0.2")
	app.ready.Store(true)
	e.net.route(app.addr(), app.addr())
	pod := app.pod("web-1", "u1")
	pod.Status.Phase = corev1.PodRunning
	view.set(testSvc, true, pod) // Running, not Ready yet

	done := fetchAsync(t, e)
	eventually(t, 5*time.Second, "held, with the view joined", func() bool {
		return e.r.holds.held(testSvc) == 1 && view.joins(testSvc) == 1
	})
	time.Sleep(200 * time.Millisecond)
	notAnsweredYet(t, done, "before the pod was Ready")
	ready := pod.DeepCopy()
	ready.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	view.set(testSvc, true, ready)
	wantAnswer(t, done, "200 pod", 5*time.Second, "the hold was not released by the pod's Ready")
	if got := releasedBy(t, e, ReleasedByPodReady); got != 1 {
		t.Errorf("releases by pod_ready = %v, want 1", got)
	}
	eventually(t, 5*time.Second, "the view left with the hold", func() bool { return view.joins(testSvc) == 0 })
}

// hitCounter is a loopback server that counts its requests: a victim a
// forged endpoint points at.
func hitCounter(t *testing.T, e *testEnv, fake string) *countingHandler {
	h := &countingHandler{}
	e.backend(t, fake, h)
	return h
}

type countingHandler struct {
	mu   sync.Mutex
	hits int
}

func (h *countingHandler) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	h.mu.Lock()
	h.hits++
	h.mu.Unlock()
	fmt.Fprint(w, "victim")
}

func (h *countingHandler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hits
}

// Forged slices (issue 38, hole 2), through the whole resolver: a Ready
// endpoint at an address no pod of the Service holds, and a not-ready one
// naming a genuine pod at another address, are neither forwarded to nor
// probed; the request goes to the genuine pod once it is Ready.
func TestForgedEndpointsAreNeverForwardedToOrProbed(t *testing.T) {
	for _, forged := range []string{"ready", "not ready naming a genuine pod"} {
		t.Run(forged, func(t *testing.T) {
			checkNoLeaks(t)
			app := newStartingApp(t, "127.0.0.2")
			pods := newFakePods(app.pod("web-1", "u1"))
			e, view := viewEnv(t, true, pods)
			e.net.route(app.addr(), app.addr())
			victim := hitCounter(t, e, "10.0.0.9:8080")
			pod := app.pod("web-1", "u1")
			pod.Status.Phase = corev1.PodRunning
			view.set(testSvc, true, pod)
			switch forged {
			case "ready":
				e.eps.Set(testSvc, "10.0.0.9:8080")
			default:
				e.eps.SetUnready(testSvc, UnreadyEndpoint{IP: "10.0.0.9", Port: 8080, Pod: "web-1", UID: "u1"})
			}

			done := fetchAsync(t, e)
			eventually(t, 5*time.Second, "the genuine pod checked", func() bool { return app.checks.Load() >= 2 })
			app.ready.Store(true)
			wantAnswer(t, done, "200 pod", 5*time.Second, "not answered once the genuine pod passed its check")
			if n := victim.count(); n != 0 {
				t.Errorf("the forged address got %d requests", n)
			}
			if n := e.net.dialCount("10.0.0.9:8080"); n != 0 {
				t.Errorf("the forged address was dialed %d times", n)
			}
		})
	}
}

// A Service whose pods the view does not have whole (past a bound, not
// listed yet) has each Ready address of its slices vouched for by a read
// of the pod the slice names (issue 38, hole 2, past the view's bounds):
// the request goes to the genuine pod once it is read, and never to a
// forged address, whether it names no pod, a genuine pod at another
// address, a pod with another UID, or a pod going away.
func TestAViewNotWholeVouchesByReadingThePods(t *testing.T) {
	genuine := viewPod("web-1", "u1", true, "10.244.0.5")
	for _, forged := range []struct {
		name     string
		pod      string
		uid      types.UID
		readable *corev1.Pod
	}{
		{"naming no pod", "", "", nil},
		{"naming a genuine pod at another address", "web-1", "u1", nil},
		{"naming a pod with another UID", "web-2", "u-forged", viewPod("web-2", "u2", true, "10.0.0.9")},
		{"naming a pod going away", "web-3", "u3", terminating(viewPod("web-3", "u3", true, "10.0.0.9"))},
		{"naming a pod that does not exist", "web-4", "u4", nil},
	} {
		t.Run(forged.name, func(t *testing.T) {
			checkNoLeaks(t)
			e, view := viewEnv(t, false, newFakePods())
			e.backend(t, "10.244.0.5:8080", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "pod") }))
			victim := hitCounter(t, e, "10.0.0.9:8080")
			view.set(testSvc, false)
			if forged.readable != nil {
				view.readableAs(forged.readable)
			}
			e.eps.Set(testSvc, "10.0.0.9:8080")
			if forged.pod != "" {
				e.eps.SetPod(testSvc, "10.0.0.9", forged.pod, forged.uid)
			}
			done := fetchAsync(t, e)
			eventually(t, 5*time.Second, "held", func() bool { return e.r.holds.held(testSvc) == 1 })
			time.Sleep(100 * time.Millisecond)
			notAnsweredYet(t, done, "with only the forged address listed")

			e.eps.SetPod(testSvc, "10.244.0.5", "web-1", "u1")
			e.eps.Set(testSvc, "10.0.0.9:8080", "10.244.0.5:8080")
			view.readableAs(genuine)
			view.set(testSvc, false) // a read is in
			wantAnswer(t, done, "200 pod", 5*time.Second, "not answered by the genuine pod once read")
			for range 5 {
				if got := <-fetchAsync(t, e); got != "200 pod" {
					t.Errorf("a request forwarded while the genuine pod is listed: %q, want 200 pod", got)
				}
			}
			if n := victim.count(); n != 0 {
				t.Errorf("the forged address got %d requests", n)
			}
		})
	}
}

// A read refused by the namespace's read rate never comes in, and
// nothing else changes once the pod is Ready and listed: the hold looks
// again on its own, and the next read vouches. Before, such a hold
// waited for another slice change, or its deadline: the soak's 60 s
// holds by another way (theirs was the cache's trim, below).
func TestARefusedReadDoesNotStrandTheHold(t *testing.T) {
	checkNoLeaks(t)
	e, view := viewEnv(t, false, newFakePods())
	e.backend(t, "10.244.0.5:8080", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "pod") }))
	view.set(testSvc, false)
	done := fetchAsync(t, e)
	eventually(t, 5*time.Second, "held", func() bool { return e.r.holds.held(testSvc) == 1 })
	e.eps.SetPod(testSvc, "10.244.0.5", "web-1", "u1")
	e.eps.Set(testSvc, "10.244.0.5:8080") // Ready, its pod not read yet
	eventually(t, 5*time.Second, "the listed pod read", func() bool {
		view.mu.Lock()
		defer view.mu.Unlock()
		return slices.Contains(view.readNames, "web-1")
	})
	notAnsweredYet(t, done, "before a read vouched for the pod")
	// The next read finds it; no watch says so.
	view.readableAs(viewPod("web-1", "u1", true, "10.244.0.5"))
	wantAnswer(t, done, "200 pod", 3*unreadRetryMax, "not answered once a read could vouch, with no change to wake the hold")
}

// The pods the view has, whole or not, vouch without a read.
func TestAViewNotWholeReadsOnlyWhatItLacks(t *testing.T) {
	checkNoLeaks(t)
	e, view := viewEnv(t, false, newFakePods())
	e.backend(t, "10.244.0.5:8080", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "pod") }))
	view.set(testSvc, false, viewPod("web-1", "u1", true, "10.244.0.5"))
	e.eps.Set(testSvc, "10.244.0.5:8080")
	e.eps.SetPod(testSvc, "10.244.0.5", "web-1", "u1")
	if got := <-fetchAsync(t, e); got != "200 pod" {
		t.Fatalf("answer = %q, want 200 pod", got)
	}
	view.mu.Lock()
	defer view.mu.Unlock()
	if len(view.readNames) != 0 {
		t.Errorf("read %q, which the view had", view.readNames)
	}
}

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

// A request the slices would forward at once, with no hold (they list a
// Ready endpoint), and no pod view of its Service live: the resolver
// lists the Service's pods first, and a forged Ready endpoint gets
// nothing; the genuine pod, Ready by the kubelet, answers.
func TestAnUnheldRequestIsVouchedForToo(t *testing.T) {
	checkNoLeaks(t)
	genuine := viewPod("web-1", "u1", true, "10.244.0.5")
	api := &fakePodAPI{pods: []corev1.Pod{*genuine}}
	_, ctx := ktesting.NewTestContext(t)
	view, err := NewInformerPodView(ctx, serviceLister(t, selectingService("team", "web", map[string]string{"app": "web"})), api.listWatch, newFakePods(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(view.Close)
	e := newEnv(t, testConfig(), func(o *Options) { o.PodView = view })
	e.eps.SetTarget(testSvc, intstr.FromString("web"))
	victim := hitCounter(t, e, "10.0.0.9:8080")
	e.backend(t, "10.244.0.5:8080", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "pod") }))
	e.eps.Set(testSvc, "10.0.0.9:8080")

	for range 3 { // the first lists; the others find the view whole
		if got := <-fetchAsync(t, e); got != "200 pod" {
			t.Fatalf("answer = %q, want the genuine pod's", got)
		}
	}
	if n := victim.count(); n != 0 {
		t.Errorf("the forged Ready address got %d requests", n)
	}
	if n := len(api.selectors); n != 1 {
		t.Errorf("%d watches of the pods for three requests, want 1", n)
	}
}

// A Service past the view's bounds, with the real view and its reads: its
// Ready address, vouched for by a read of the pod its slice names,
// releases the hold.
func TestAHoldPastTheViewsBoundsIsReleasedByARead(t *testing.T) {
	checkNoLeaks(t)
	web := map[string]string{"app": "web"}
	svcs := []*corev1.Service{selectingService(testSvc.Namespace, testSvc.Name, web)}
	for i := range maxPodViewsPerNamespace {
		svcs = append(svcs, selectingService(testSvc.Namespace, fmt.Sprintf("s-%d", i), map[string]string{"app": "x"}))
	}
	pods := newFakePods()
	_, ctx := ktesting.NewTestContext(t)
	view, err := NewInformerPodView(ctx, serviceLister(t, svcs...), (&fakePodAPI{}).listWatch, pods, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(view.Close)
	for i := range maxPodViewsPerNamespace { // the namespace's views, all in use
		leave, _ := view.Join(ServiceRef{testSvc.Namespace, fmt.Sprintf("s-%d", i)})
		t.Cleanup(leave)
	}
	cfg := testConfig()
	cfg.ProbePods = false
	e := newEnv(t, cfg, func(o *Options) { o.PodView = view; o.Pods = pods })
	e.eps.SetTarget(testSvc, intstr.FromString("web"))
	e.backend(t, "10.244.0.5:8080", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "pod") }))

	done := fetchAsync(t, e)
	eventually(t, 5*time.Second, "held", func() bool { return e.r.holds.held(testSvc) == 1 })
	if view.Viewing() != maxPodViewsPerNamespace {
		t.Fatalf("%d views, want the namespace's %d: the hold got one", view.Viewing(), maxPodViewsPerNamespace)
	}
	pod := labelled(viewPod("web-1", "u1", true, "10.244.0.5"), web)
	pods.mu.Lock()
	pods.pods[pod.Namespace+"/"+pod.Name] = pod
	pods.mu.Unlock()
	e.eps.SetPod(testSvc, "10.244.0.5", "web-1", "u1")
	e.eps.Set(testSvc, "10.244.0.5:8080")
	wantAnswer(t, done, "200 pod", 5*time.Second, "a hold past the view's bounds was not released once a read vouched for its pod")
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
