package resolver

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/elasti-dev/elasti/pkg/resolver/admission"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
	"github.com/elasti-dev/elasti/pkg/resolver/internal/resolvertest"
)

var otherSvc = clusterview.ServiceRef{Namespace: "other", Name: "api"}

const otherHost = "api.other.svc.cluster.local"

func forOther(req *http.Request) { req.Host = otherHost }

// expectRefused sends req and wants 503 with Retry-After for scope.
func expectRefused(t *testing.T, e *testEnv, client *http.Client, req *http.Request, scope string, before float64) {
	t.Helper()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("past the namespace's share: %d Retry-After=%q %q, want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if got := metricValue(t, e.r.metrics.Admission.Overflow.WithLabelValues(scope)); got != before+1 {
		t.Errorf("%s overflow counter %v, want %v", scope, got, before+1)
	}
}

// One namespace holds its share of the global queue, not one request
// more, while another namespace's request is still held: eight pods of
// one namespace cannot fill the queue for everyone.
func TestAdversarialNamespaceFillingItsQueueShareLeavesAnotherAdmitted(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	cfg := testConfig()
	cfg.GlobalQueue = 8
	cfg.NamespaceShare = 50 // 4 places for one namespace
	e := newEnv(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	// From two addresses, so no per-source share is what refuses.
	holdRequests(t, e, ctx, &wg, clientFrom(t, "127.0.0.1"), 2, 2, nil)
	holdRequests(t, e, ctx, &wg, clientFrom(t, "127.0.0.2"), 2, 4, nil)
	expectRefused(t, e, clientFrom(t, "127.0.0.3"), e.request(t, context.Background(), "GET", "/", nil), admission.ScopeNamespace, 0)
	if got := e.r.admit.Admitted(testSvc); got != 4 {
		t.Fatalf("%d held for %s, want its share of 4", got, testSvc)
	}
	holdRequests(t, e, ctx, &wg, clientFrom(t, "127.0.0.3"), 1, 5, forOther)
}

// The same for the held-bytes budget: header-heavy requests of one
// namespace are refused at its share, and another namespace's request
// with the same headers is held.
func TestAdversarialNamespaceFillingItsHeldBytesShareLeavesAnotherAdmitted(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	cfg := testConfig()
	cfg.MaxHeldBytes = 80 << 10
	cfg.NamespaceShare = 50 // 40 KiB for one namespace: one request of 30 KiB
	e := newEnv(t, cfg)
	client := newClient(t)
	big := func(req *http.Request) { req.Header.Set("X-Fill", strings.Repeat("f", 30<<10)) }
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	holdRequests(t, e, ctx, &wg, client, 1, 1, big)
	req := e.request(t, context.Background(), "GET", "/", nil)
	big(req)
	expectRefused(t, e, client, req, admission.ScopeNamespace, 0)
	holdRequests(t, e, ctx, &wg, client, 1, 2, func(req *http.Request) { big(req); forOther(req) })
}

// And for the request budget: requests of one namespace forwarded to a
// pod that stalls take its share and no more; another namespace's request
// still reaches its pod.
func TestAdversarialNamespaceFillingItsRequestShareLeavesAnotherAdmitted(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	const fits = 2
	cfg := testConfig()
	cfg.NamespaceShare = 50
	cfg.MaxRequestBytes = 2 * fits * (fillCharge + 1<<10)
	e := newEnv(t, cfg)
	team := stallingPod(t, e, testSvc, "10.0.0.1:80")
	other := stallingPod(t, e, otherSvc, "10.0.0.2:80")
	addr := serveProxy(t, e.r)
	client := h2cClient(t, "127.0.0.1")
	send := func(ctx context.Context, host string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("X-Fill", fillHeader)
		return client.Do(req)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	stall := func(host string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if resp, err := send(ctx, host); err == nil {
				resp.Body.Close()
				t.Errorf("a stalled request for %s was answered %d", host, resp.StatusCode)
			}
		}()
	}
	for range fits {
		stall(testHost)
	}
	resolvertest.Eventually(t, 5*time.Second, "the namespace's share at its pod", func() bool { return team.Load() == fits })
	resp, err := send(context.Background(), testHost)
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusServiceUnavailable || team.Load() != fits {
		t.Fatalf("one past the namespace's share: %d %q, %d at the pod; want 503 and %d", resp.StatusCode, body, team.Load(), fits)
	}
	if got := metricValue(t, e.r.metrics.Admission.Overflow.WithLabelValues(admission.ScopeNamespace)); got != 1 {
		t.Errorf("namespace overflow counter %v, want 1", got)
	}
	stall(otherHost)
	resolvertest.Eventually(t, 5*time.Second, "another namespace's request at its pod", func() bool { return other.Load() == 1 })
}

// Requests held while the request budget is full are all forwarded when
// their Service wakes, not refused for the pod connection they then take:
// they waited their turn within the held queue.
func TestAdversarialHeldRequestsGoOnWhenTheBudgetIsFull(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	const held = 3
	cfg := testConfig()
	cfg.MaxRequestBytes = held * (requestOverheadBytes + 32<<10 + 1<<10)
	e := newEnv(t, cfg)
	client := newClient(t)
	answers := make(chan string, held)
	for range held {
		req := e.request(t, context.Background(), "GET", "/", nil)
		req.Header.Set("X-Fill", fillHeader)
		go func() { answers <- fetch(client, req) }()
	}
	resolvertest.Eventually(t, 5*time.Second, "requests held", func() bool { return metricValue(t, e.r.metrics.Hold.Queued) == held })
	req := e.request(t, context.Background(), "GET", "/", nil)
	req.Header.Set("X-Fill", fillHeader)
	if got := fetch(client, req); !strings.HasPrefix(got, "503 ") {
		t.Fatalf("one past the budget: %q, want 503", got)
	}
	e.backend(t, "10.0.0.1:80", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("pod")) }))
	e.eps.Set(testSvc, "10.0.0.1:80")
	for range held {
		if got := <-answers; got != "200 pod" {
			t.Fatalf("a held request after the wake: %q, want the pod's answer", got)
		}
	}
}
