package resolver

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview/clusterviewtest"
	"github.com/elasti-dev/elasti/pkg/resolver/hold"
	"github.com/elasti-dev/elasti/pkg/resolver/internal/resolvertest"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2/ktesting"
)

// memPodView is a PodView set by hand: the pods of each Service, whole
// or not, and the joins it saw.
type memPodView struct {
	mu     sync.Mutex
	pods   map[clusterview.ServiceRef][]*corev1.Pod
	whole  map[clusterview.ServiceRef]bool
	joined map[clusterview.ServiceRef]int
	b      *clusterview.Broadcaster[clusterview.ServiceRef]
	// readable are the pods Read finds, by namespace and name; readNames
	// the names it was asked for.
	readable  map[string]*corev1.Pod
	readNames []string
	// refusing makes Join start no view, as past the bounds or within
	// a refusal's pause.
	refusing bool
	// ended counts each Service's views ended under their holds (end):
	// a leave of an ended view does nothing, as InformerPodView's.
	ended map[clusterview.ServiceRef]int
}

func newMemPodView() *memPodView {
	return &memPodView{pods: map[clusterview.ServiceRef][]*corev1.Pod{}, whole: map[clusterview.ServiceRef]bool{}, joined: map[clusterview.ServiceRef]int{}, b: clusterview.NewBroadcaster[clusterview.ServiceRef](),
		readable: map[string]*corev1.Pod{}, ended: map[clusterview.ServiceRef]int{}}
}

// readableAs makes p what Read finds of its name.
func (m *memPodView) readableAs(p *corev1.Pod) {
	m.mu.Lock()
	m.readable[p.Namespace+"/"+p.Name] = p
	m.mu.Unlock()
}

func (m *memPodView) Read(svc clusterview.ServiceRef, names []string) ([]*corev1.Pod, bool) {
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

func (m *memPodView) set(svc clusterview.ServiceRef, whole bool, pods ...*corev1.Pod) {
	m.mu.Lock()
	m.pods[svc], m.whole[svc] = pods, whole
	m.mu.Unlock()
	m.b.Broadcast(svc)
}

func (m *memPodView) Join(svc clusterview.ServiceRef) (func(), <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.refusing {
		return func() {}, listed
	}
	m.joined[svc]++
	gen := m.ended[svc]
	return sync.OnceFunc(func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.ended[svc] == gen {
			m.joined[svc]--
		}
	}), listed
}

// end ends svc's view under its holds, as a refusal or a take-back does.
func (m *memPodView) end(svc clusterview.ServiceRef) {
	m.mu.Lock()
	m.joined[svc] = 0
	m.ended[svc]++
	m.mu.Unlock()
	m.b.Broadcast(svc)
}

// listed is Join's channel for a view that has listed: closed from the
// start.
var listed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (m *memPodView) HasView(svc clusterview.ServiceRef) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.joined[svc] > 0
}

func (m *memPodView) Pods(svc clusterview.ServiceRef) ([]*corev1.Pod, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pods[svc], m.whole[svc]
}

func (m *memPodView) Watch(svc clusterview.ServiceRef) (<-chan struct{}, func()) {
	return m.b.Watch(svc)
}

func (m *memPodView) joins(svc clusterview.ServiceRef) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.joined[svc]
}

// viewEnv is a test resolver with a pod view; testSvc's port targets
// container port "web".
func viewEnv(t *testing.T, probe bool, pods *resolvertest.FakePods) (*testEnv, *memPodView) {
	cfg := testConfig()
	cfg.ProbePods = probe
	view := newMemPodView()
	e := newEnv(t, cfg, func(o *Options) { o.PodView = view; o.Pods = pods })
	e.eps.SetTarget(testSvc, intstr.FromString("web"))
	return e, view
}

// viewEnvWithReadyApp is viewEnv without direct probing, and an app at
// 127.0.0.2 that answers Ready, routed.
func viewEnvWithReadyApp(t *testing.T) (*testEnv, *memPodView, *clusterviewtest.StartingApp) {
	resolvertest.CheckNoLeaks(t)
	e, view := viewEnv(t, false, resolvertest.NewFakePods())
	app := clusterviewtest.NewStartingApp(t, "127.0.0.2")
	app.Ready.Store(true)
	e.net.route(app.Addr(), app.Addr())
	return e, view, app
}

// The tail's mechanism (issue 39): the EndpointSlice controller's slice
// cache trails its writes and it backs off, so the slice lists a pod the
// kubelet wrote Ready long after. Here the slices never list it at all:
// the hold is released by the pod view alone, once the pod is Ready and
// not before, to the pod's address on the container port the Service's
// targetPort names.
func TestHoldIsReleasedByThePodsReadyWhenTheSliceNeverIs(t *testing.T) {
	e, view, app := viewEnvWithReadyApp(t)
	pod := app.Pod("web-1", "u1")
	pod.Status.Phase = corev1.PodRunning
	view.set(testSvc, true, pod) // Running, not Ready yet

	done := fetchAsync(t, e)
	resolvertest.Eventually(t, 5*time.Second, "held, with the view joined", func() bool {
		return e.r.holds.Held(testSvc) == 1 && view.joins(testSvc) == 1
	})
	time.Sleep(200 * time.Millisecond)
	notAnsweredYet(t, done, "before the pod was Ready")
	ready := pod.DeepCopy()
	ready.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	view.set(testSvc, true, ready)
	wantAnswer(t, done, "200 pod", 5*time.Second, "the hold was not released by the pod's Ready")
	if got := releasedBy(t, e, hold.ReleasedByPodReady); got != 1 {
		t.Errorf("releases by pod_ready = %v, want 1", got)
	}
	resolvertest.Eventually(t, 5*time.Second, "the view left with the hold", func() bool { return view.joins(testSvc) == 0 })
}

// A hold whose first Join got no view (the views full, or paused after
// the apiserver refused one while it restarted) joins again once one can
// start, and again when its view ends under it, and is released by the
// pod's Ready through it: the slices never list the pod. Before, it
// stayed without a view for the rest of the hold.
func TestHoldJoinsThePodViewOnceOneCanStart(t *testing.T) {
	e, view, app := viewEnvWithReadyApp(t)
	view.mu.Lock()
	view.refusing = true
	view.mu.Unlock()

	done := fetchAsync(t, e)
	resolvertest.Eventually(t, 5*time.Second, "held", func() bool { return e.r.holds.Held(testSvc) == 1 })
	time.Sleep(hold.ViewRejoin + 200*time.Millisecond) // a rejoin refused too
	if n := view.joins(testSvc); n != 0 {
		t.Fatalf("%d joins while the view refuses them", n)
	}
	view.mu.Lock()
	view.refusing = false
	view.mu.Unlock()
	resolvertest.Eventually(t, 3*hold.ViewRejoin, "the hold joined the view once it could", func() bool { return view.joins(testSvc) == 1 })
	notAnsweredYet(t, done, "before the pod was Ready")
	// The view ends under the hold: it joins a new one.
	view.end(testSvc)
	resolvertest.Eventually(t, 3*hold.ViewRejoin, "the hold joined a view again after its own ended", func() bool { return view.joins(testSvc) == 1 })
	notAnsweredYet(t, done, "before the pod was Ready")

	pod := app.Pod("web-1", "u1")
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	view.set(testSvc, true, pod)
	wantAnswer(t, done, "200 pod", 5*time.Second, "the hold was not released by the pod's Ready")
	if got := releasedBy(t, e, hold.ReleasedByPodReady); got != 1 {
		t.Errorf("releases by pod_ready = %v, want 1", got)
	}
	resolvertest.Eventually(t, 5*time.Second, "the view left with the hold", func() bool { return view.joins(testSvc) == 0 })
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
			resolvertest.CheckNoLeaks(t)
			app := clusterviewtest.NewStartingApp(t, "127.0.0.2")
			pods := resolvertest.NewFakePods(app.Pod("web-1", "u1"))
			e, view := viewEnv(t, true, pods)
			e.net.route(app.Addr(), app.Addr())
			victim := hitCounter(t, e, "10.0.0.9:8080")
			pod := app.Pod("web-1", "u1")
			pod.Status.Phase = corev1.PodRunning
			view.set(testSvc, true, pod)
			switch forged {
			case "ready":
				e.eps.Set(testSvc, "10.0.0.9:8080")
			default:
				e.eps.SetUnready(testSvc, clusterview.UnreadyEndpoint{IP: "10.0.0.9", Port: 8080, Pod: "web-1", UID: "u1"})
			}

			done := fetchAsync(t, e)
			resolvertest.Eventually(t, 5*time.Second, "the genuine pod checked", func() bool { return app.Checks.Load() >= 2 })
			app.Ready.Store(true)
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
	genuine := resolvertest.ViewPod("web-1", "u1", true, "10.244.0.5")
	for _, forged := range []struct {
		name     string
		pod      string
		uid      types.UID
		readable *corev1.Pod
	}{
		{"naming no pod", "", "", nil},
		{"naming a genuine pod at another address", "web-1", "u1", nil},
		{"naming a pod with another UID", "web-2", "u-forged", resolvertest.ViewPod("web-2", "u2", true, "10.0.0.9")},
		{"naming a pod going away", "web-3", "u3", resolvertest.Terminating(resolvertest.ViewPod("web-3", "u3", true, "10.0.0.9"))},
		{"naming a pod that does not exist", "web-4", "u4", nil},
	} {
		t.Run(forged.name, func(t *testing.T) {
			resolvertest.CheckNoLeaks(t)
			e, view := viewEnv(t, false, resolvertest.NewFakePods())
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
			resolvertest.Eventually(t, 5*time.Second, "held", func() bool { return e.r.holds.Held(testSvc) == 1 })
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
	resolvertest.CheckNoLeaks(t)
	e, view := viewEnv(t, false, resolvertest.NewFakePods())
	e.backend(t, "10.244.0.5:8080", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "pod") }))
	view.set(testSvc, false)
	done := fetchAsync(t, e)
	resolvertest.Eventually(t, 5*time.Second, "held", func() bool { return e.r.holds.Held(testSvc) == 1 })
	e.eps.SetPod(testSvc, "10.244.0.5", "web-1", "u1")
	e.eps.Set(testSvc, "10.244.0.5:8080") // Ready, its pod not read yet
	resolvertest.Eventually(t, 5*time.Second, "the listed pod read", func() bool {
		view.mu.Lock()
		defer view.mu.Unlock()
		return slices.Contains(view.readNames, "web-1")
	})
	notAnsweredYet(t, done, "before a read vouched for the pod")
	// The next read finds it; no watch says so.
	view.readableAs(resolvertest.ViewPod("web-1", "u1", true, "10.244.0.5"))
	wantAnswer(t, done, "200 pod", 3*hold.UnreadRetryMax, "not answered once a read could vouch, with no change to wake the hold")
}

// The pods the view has, whole or not, vouch without a read.
func TestAViewNotWholeReadsOnlyWhatItLacks(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	e, view := viewEnv(t, false, resolvertest.NewFakePods())
	e.backend(t, "10.244.0.5:8080", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "pod") }))
	view.set(testSvc, false, resolvertest.ViewPod("web-1", "u1", true, "10.244.0.5"))
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

// A request the slices would forward at once, with no hold (they list a
// ready endpoint), and no pod view of its Service live: the resolver
// lists the Service's pods first, and a forged Ready endpoint gets
// nothing; the genuine pod, Ready by the kubelet, answers.
func TestAnUnheldRequestIsVouchedForToo(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	genuine := resolvertest.ViewPod("web-1", "u1", true, "10.244.0.5")
	api := &resolvertest.FakePodAPI{Pods: []corev1.Pod{*genuine}}
	_, ctx := ktesting.NewTestContext(t)
	view, err := clusterview.NewInformerPodView(ctx, resolvertest.ServiceLister(t, resolvertest.SelectingService("team", "web", map[string]string{"app": "web"})), api.ListWatch, resolvertest.NewFakePods(), nil)
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
	if n := len(api.Selectors); n != 1 {
		t.Errorf("%d watches of the pods for three requests, want 1", n)
	}
}

// A Service past the view's bounds, with the real view and its reads: its
// ready address, vouched for by a read of the pod its slice names,
// releases the hold.
func TestAHoldPastTheViewsBoundsIsReleasedByARead(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	web := map[string]string{"app": "web"}
	svcs := []*corev1.Service{resolvertest.SelectingService(testSvc.Namespace, testSvc.Name, web)}
	for i := range clusterview.MaxPodViews {
		svcs = append(svcs, resolvertest.SelectingService(testSvc.Namespace, fmt.Sprintf("s-%d", i), map[string]string{"app": "x"}))
	}
	pods := resolvertest.NewFakePods()
	_, ctx := ktesting.NewTestContext(t)
	view, err := clusterview.NewInformerPodView(ctx, resolvertest.ServiceLister(t, svcs...), (&resolvertest.FakePodAPI{}).ListWatch, pods, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(view.Close)
	for i := range clusterview.MaxPodViews { // every view, in use by the namespace
		leave, _ := view.Join(clusterview.ServiceRef{Namespace: testSvc.Namespace, Name: fmt.Sprintf("s-%d", i)})
		t.Cleanup(leave)
	}
	cfg := testConfig()
	cfg.ProbePods = false
	e := newEnv(t, cfg, func(o *Options) { o.PodView = view; o.Pods = pods })
	e.eps.SetTarget(testSvc, intstr.FromString("web"))
	e.backend(t, "10.244.0.5:8080", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "pod") }))

	done := fetchAsync(t, e)
	resolvertest.Eventually(t, 5*time.Second, "held", func() bool { return e.r.holds.Held(testSvc) == 1 })
	if view.Viewing() != clusterview.MaxPodViews {
		t.Fatalf("%d views, want the %d in use: the hold got one", view.Viewing(), clusterview.MaxPodViews)
	}
	pod := resolvertest.Labelled(resolvertest.ViewPod("web-1", "u1", true, "10.244.0.5"), web)
	pods.Set(pod)
	e.eps.SetPod(testSvc, "10.244.0.5", "web-1", "u1")
	e.eps.Set(testSvc, "10.244.0.5:8080")
	wantAnswer(t, done, "200 pod", 5*time.Second, "a hold past the view's bounds was not released once a read vouched for its pod")
}
