package resolver

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/podcheck"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview/clusterviewtest"
	"github.com/elasti-dev/elasti/pkg/resolver/internal/resolvertest"
	"github.com/elasti-dev/elasti/pkg/wakestage"
)

// wakeStatus is what an API client that asked with Prefer reads.
type wakeStatus struct {
	Service, Reason, Message string
	Stage                    wakestage.Stage
	StageSeconds             *int
	Problem                  string
	Readiness                []podcheck.AnswerCount
	ElapsedSeconds           int
	EstimateSeconds          int
	RetryAfterSeconds        int
}

// statusEnv is a resolver for testSvc, whose ElastiService records cold
// starts of 20 s, with a pod view set by hand.
func statusEnv(t *testing.T, cfg Config, options ...func(*Options)) (*testEnv, *memPodView) {
	t.Helper()
	f, idx := clusterview.NewMemoryNamedIndex()
	es := resolvertest.ElastiService(testSvc.Namespace, "shop", testSvc.Name, 1)
	es.Status.RecentColdStarts = []metav1.Duration{{Duration: 20 * time.Second}}
	if err := idx.Add(es); err != nil {
		t.Fatal(err)
	}
	view := newMemPodView()
	e := newEnv(t, cfg, append([]func(*Options){func(o *Options) { o.Holds = f; o.PodView = view }}, options...)...)
	e.eps.SetTarget(testSvc, intstr.FromString("web"))
	return e, view
}

// readyApp is a Ready pod of testSvc, its app answering "pod", for the
// view to release holds to.
func readyApp(t *testing.T, e *testEnv) *corev1.Pod {
	app := clusterviewtest.NewStartingApp(t, "127.0.0.2")
	app.Ready.Store(true)
	e.net.route(app.Addr(), app.Addr())
	pod := app.Pod("web-2", "u2")
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	return pod
}

func asksStatus(t *testing.T, e *testEnv, prefer string) *http.Request {
	req := e.request(t, context.Background(), "GET", "/v1/models", nil)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Prefer", prefer)
	return req
}

func readStatus(t *testing.T, resp *http.Response) wakeStatus {
	t.Helper()
	body := readAll(t, resp)
	var s wakeStatus
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatalf("status %d, body %q: %v", resp.StatusCode, body, err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Content-Type") != "application/json" ||
		resp.Header.Get("Cache-Control") != "no-store" || resp.Header.Get("Retry-After") == "" {
		t.Errorf("got %d %v, want 503 JSON, no-store, with Retry-After", resp.StatusCode, resp.Header)
	}
	return s
}

func unschedulablePod() *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: testSvc.Namespace, Name: "web-1", CreationTimestamp: metav1.NewTime(time.Now().Add(-7 * time.Second))}}
	p.Status.Phase = corev1.PodPending
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
		Message: "0/3 nodes are available: 3 Insufficient nvidia.com/gpu (tenant text)"}}
	return p
}

// An API client that sends Prefer: respond-async gets the wake status at
// once instead of a hold: the stage of the Service's pod as the pod view
// has it, how long it has been there, the wake's elapsed time and the
// Service's usual cold start, with Retry-After the rest of it. The ask
// woke the Service, and once a pod is Ready the same ask gets the pod.
func TestPreferRespondAsyncGetsTheWakeStatusAtOnce(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	e, view := statusEnv(t, testConfig())
	view.set(testSvc, true, unschedulablePod())
	client := newClient(t)
	began := time.Now()
	resp, err := client.Do(asksStatus(t, e, "respond-async"))
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took > 2*time.Second {
		t.Errorf("status after %v, want at once", took)
	}
	if got := resp.Header.Get("Preference-Applied"); got != "respond-async" {
		t.Errorf("Preference-Applied %q", got)
	}
	if got := resp.Header.Get("Retry-After"); got != "20" {
		t.Errorf("Retry-After %q, want 20 (the median cold start, nothing waited yet)", got)
	}
	s := readStatus(t, resp)
	if s.Service != "team/web" || s.Reason != "Waking" || s.Stage != wakestage.WaitingForNode || s.Problem != "Unschedulable" ||
		s.StageSeconds == nil || *s.StageSeconds < 6 || s.EstimateSeconds != 20 || s.RetryAfterSeconds != 20 {
		t.Errorf("status %+v", s)
	}
	if strings.Contains(s.Message, "tenant text") || strings.Contains(s.Message, "nvidia") {
		t.Errorf("the status leaks the pod's condition message: %q", s.Message)
	}
	if !strings.Contains(s.Message, "waiting for a node") {
		t.Errorf("message %q does not name the stage", s.Message)
	}
	resolvertest.Eventually(t, 5*time.Second, "the ask woke the Service", func() bool { return e.op.posts.Load() >= 1 })
	if got := e.r.holds.Held(testSvc); got != 0 {
		t.Errorf("%d held after the status, want 0", got)
	}
	if got := metricValue(t, e.r.metrics.Answer.WakeStatuses); got != 1 {
		t.Errorf("wake statuses %v, want 1", got)
	}
	view.set(testSvc, true, readyApp(t, e))
	if got := fetch(client, asksStatus(t, e, "respond-async")); got != "200 pod" {
		t.Errorf("once a pod is Ready: %q, want the pod's answer", got)
	}
}

// Prefer: wait=N holds the request N seconds, then answers the status;
// the elapsed time counts from the first ask of the wake. A pod that is
// Ready within the wait is the answer.
func TestPreferWaitHoldsThenAnswersTheStatus(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	e, view := statusEnv(t, testConfig())
	starting := unschedulablePod()
	starting.Spec.NodeName = "node-1"
	starting.Status.Phase = corev1.PodRunning
	starting.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
	starting.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app",
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Now().Add(-3 * time.Second))}}}}
	view.set(testSvc, true, starting)
	client := newClient(t)
	began := time.Now()
	resp, err := client.Do(asksStatus(t, e, `WAIT="1"`))
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took < time.Second || took > 4*time.Second {
		t.Errorf("status after %v, want after the preferred 1 s", took)
	}
	if got := resp.Header.Get("Preference-Applied"); got != "wait=1" {
		t.Errorf("Preference-Applied %q, want wait=1", got)
	}
	s := readStatus(t, resp)
	if s.Stage != wakestage.Starting || s.ElapsedSeconds != 1 || s.RetryAfterSeconds != 19 {
		t.Errorf("status %+v, want Starting after 1 s of 20", s)
	}
	done := make(chan string, 1)
	go func() { done <- fetch(client, asksStatus(t, e, "wait=5")) }()
	resolvertest.Eventually(t, 5*time.Second, "held", func() bool { return e.r.holds.Held(testSvc) == 1 })
	view.set(testSvc, true, readyApp(t, e))
	if got := <-done; got != "200 pod" {
		t.Errorf("a pod Ready within the wait: %q, want the pod's answer", got)
	}
}

// The status and the waiting page say what the starting pod answered
// the resolver's direct checks so far: here its 503s.
func TestTheWakeShowsTheReadinessAnswersSoFar(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	app := clusterviewtest.NewStartingApp(t, "127.0.0.2")
	pod := app.Pod("web-1", "u1")
	pod.Namespace = testSvc.Namespace
	pods := resolvertest.NewFakePods(pod)
	cfg := pageConfig(0)
	cfg.ProbePods = true
	e, _ := statusEnv(t, cfg, func(o *Options) { o.Pods = pods })
	e.net.route(app.Addr(), app.Addr())
	e.eps.SetUnready(testSvc, app.Endpoint("web-1", "u1"))
	client := newClient(t)
	// The first ask starts the direct checks; a later one reads them.
	_ = fetch(client, asksStatus(t, e, "respond-async"))
	var s wakeStatus
	resolvertest.Eventually(t, 5*time.Second, "a status with the pod's 503s", func() bool {
		resp, err := client.Do(asksStatus(t, e, "respond-async"))
		if err != nil {
			return false
		}
		s = readStatus(t, resp)
		return len(s.Readiness) == 1 && s.Readiness[0].Answer == "HTTP 503" && s.Readiness[0].Count > 0
	})
	if s.Stage != wakestage.Starting || !strings.Contains(s.Message, "its readiness check answered HTTP 503 ×") {
		t.Errorf("status %+v", s)
	}
	resp, err := client.Do(navigation(t, e, "GET"))
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); !strings.Contains(body, "its readiness check answered HTTP 503 ×") || !strings.Contains(body, "usually takes about 20 s") {
		t.Errorf("the page does not show the answers and the estimate:\n%s", body)
	}
	app.Ready.Store(true)
	resolvertest.Eventually(t, 5*time.Second, "the pod's answer once it passes", func() bool {
		return fetch(client, asksStatus(t, e, "respond-async")) == "200 pod"
	})
}

// Only a Prefer the RFC's grammar gives asks; everything else is held as
// before. A Service whose page is off still answers the status: the
// client asked for it.
func TestPreferVariants(t *testing.T) {
	for _, c := range []struct {
		prefer  []string
		ok      bool
		after   time.Duration
		applied string
	}{
		{[]string{"respond-async"}, true, 0, "respond-async"},
		{[]string{"Respond-Async"}, true, 0, "respond-async"},
		{[]string{"return=minimal, respond-async; foo=bar"}, true, 0, "respond-async"},
		{[]string{"wait=10"}, true, 10 * time.Second, "wait=10"},
		{[]string{"respond-async, wait=0"}, true, 0, "respond-async, wait=0"},
		{[]string{"wait=3", "respond-async"}, true, 3 * time.Second, "respond-async, wait=3"},
		{[]string{"wait=3, wait=9"}, true, 3 * time.Second, "wait=3"},
		{[]string{`wait="7"`}, true, 7 * time.Second, "wait=7"},
		{[]string{"wait=3600"}, true, time.Hour, "wait=3600"},
		{[]string{"wait=3601"}, false, 0, ""},
		{[]string{"wait=3601, respond-async"}, true, 0, "respond-async"},
		{[]string{"wait=-1"}, false, 0, ""},
		{[]string{"wait=+5"}, false, 0, ""},
		{[]string{"wait=1.5"}, false, 0, ""},
		{[]string{"wait=99999999999999999999"}, false, 0, ""},
		{[]string{"wait"}, false, 0, ""},
		{[]string{"respond-asynchronously"}, false, 0, ""},
		{[]string{"return=representation"}, false, 0, ""},
		{nil, false, 0, ""},
	} {
		req, _ := http.NewRequest("GET", "http://web.team/", nil)
		for _, v := range c.prefer {
			req.Header.Add("Prefer", v)
		}
		e := (&Resolver{cfg: Config{WaitingPage: false}, pages: pageSwitch{&v1.WaitingPage{Enabled: false}}}).earlyAnswerFor(req, testSvc)
		if e.status != c.ok || e.after != c.after || e.applied != c.applied || e.page {
			t.Errorf("Prefer %q: %+v, want status %v after %v applied %q", c.prefer, e, c.ok, c.after, c.applied)
		}
	}
}
