package resolver

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// holdRequests sends n requests that stay held until ctx ends, and waits
// until the resolver holds want requests in all.
func holdRequests(t *testing.T, e *testEnv, ctx context.Context, wg *sync.WaitGroup, client *http.Client, n int, want float64, edit func(*http.Request)) {
	t.Helper()
	for range n {
		req := e.request(t, ctx, "GET", "/", nil)
		if edit != nil {
			edit(req)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if resp, err := client.Do(req); err == nil {
				resp.Body.Close()
				t.Errorf("held request answered %d, want it cancelled", resp.StatusCode)
			}
		}()
	}
	eventually(t, 5*time.Second, "requests held", func() bool { return metricValue(t, e.r.metrics.Queued) == want })
}

// One client joining a wake under way cannot fill the Service's queue: at
// its share it gets 429 with Retry-After, and another client still gets
// in.
func TestOneClientCannotFillTheQueue(t *testing.T) {
	checkNoLeaks(t)
	cfg := testConfig()
	cfg.PerServiceQueue = 10
	cfg.PerSourceQueue = 3
	cfg.RetryAfter = 7 * time.Second
	e := newEnv(t, cfg)
	noisy, quiet := clientFrom(t, "127.0.0.1"), clientFrom(t, "127.0.0.2")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()

	holdRequests(t, e, ctx, &wg, noisy, 3, 3, nil)
	resp, err := noisy.Do(e.request(t, context.Background(), "GET", "/", nil))
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "7" || !strings.Contains(body, "this client") {
		t.Fatalf("past one client's share: %d Retry-After=%q %q, want 429 with Retry-After 7", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if got := metricValue(t, e.r.metrics.Overflow.WithLabelValues(ScopeClient)); got != 1 {
		t.Errorf("client overflow counter %v, want 1", got)
	}
	holdRequests(t, e, ctx, &wg, quiet, 1, 4, nil)
}

// Header bytes of held requests share one budget: a burst of
// header-heavy requests is refused at it with 503, while the queues have
// room, and a small request still fits.
func TestHeaderHeavyBurstIsRefusedAtTheByteBudget(t *testing.T) {
	checkNoLeaks(t)
	cfg := testConfig()
	cfg.MaxHeldHeaderBytes = 40 << 10
	cfg.RetryAfter = 7 * time.Second
	e := newEnv(t, cfg)
	client := newClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	heavy := func(req *http.Request) { req.Header.Set("X-Big", strings.Repeat("a", 16<<10)) }

	holdRequests(t, e, ctx, &wg, client, 2, 2, heavy)
	req := e.request(t, context.Background(), "GET", "/", nil)
	heavy(req)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "7" {
		t.Fatalf("past the byte budget: %d Retry-After=%q %q, want 503 with Retry-After 7", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if got := metricValue(t, e.r.metrics.Overflow.WithLabelValues(ScopeBytes)); got != 1 {
		t.Errorf("bytes overflow counter %v, want 1", got)
	}
	holdRequests(t, e, ctx, &wg, client, 1, 3, nil)
}
