package resolver

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/resolver/answer"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
	"github.com/elasti-dev/elasti/pkg/resolver/internal/resolvertest"
)

// holdEnv is a resolver for testSvc whose ElastiService has hold h and
// the cold starts given.
func holdEnv(t *testing.T, cfg Config, h *v1.Hold, coldStarts ...time.Duration) *testEnv {
	t.Helper()
	f, idx := clusterview.NewMemoryNamedIndex()
	es := resolvertest.ElastiService(testSvc.Namespace, "shop", testSvc.Name, 1)
	es.Spec.Hold = h
	for _, d := range coldStarts {
		es.Status.RecentColdStarts = append(es.Status.RecentColdStarts, metav1.Duration{Duration: d})
	}
	if err := idx.Add(es); err != nil {
		t.Fatal(err)
	}
	return newEnv(t, cfg, func(o *Options) { o.Holds = f })
}

// boundBody is what a JSON client past a hold bound reads.
type boundBody struct {
	Service, Reason, Message string
	RetryAfterSeconds        int
}

// A Service's own spec.hold.timeout ends its holds, shorter than the
// resolver's --request-timeout, with 503, a Retry-After of the rest of
// its median cold start, and a body that names the bound: plain text, or
// JSON for a client that asks for it. A timeout past the resolver's
// --max-hold-timeout is cut to it.
func TestAServicesOwnHoldTimeoutAnswers503WithRetryAfter(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	cfg := testConfig() // --request-timeout 10s
	cfg.MaxHoldTimeout = 400 * time.Millisecond
	// A median cold start of 5 s; the rest of it after 300 ms is 4.7 s.
	for _, c := range []struct {
		name, timeout, accept string
		want                  time.Duration
		json                  bool
	}{
		{"text", "300ms", "", 300 * time.Millisecond, false},
		{"json", "300ms", "application/json", 300 * time.Millisecond, true},
		{"json in other case, with parameters", "300ms", "text/html;q=0.9, Application/JSON; charset=utf-8", 300 * time.Millisecond, true},
		{"problem+json", "300ms", "application/problem+json", 300 * time.Millisecond, true},
		{"past the ceiling", "1h", "", 400 * time.Millisecond, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := holdEnv(t, cfg, &v1.Hold{Timeout: c.timeout}, 4*time.Second, 5*time.Second, 6*time.Second)
			req := e.request(t, context.Background(), "GET", "/", nil)
			if c.accept != "" {
				req.Header.Set("Accept", c.accept)
			}
			began := time.Now()
			resp, err := newClient(t).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			took := time.Since(began)
			body := readAll(t, resp)
			if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "5" {
				t.Fatalf("got %d Retry-After %q %q, want 503 Retry-After 5", resp.StatusCode, resp.Header.Get("Retry-After"), body)
			}
			if took < c.want || took > c.want+5*time.Second {
				t.Errorf("answered after %v, want after the hold's %v", took, c.want)
			}
			if !c.json {
				if !strings.Contains(body, "spec.hold.timeout") || !strings.Contains(body, testSvc.String()) ||
					!strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
					t.Errorf("text body %q (%s) does not name the bound and the Service", body, resp.Header.Get("Content-Type"))
				}
				return
			}
			var got boundBody
			if err := json.Unmarshal([]byte(body), &got); err != nil || resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("JSON body %q (%s): %v", body, resp.Header.Get("Content-Type"), err)
			}
			if got.Service != testSvc.String() || got.Reason != answer.BoundHoldTimeout || got.RetryAfterSeconds != 5 ||
				!strings.Contains(got.Message, "spec.hold.timeout") {
				t.Errorf("JSON body %+v", got)
			}
		})
	}
}

// Without cold starts on record, and for a timeout spec.hold does not
// set, the answers are the resolver's: Retry-After is Config.RetryAfter
// past a Service's own timeout, and past --request-timeout the answer is
// 504 as before.
func TestHoldTimeoutsWithoutHistoryOrSpec(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	cfg := testConfig()
	cfg.RequestTimeout = 300 * time.Millisecond
	cfg.RetryAfter = 7 * time.Second
	for _, c := range []struct {
		name string
		h    *v1.Hold
		code int
	}{
		{"own bound, no history", &v1.Hold{Timeout: "200ms"}, http.StatusServiceUnavailable},
		{"no spec.hold", nil, http.StatusGatewayTimeout},
		// Its own maxRequests, the flag's timeout: the flag's answer.
		{"only maxRequests set", &v1.Hold{MaxRequests: 5}, http.StatusGatewayTimeout},
		// The operator refuses it (InvalidSpec); meanwhile the flag decides.
		{"an invalid timeout", &v1.Hold{Timeout: "2 hours"}, http.StatusGatewayTimeout},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := holdEnv(t, cfg, c.h)
			resp, err := newClient(t).Do(e.request(t, context.Background(), "GET", "/", nil))
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(t, resp)
			if resp.StatusCode != c.code {
				t.Fatalf("got %d %q, want %d", resp.StatusCode, body, c.code)
			}
			if want := map[int]string{http.StatusServiceUnavailable: "7"}[c.code]; resp.Header.Get("Retry-After") != want {
				t.Errorf("Retry-After %q, want %q", resp.Header.Get("Retry-After"), want)
			}
		})
	}
}

// A Service's own spec.hold.timeout longer than --request-timeout holds
// its request past the flag's bound, until its pod is Ready.
func TestAServicesOwnHoldTimeoutOutlastsTheFlag(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	cfg := testConfig()
	cfg.RequestTimeout = 200 * time.Millisecond
	e := holdEnv(t, cfg, &v1.Hold{Timeout: "1m"})
	e.backend(t, "10.244.0.9:8080", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	client := newClient(t)
	done := make(chan string, 1)
	go func() { done <- fetch(client, e.request(t, context.Background(), "GET", "/", nil)) }()
	resolvertest.Eventually(t, 5*time.Second, "held", func() bool { return e.r.holds.Held(testSvc) == 1 })
	time.Sleep(3 * cfg.RequestTimeout) // past the flag's bound, still held
	if n := e.r.holds.Held(testSvc); n != 1 {
		t.Fatalf("held %d after %v, want 1", n, 3*cfg.RequestTimeout)
	}
	e.eps.Set(testSvc, "10.244.0.9:8080")
	if got := <-done; got != "200 ok" {
		t.Fatalf("got %q, want 200 ok", got)
	}
}

// Past a Service's own spec.hold.maxRequests the next request gets 503 at
// once, with Retry-After from the median cold start and the bound named;
// the requests held within it are all answered when the pod is Ready.
// Another Service keeps the resolver's --per-service-queue.
func TestAServicesOwnMaxRequests(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	cfg := testConfig()
	cfg.PerServiceQueue = 1
	e := holdEnv(t, cfg, &v1.Hold{MaxRequests: 3}, 20*time.Second)
	e.backend(t, "10.244.0.9:8080", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	client := newClient(t)
	done := make(chan string, 3)
	for range 3 {
		go func() { done <- fetch(client, e.request(t, context.Background(), "GET", "/", nil)) }()
	}
	resolvertest.Eventually(t, 5*time.Second, "three held", func() bool { return e.r.holds.Held(testSvc) == 3 })
	for _, accept := range []string{"", "application/json"} {
		req := e.request(t, context.Background(), "GET", "/", nil)
		req.Header.Set("Accept", accept)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(t, resp)
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "20" ||
			!strings.Contains(body, "spec.hold.maxRequests") || !strings.Contains(body, "3 requests") {
			t.Errorf("the fourth (Accept %q): %d Retry-After %q %q, want 503 naming the bound", accept, resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
		if accept != "" && !strings.Contains(body, `"reason":"`+answer.BoundHoldMaxRequests+`"`) {
			t.Errorf("JSON body %q has no reason", body)
		}
	}
	e.eps.Set(testSvc, "10.244.0.9:8080")
	for range 3 {
		if got := <-done; got != "200 ok" {
			t.Errorf("a held request got %q, want 200 ok", got)
		}
	}
}
