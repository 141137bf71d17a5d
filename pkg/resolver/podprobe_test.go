package resolver

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/elasti-dev/elasti/pkg/resolver/clusterview/clusterviewtest"
	"github.com/elasti-dev/elasti/pkg/resolver/directprobe"
	"github.com/elasti-dev/elasti/pkg/resolver/hold"
	"github.com/elasti-dev/elasti/pkg/resolver/internal/resolvertest"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elasti-dev/elasti/pkg/podcheck"
)

// probeEnv is a test resolver with direct probing on, and an app whose
// pod testSvc's slices list not ready.
func probeEnv(t *testing.T, probe bool, pods *resolvertest.FakePods) *testEnv {
	cfg := testConfig()
	cfg.ProbePods = probe
	return newEnv(t, cfg, func(o *Options) { o.Pods = pods })
}

func releasedBy(t *testing.T, e *testEnv, by string) float64 {
	return metricValue(t, e.r.metrics.Hold.HeldReleases.WithLabelValues(by))
}

// The check: a held request on a Service whose slice lists the
// pod not ready is forwarded once the pod's own readiness check passes,
// not while it answers 503, and without waiting for the slice's Ready.
func TestHeldRequestForwardedOnDirectCheck(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	app := clusterviewtest.NewStartingApp(t, "127.0.0.2")
	pods := resolvertest.NewFakePods(app.Pod("web-1", "u1"))
	e := probeEnv(t, true, pods)
	e.net.route(app.Addr(), app.Addr())
	e.eps.SetUnready(testSvc, app.Endpoint("web-1", "u1"))

	done := fetchAsync(t, e)
	resolvertest.Eventually(t, 5*time.Second, "the readiness path checked a few times", func() bool { return app.Checks.Load() >= 4 })
	notAnsweredYet(t, done, "while the pod's readiness answered 503")
	readyAt := time.Now()
	app.Ready.Store(true)
	wantAnswer(t, done, "200 pod", 5*time.Second, "the held request was not forwarded after the pod's readiness check passed; the slice never said Ready")
	// The cadence is 25 ms; a second allows a loaded machine.
	if waited := time.Since(readyAt); waited > time.Second {
		t.Errorf("forwarded %v after the pod's readiness passed", waited)
	}
	if n := app.EarlyHits.Load(); n != 0 {
		t.Errorf("the app got %d requests while its readiness answered 503", n)
	}
	if got := releasedBy(t, e, hold.ReleasedByDirectProbe); got != 1 {
		t.Errorf("releases by direct probe = %v, want 1", got)
	}
	if n := pods.ReadsOf("team", "web-1"); n != 1 {
		t.Errorf("the pod was read %d times, want once", n)
	}
	// The slice lists the pod Ready later: the lead is measured once.
	e.eps.SetUnready(testSvc)
	e.eps.Set(testSvc, app.Addr())
	resolvertest.Eventually(t, 2*time.Second, "the lead measured", func() bool { return metricValue(t, e.r.metrics.DirectProbe.DirectProbeLead) == 1 })
	e.eps.Set(testSvc)
	e.eps.SetUnready(testSvc, app.Endpoint("web-1", "u1"))

	// Once nothing is held, nothing is probed.
	resolvertest.Eventually(t, 2*time.Second, "probing to stop", func() bool { return e.r.holds.Direct().Probing() == 0 })
	before := app.Checks.Load()
	time.Sleep(100 * time.Millisecond)
	if after := app.Checks.Load(); after != before {
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
func heldWhile(t *testing.T, e *testEnv, app *clusterviewtest.StartingApp, d time.Duration) {
	t.Helper()
	done := fetchAsync(t, e)
	resolvertest.Eventually(t, 5*time.Second, "held", func() bool { return e.r.holds.Held(testSvc) == 1 })
	time.Sleep(d)
	notAnsweredYet(t, done, "before the slice said Ready")
	e.eps.Set(testSvc, app.Addr())
	if got := <-done; got != "200 pod" {
		t.Fatalf("answer = %q, want 200 pod", got)
	}
	if got := releasedBy(t, e, hold.ReleasedByEndpointReady); got != 1 {
		t.Errorf("releases by the slice's Ready = %v, want 1", got)
	}
}

func TestProbePodsOffWaitsForReady(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	app := clusterviewtest.NewStartingApp(t, "127.0.0.2")
	app.Ready.Store(true)
	pods := resolvertest.NewFakePods(app.Pod("web-1", "u1"))
	e := probeEnv(t, false, pods)
	e.net.route(app.Addr(), app.Addr())
	e.eps.SetUnready(testSvc, app.Endpoint("web-1", "u1"))
	heldWhile(t, e, app, 300*time.Millisecond)
	if app.Checks.Load() != 0 || pods.ReadsOf("team", "web-1") != 0 {
		t.Errorf("with --probe-pods=false the pod was read %d times and checked %d", pods.ReadsOf("team", "web-1"), app.Checks.Load())
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
		{"pod unreadable", nil, directprobe.FallbackPodUnreadable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resolvertest.CheckNoLeaks(t)
			app := clusterviewtest.NewStartingApp(t, "127.0.0.2")
			app.Ready.Store(true)
			pods := resolvertest.NewFakePods()
			if tc.change != nil {
				pod := app.Pod("web-1", "u1")
				tc.change(pod)
				pods = resolvertest.NewFakePods(pod)
			}
			e := probeEnv(t, true, pods)
			e.net.route(app.Addr(), app.Addr())
			e.eps.SetUnready(testSvc, app.Endpoint("web-1", "u1"))
			heldWhile(t, e, app, 300*time.Millisecond)
			if n := app.Checks.Load(); n != 0 {
				t.Errorf("the app was checked %d times", n)
			}
			if got := metricValue(t, e.r.metrics.DirectProbe.DirectProbeFallbacks.WithLabelValues(tc.reason)); got != 1 {
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
	app := clusterviewtest.NewStartingApp(t, "127.0.0.2")
	app.Ready.Store(true)
	pod := app.Pod("web-1", "u1")
	pod.Spec.Containers[0].ReadinessProbe.InitialDelaySeconds = 2
	pods := resolvertest.NewFakePods(pod)
	e := probeEnv(t, true, pods)
	e.net.route(app.Addr(), app.Addr())
	e.eps.SetUnready(testSvc, app.Endpoint("web-1", "u1"))

	done := fetchAsync(t, e)
	resolvertest.Eventually(t, 5*time.Second, "the pod read again", func() bool { return pods.ReadsOf("team", "web-1") >= 3 })
	notAnsweredYet(t, done, "before the pod showed its container running")
	if n := app.Checks.Load(); n != 0 {
		t.Fatalf("the pod was checked %d times before it showed its container running", n)
	}

	running := pod.DeepCopy()
	running.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", State: corev1.ContainerState{
		Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))}}}}
	pods.Set(running)
	wantAnswer(t, done, "200 pod", 10*time.Second, "the held request was not forwarded once the container ran past its initialDelaySeconds")
	if got := releasedBy(t, e, hold.ReleasedByDirectProbe); got != 1 {
		t.Errorf("releases by direct probe = %v, want 1", got)
	}
	for _, reason := range directprobe.FallbackReasons {
		if got := metricValue(t, e.r.metrics.DirectProbe.DirectProbeFallbacks.WithLabelValues(reason)); got != 0 {
			t.Errorf("fallbacks for %s = %v, want 0", reason, got)
		}
	}
}

// A pod the slices no longer list not ready (Ready now, or gone) is no
// longer probed.
func TestDirectProbeStopsWhenTheSliceMovesOn(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	app := clusterviewtest.NewStartingApp(t, "127.0.0.2")
	pods := resolvertest.NewFakePods(app.Pod("web-1", "u1"))
	e := probeEnv(t, true, pods)
	e.eps.SetUnready(testSvc, app.Endpoint("web-1", "u1"))
	client := newClient(t)
	req := e.request(t, context.Background(), http.MethodGet, "/", nil)
	done := make(chan string, 1)
	go func() { done <- fetch(client, req) }()
	resolvertest.Eventually(t, 5*time.Second, "the pod checked", func() bool { return app.Checks.Load() >= 2 })
	e.eps.SetUnready(testSvc) // the pod went away
	resolvertest.Eventually(t, 2*time.Second, "probing to stop", func() bool { return e.r.holds.Direct().Probing() == 0 })
	before := app.Checks.Load()
	time.Sleep(100 * time.Millisecond)
	if after := app.Checks.Load(); after > before+1 {
		t.Errorf("the pod was checked %d more times after the slice dropped it", after-before)
	}
	if e.r.holds.Held(testSvc) != 1 {
		t.Error("the request is no longer held")
	}
	e.srv.CloseClientConnections()
	<-done
}
