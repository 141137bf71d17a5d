package resolver

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/elasti-dev/elasti/pkg/resolver/internal/resolvertest"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/elasti-dev/elasti/pkg/podcheck"
	"github.com/elasti-dev/elasti/pkg/podcheck/podchecktest"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
)

// startingApp is a pod's app on a loopback address: it listens at once,
// answers 503 on /ready until ready is set, and "pod" elsewhere. It
// counts what it is sent.
type startingApp struct {
	ip        string
	port      int32
	ready     atomic.Bool
	checks    atomic.Int32
	requests  atomic.Int32
	earlyHits atomic.Int32 // requests other than /ready while /ready answers 503
}

func newStartingApp(t *testing.T, ip string) *startingApp {
	a := &startingApp{ip: ip}
	_, a.port = podchecktest.Serve(t, ip, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ready" {
			a.checks.Add(1)
			if !a.ready.Load() {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
			return
		}
		a.requests.Add(1)
		if !a.ready.Load() {
			a.earlyHits.Add(1)
		}
		_, _ = fmt.Fprint(w, "pod")
	}))
	return a
}

func (a *startingApp) addr() string { return net.JoinHostPort(a.ip, strconv.Itoa(int(a.port))) }

func (a *startingApp) pod(name string, uid types.UID) *corev1.Pod {
	p := podchecktest.Pod(a.ip, a.port, podchecktest.HTTPProbe("/ready", intstr.FromString("web")), nil)
	p.Name, p.UID = name, uid
	p.Spec.Containers[0].ReadinessProbe.PeriodSeconds = 10
	return p
}

func (a *startingApp) endpoint(name string, uid types.UID) clusterview.UnreadyEndpoint {
	return clusterview.UnreadyEndpoint{IP: a.ip, Port: a.port, Pod: name, UID: uid}
}

// probeEnv is a test resolver with direct probing on, and an app whose
// pod testSvc's slices list not ready.
func probeEnv(t *testing.T, probe bool, pods *resolvertest.FakePods) *testEnv {
	cfg := testConfig()
	cfg.ProbePods = probe
	return newEnv(t, cfg, func(o *Options) { o.Pods = pods })
}

func releasedBy(t *testing.T, e *testEnv, by string) float64 {
	return metricValue(t, e.r.metrics.HeldReleases.WithLabelValues(by))
}

// The check: a held request on a Service whose slice lists the
// pod not ready is forwarded once the pod's own readiness check passes,
// not while it answers 503, and without waiting for the slice's Ready.
func TestHeldRequestForwardedOnDirectCheck(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	app := newStartingApp(t, "127.0.0.2")
	pods := resolvertest.NewFakePods(app.pod("web-1", "u1"))
	e := probeEnv(t, true, pods)
	e.net.route(app.addr(), app.addr())
	e.eps.SetUnready(testSvc, app.endpoint("web-1", "u1"))

	done := fetchAsync(t, e)
	resolvertest.Eventually(t, 5*time.Second, "the readiness path checked a few times", func() bool { return app.checks.Load() >= 4 })
	notAnsweredYet(t, done, "while the pod's readiness answered 503")
	readyAt := time.Now()
	app.ready.Store(true)
	wantAnswer(t, done, "200 pod", 5*time.Second, "the held request was not forwarded after the pod's readiness check passed; the slice never said Ready")
	// The cadence is 25 ms; a second allows a loaded machine.
	if waited := time.Since(readyAt); waited > time.Second {
		t.Errorf("forwarded %v after the pod's readiness passed", waited)
	}
	if n := app.earlyHits.Load(); n != 0 {
		t.Errorf("the app got %d requests while its readiness answered 503", n)
	}
	if got := releasedBy(t, e, ReleasedByDirectProbe); got != 1 {
		t.Errorf("releases by direct probe = %v, want 1", got)
	}
	if n := pods.ReadsOf("team", "web-1"); n != 1 {
		t.Errorf("the pod was read %d times, want once", n)
	}
	// The slice lists the pod Ready later: the lead is measured once.
	e.eps.SetUnready(testSvc)
	e.eps.Set(testSvc, app.addr())
	resolvertest.Eventually(t, 2*time.Second, "the lead measured", func() bool { return metricValue(t, e.r.metrics.DirectProbeLead) == 1 })
	e.eps.Set(testSvc)
	e.eps.SetUnready(testSvc, app.endpoint("web-1", "u1"))

	// Once nothing is held, nothing is probed.
	resolvertest.Eventually(t, 2*time.Second, "probing to stop", func() bool { return e.r.holds.direct.probing() == 0 })
	before := app.checks.Load()
	time.Sleep(100 * time.Millisecond)
	if after := app.checks.Load(); after != before {
		t.Errorf("the pod was checked %d more times with nothing held", after-before)
	}

	// A second request before the slice says Ready is released the same
	// way, without reading the pod again.
	if got := <-fetchAsync(t, e); got != "200 pod" {
		t.Errorf("second request = %q", got)
	}
	if n := pods.ReadsOf("team", "web-1"); n != 1 {
		t.Errorf("the pod was read %d times for two holds, want once", n)
	}
}

// fetchAsync sends GET / to the resolver for testSvc and returns where its
// answer ("status body") arrives.
func fetchAsync(t *testing.T, e *testEnv) <-chan string {
	client := newClient(t)
	done := make(chan string, 1)
	go func() { done <- fetch(client, e.request(t, context.Background(), http.MethodGet, "/", nil)) }()
	return done
}

// notAnsweredYet fails if the request fetchAsync sent has been answered,
// saying while what it should still have been held.
func notAnsweredYet(t *testing.T, done <-chan string, while string) {
	t.Helper()
	select {
	case got := <-done:
		t.Fatalf("answered %q %s", got, while)
	default:
	}
}

// wantAnswer waits at most within for the answer to the request
// fetchAsync sent, and fails unless it is want; unanswered says what
// should have released it.
func wantAnswer(t *testing.T, done <-chan string, want string, within time.Duration, unanswered string) {
	t.Helper()
	select {
	case got := <-done:
		if got != want {
			t.Fatalf("answer = %q, want %q", got, want)
		}
	case <-time.After(within):
		t.Fatal(unanswered)
	}
}

// heldWhile holds one request for testSvc and reports, after d, whether
// it is still held; then the slice lists app Ready and the answer must
// be the pod's.
func heldWhile(t *testing.T, e *testEnv, app *startingApp, d time.Duration) {
	t.Helper()
	done := fetchAsync(t, e)
	resolvertest.Eventually(t, 5*time.Second, "held", func() bool { return e.r.holds.held(testSvc) == 1 })
	time.Sleep(d)
	notAnsweredYet(t, done, "before the slice said Ready")
	e.eps.Set(testSvc, app.addr())
	if got := <-done; got != "200 pod" {
		t.Fatalf("answer = %q, want 200 pod", got)
	}
	if got := releasedBy(t, e, ReleasedByEndpointReady); got != 1 {
		t.Errorf("releases by the slice's Ready = %v, want 1", got)
	}
}

func TestProbePodsOffWaitsForReady(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	app := newStartingApp(t, "127.0.0.2")
	app.ready.Store(true)
	pods := resolvertest.NewFakePods(app.pod("web-1", "u1"))
	e := probeEnv(t, false, pods)
	e.net.route(app.addr(), app.addr())
	e.eps.SetUnready(testSvc, app.endpoint("web-1", "u1"))
	heldWhile(t, e, app, 300*time.Millisecond)
	if app.checks.Load() != 0 || pods.ReadsOf("team", "web-1") != 0 {
		t.Errorf("with --probe-pods=false the pod was read %d times and checked %d", pods.ReadsOf("team", "web-1"), app.checks.Load())
	}
}

// What the resolver cannot check the kubelet's way waits for Ready, and
// an address that is not the pod's is never connected to.
func TestDirectProbeFallsBackToReady(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*corev1.Pod)
		reason string
	}{
		{"exec probe", func(p *corev1.Pod) {
			p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
		}, podcheck.FallbackExec},
		{"address is not the pod's", func(p *corev1.Pod) { p.Status.PodIP, p.Status.PodIPs = "127.0.0.9", nil }, podcheck.FallbackPodMismatch},
		{"pod unreadable", nil, FallbackPodUnreadable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resolvertest.CheckNoLeaks(t)
			app := newStartingApp(t, "127.0.0.2")
			app.ready.Store(true)
			pods := resolvertest.NewFakePods()
			if tc.change != nil {
				pod := app.pod("web-1", "u1")
				tc.change(pod)
				pods = resolvertest.NewFakePods(pod)
			}
			e := probeEnv(t, true, pods)
			e.net.route(app.addr(), app.addr())
			e.eps.SetUnready(testSvc, app.endpoint("web-1", "u1"))
			heldWhile(t, e, app, 300*time.Millisecond)
			if n := app.checks.Load(); n != 0 {
				t.Errorf("the app was checked %d times", n)
			}
			if got := metricValue(t, e.r.metrics.DirectProbeFallbacks.WithLabelValues(tc.reason)); got != 1 {
				t.Errorf("fallbacks for %s = %v, want 1", tc.reason, got)
			}
		})
	}
}

// A probe with initialDelaySeconds is not a fallback: while the pod read
// does not show its container running, the resolver reads the pod again
// and checks nothing; once it runs and the delay is over, the pod's own
// check releases the held request.
func TestDirectProbeReadsAgainUntilTheContainerRuns(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	app := newStartingApp(t, "127.0.0.2")
	app.ready.Store(true)
	pod := app.pod("web-1", "u1")
	pod.Spec.Containers[0].ReadinessProbe.InitialDelaySeconds = 2
	pods := resolvertest.NewFakePods(pod)
	e := probeEnv(t, true, pods)
	e.net.route(app.addr(), app.addr())
	e.eps.SetUnready(testSvc, app.endpoint("web-1", "u1"))

	done := fetchAsync(t, e)
	resolvertest.Eventually(t, 5*time.Second, "the pod read again", func() bool { return pods.ReadsOf("team", "web-1") >= 3 })
	notAnsweredYet(t, done, "before the pod showed its container running")
	if n := app.checks.Load(); n != 0 {
		t.Fatalf("the pod was checked %d times before it showed its container running", n)
	}

	running := pod.DeepCopy()
	running.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", State: corev1.ContainerState{
		Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))}}}}
	pods.Set(running)
	wantAnswer(t, done, "200 pod", 10*time.Second, "the held request was not forwarded once the container ran past its initialDelaySeconds")
	if got := releasedBy(t, e, ReleasedByDirectProbe); got != 1 {
		t.Errorf("releases by direct probe = %v, want 1", got)
	}
	for _, reason := range fallbackReasons {
		if got := metricValue(t, e.r.metrics.DirectProbeFallbacks.WithLabelValues(reason)); got != 0 {
			t.Errorf("fallbacks for %s = %v, want 0", reason, got)
		}
	}
}

// A pod the slices no longer list not ready (Ready now, or gone) is no
// longer probed.
func TestDirectProbeStopsWhenTheSliceMovesOn(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	app := newStartingApp(t, "127.0.0.2")
	pods := resolvertest.NewFakePods(app.pod("web-1", "u1"))
	e := probeEnv(t, true, pods)
	e.eps.SetUnready(testSvc, app.endpoint("web-1", "u1"))
	client := newClient(t)
	req := e.request(t, context.Background(), http.MethodGet, "/", nil)
	done := make(chan string, 1)
	go func() { done <- fetch(client, req) }()
	resolvertest.Eventually(t, 5*time.Second, "the pod checked", func() bool { return app.checks.Load() >= 2 })
	e.eps.SetUnready(testSvc) // the pod went away
	resolvertest.Eventually(t, 2*time.Second, "probing to stop", func() bool { return e.r.holds.direct.probing() == 0 })
	before := app.checks.Load()
	time.Sleep(100 * time.Millisecond)
	if after := app.checks.Load(); after > before+1 {
		t.Errorf("the pod was checked %d more times after the slice dropped it", after-before)
	}
	if e.r.holds.held(testSvc) != 1 {
		t.Error("the request is no longer held")
	}
	e.srv.CloseClientConnections()
	<-done
}

// blockingPods never answers until its context ends: every probe it is
// asked for stays running, so the bounds are what limits them.
type blockingPods struct{ reads atomic.Int32 }

func TestDirectProbeBounds(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	var fellBack atomic.Int32
	p := newPodProber(ctx, clusterview.NewMemoryEndpoints(), nil, &blockingPods{}, probeReport{fellBack: func(reason string) {
		if reason == FallbackBound {
			fellBack.Add(1)
		}
	}}, ktesting.NewLogger(t, ktesting.NewConfig()))
	t.Cleanup(func() { cancel(); p.close() })

	var leaves []func()
	services := 2 * maxProbedPods / maxProbedPodsPerService
	for s := range services {
		svc := clusterview.ServiceRef{Namespace: "ns" + strconv.Itoa(s), Name: "web"}
		leaves = append(leaves, p.join(svc))
		var eps []clusterview.UnreadyEndpoint
		for i := range clusterview.MaxUnreadyEndpoints {
			eps = append(eps, clusterview.UnreadyEndpoint{IP: fmt.Sprintf("10.244.%d.%d", s, i), Port: 80, Pod: "p" + strconv.Itoa(i), UID: types.UID(fmt.Sprint(s, "-", i))})
		}
		p.passed(svc, eps)
		p.mu.Lock()
		per := len(p.services[svc].pods)
		p.mu.Unlock()
		if per > maxProbedPodsPerService {
			t.Fatalf("service %d: %d pods probed, bound %d", s, per, maxProbedPodsPerService)
		}
	}
	if got := p.probing(); got != maxProbedPods {
		t.Errorf("%d pods probed in all, want the bound %d", got, maxProbedPods)
	}
	// Every listed pod past a bound is counted once, however often a
	// hold looks again.
	last := clusterview.ServiceRef{Namespace: "ns" + strconv.Itoa(services-1), Name: "web"}
	for range 3 {
		p.passed(last, []clusterview.UnreadyEndpoint{{IP: "10.244.99.1", Port: 80, Pod: "late", UID: "late"}})
	}
	if want := int32(services*clusterview.MaxUnreadyEndpoints - maxProbedPods + 1); fellBack.Load() != want {
		t.Errorf("%d pods counted past the bound, want %d", fellBack.Load(), want)
	}
	for _, leave := range leaves {
		leave()
	}
	p.mu.Lock()
	left := len(p.services)
	p.mu.Unlock()
	if p.probing() != 0 || left != 0 {
		t.Errorf("after every hold left: %d pods probed, %d services kept", p.probing(), left)
	}
	// A Service nobody holds for is never probed.
	if addrs := p.passed(testSvc, []clusterview.UnreadyEndpoint{{IP: "10.244.0.1", Port: 80, Pod: "p", UID: "x"}}); addrs != nil || p.probing() != 0 {
		t.Errorf("a Service without holds: %v passed, %d probed", addrs, p.probing())
	}
}

func TestPodPlansAreBounded(t *testing.T) {
	p := newPodProber(context.Background(), clusterview.NewMemoryEndpoints(), nil, resolvertest.NewFakePods(), probeReport{}, ktesting.NewLogger(t, ktesting.NewConfig()))
	for i := range maxPodPlans + 10 {
		p.plans.Add(podAt{uid: types.UID(strconv.Itoa(i))}, planOrErr{}, podPlanTTL)
	}
	if n := len(p.plans.Keys()); n != maxPodPlans {
		t.Errorf("%d plans kept, bound %d", n, maxPodPlans)
	}
	if _, ok := p.plans.Get(podAt{uid: types.UID("0")}); ok {
		t.Error("the oldest plan was kept past the bound")
	}
}

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
	trimmed, _ := clusterview.TrimForCache(s.DeepCopy())
	ts := trimmed.(*discoveryv1.EndpointSlice)
	// A Ready endpoint keeps its pod too: past the pod view's bounds a
	// read of that pod vouches for its address (vouchByName).
	if ref := ts.Endpoints[0].TargetRef; ref == nil || ref.Name != "web-0" || ref.UID != "u0" {
		t.Errorf("the cache dropped the pod of a Ready endpoint: %+v", ref)
	}
	b, err := clusterview.ResolveBackends(pub, []*discoveryv1.EndpointSlice{ts}, "")
	if err != nil {
		t.Fatal(err)
	}
	want := []clusterview.UnreadyEndpoint{{IP: "10.244.0.2", Port: 8080, Pod: "web-2", UID: "u2"}}
	if !slices.Equal(b.Addrs, []string{"10.244.0.1:8080"}) || !slices.Equal(b.Unready, want) {
		t.Errorf("Addrs %v, Unready %+v; want [10.244.0.1:8080], %+v", b.Addrs, b.Unready, want)
	}

	many := resolvertest.Slice("team", "b", "web", map[string]int32{"http": 8080})
	for i := range clusterview.MaxUnreadyEndpoints + 5 {
		many.Endpoints = append(many.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.244.1.%d", i)},
			Conditions: discoveryv1.EndpointConditions{Ready: no},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: "team", Name: fmt.Sprint("p", i), UID: types.UID(fmt.Sprint(i))}})
	}
	trimmed, _ = clusterview.TrimForCache(many)
	if b, _ := clusterview.ResolveBackends(pub, []*discoveryv1.EndpointSlice{trimmed.(*discoveryv1.EndpointSlice)}, ""); len(b.Unready) != clusterview.MaxUnreadyEndpoints {
		t.Errorf("%d unready endpoints listed, bound %d", len(b.Unready), clusterview.MaxUnreadyEndpoints)
	}
}

func (b *blockingPods) Pod(ctx context.Context, _, _ string) (*corev1.Pod, error) {
	b.reads.Add(1)
	<-ctx.Done()
	return nil, ctx.Err()
}
