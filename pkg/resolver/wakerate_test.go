package resolver

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/elasti-dev/elasti/pkg/resolver/internal/resolvertest"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
	"github.com/elasti-dev/elasti/pkg/wakeapi"
)

// fakeClock is a clock that moves only when told to.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func cold(i int) clusterview.ServiceRef {
	return clusterview.ServiceRef{Namespace: "team", Name: fmt.Sprintf("cold-%d", i)}
}

// With the defaults (bursts of 100, then 10 a second) a client starts 100
// wakes at once, the 101st waits for the bucket to refill, another client
// is unaffected, and requests that join a wake under way cost nothing.
func TestAdmissionLimitsTheWakesEachSourceStarts(t *testing.T) {
	a := newAdmission(queueLimits(1000, 10000), newWakeLimiter(DefaultSourceWakeRate, DefaultSourceWakeBurst, DefaultSourceWakeTracked),
		prometheus.NewGauge(prometheus.GaugeOpts{Name: "queued"}))
	clock := newFakeClock()
	a.now = clock.Now
	noisy, quiet := netip.MustParseAddr("10.244.0.7"), netip.MustParseAddr("10.244.0.8")

	for i := range 100 {
		if _, refused := a.admit(cold(i), noisy, 0); refused.scope != "" {
			t.Fatalf("wake %d of the burst refused (%q)", i+1, refused.scope)
		}
	}
	_, refused := a.admit(cold(100), noisy, 0)
	if refused.scope != ScopeSource || refused.retryAfter <= 0 || refused.retryAfter > 100*time.Millisecond {
		t.Fatalf("the 101st wake: %+v, want ScopeSource with a wait of at most 100ms (one wake at 10/s)", refused)
	}
	if a.admitted(cold(100)) != 0 {
		t.Fatal("a refused wake took a slot")
	}
	// Joining wakes under way is free, however often.
	for range 500 {
		if _, refused := a.admit(cold(3), noisy, 0); refused.scope != "" {
			t.Fatalf("a request for a Service already waking was refused (%q)", refused.scope)
		}
	}
	if _, refused := a.admit(cold(100), quiet, 0); refused.scope != "" {
		t.Fatalf("another client was refused (%q) because of the noisy one", refused.scope)
	}
	if got := a.wakes.sources(); got != 2 {
		t.Errorf("tracked sources = %v, want 2", got)
	}

	// One wake refills in 100ms; the next is refused again.
	clock.step(100 * time.Millisecond)
	if _, refused := a.admit(cold(101), noisy, 0); refused.scope != "" {
		t.Fatalf("after 100ms the refilled wake was refused (%q)", refused.scope)
	}
	if _, refused := a.admit(cold(102), noisy, 0); refused.scope != ScopeSource {
		t.Fatalf("a second wake after one refilled: %q, want %q", refused.scope, ScopeSource)
	}
}

// A Service whose held requests all left is cold again: its next request
// starts a new wake and pays for it.
func TestAWakeCostsAgainOnceNothingIsHeld(t *testing.T) {
	a := newAdmission(queueLimits(1000, 10000), newWakeLimiter(1, 2, 10),
		prometheus.NewGauge(prometheus.GaugeOpts{Name: "q"}))
	clock := newFakeClock()
	a.now = clock.Now
	client := netip.MustParseAddr("10.244.0.7")
	for i := range 2 {
		release, refused := a.admit(cold(0), client, 0)
		if refused.scope != "" {
			t.Fatalf("wake %d refused (%q)", i+1, refused.scope)
		}
		release()
	}
	if _, refused := a.admit(cold(0), client, 0); refused.scope != ScopeSource {
		t.Fatalf("a third wake of an idle Service within the burst: %q, want %q", refused.scope, ScopeSource)
	}
}

// Memory stays bounded: buckets that have refilled are forgotten, and no
// more than the cap are tracked.
func TestWakeLimiterForgetsIdleSourcesAndCapsThem(t *testing.T) {
	l := newWakeLimiter(10, 100, 3) // refills completely in 10s
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	addr := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 244, 1, byte(i)}) }

	for i := range 10 {
		if _, ok := l.take(addr(i), now); !ok {
			t.Fatalf("first wake of source %d refused", i)
		}
		if n := l.sources(); n > 3 {
			t.Fatalf("%d sources tracked, cap 3", n)
		}
	}
	if got := l.sources(); got != 3 {
		t.Errorf("tracked sources gauge = %v, want 3", got)
	}
	// Spend source 9's burst, then let 10s pass: its bucket is full again
	// and nobody needs remembering.
	for range 99 {
		l.take(addr(9), now)
	}
	if _, ok := l.take(addr(9), now); ok {
		t.Fatal("source 9 was not out of wakes")
	}
	now = now.Add(10 * time.Second)
	if _, ok := l.take(addr(1), now); !ok {
		t.Fatal("a new source was refused")
	}
	if n := l.sources(); n != 1 {
		t.Errorf("after every bucket refilled %d sources are tracked, want only the new one", n)
	}
	if _, ok := l.take(addr(9), now); !ok {
		t.Error("source 9 was still out of wakes after its bucket refilled")
	}
}

func TestSourceOf(t *testing.T) {
	for remote, want := range map[string]string{
		"10.244.0.7:51234":           "10.244.0.7",
		"[::ffff:10.244.0.7]:51234":  "10.244.0.7",
		"[fd00::7]:51234":            "fd00::7",
		"@":                          "invalid IP",
		"not-an-address-at-all:1234": "invalid IP",
	} {
		if got := sourceOf(remote).String(); got != want {
			t.Errorf("sourceOf(%q) = %s, want %s", remote, got, want)
		}
	}
}

// postsFor counts the POSTs that asked the operator to wake svc.
func (o *fakeOperator) postsFor(svc string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, b := range o.bodies {
		var req wakeapi.Request
		if json.Unmarshal([]byte(b), &req) == nil && req.Svc == svc {
			n++
		}
	}
	return n
}

// clientFrom returns an HTTP client whose connections come from the
// loopback address local.
func clientFrom(t *testing.T, local string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: time.Second}
	tr := &http.Transport{Proxy: nil, DialContext: d.DialContext, MaxIdleConnsPerHost: 256}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 15 * time.Second}
}

// Over HTTP: the 101st wake from one client within the window is answered
// 429 with Retry-After and never reaches the operator; the same client's
// request for a Service already waking is held; another client's wake
// goes ahead.
func TestTheHundredAndFirstWakeFromOneClientIs429(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	e := newEnv(t, testConfig()) // the default limit: bursts of 100, 10 a second
	clock := newFakeClock()
	e.r.admit.now = clock.Now
	noisy, quiet := clientFrom(t, "127.0.0.1"), clientFrom(t, "127.0.0.2")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	hold := func(client *http.Client, svc clusterview.ServiceRef) {
		req := e.request(t, ctx, "GET", "/", nil)
		req.Host = svc.Name + "." + svc.Namespace
		wg.Go(func() {
			if resp, err := client.Do(req); err == nil {
				resp.Body.Close()
				t.Errorf("request for %s answered %d, want it held until cancelled", svc, resp.StatusCode)
			}
		})
	}
	send := func(client *http.Client, svc clusterview.ServiceRef) *http.Response {
		req := e.request(t, context.Background(), "GET", "/", nil)
		req.Host = svc.Name + "." + svc.Namespace
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	queued := func() float64 { return metricValue(t, e.r.metrics.Queued) }

	for i := range 100 {
		hold(noisy, cold(i))
	}
	resolvertest.Eventually(t, 10*time.Second, "100 wakes held", func() bool { return queued() == 100 })

	resp := send(noisy, cold(100))
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" || !strings.Contains(body, "team/cold-100") {
		t.Fatalf("the 101st wake: %d Retry-After=%q %q; want 429, Retry-After 1 and the Service named", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if got := metricValue(t, e.r.metrics.WakeRateLimited.WithLabelValues(ProtocolHTTP)); got != 1 {
		t.Errorf("rate-limited counter = %v, want 1", got)
	}

	hold(noisy, cold(7)) // already waking: joins, costs nothing
	hold(quiet, cold(100))
	resolvertest.Eventually(t, 5*time.Second, "the join and the other client's wake held", func() bool { return queued() == 102 })
	if got := metricValue(t, e.r.metrics.WakeRateSources); got != 2 {
		t.Errorf("elasti_resolver_wake_rate_limit_sources = %v, want the 2 clients", got)
	}
	if e.r.admit.admitted(cold(7)) != 2 || e.r.admit.admitted(cold(100)) != 1 {
		t.Errorf("slots: cold-7 %d, cold-100 %d; want 2 and 1", e.r.admit.admitted(cold(7)), e.r.admit.admitted(cold(100)))
	}

	// The refused request told the operator nothing: cold-100 was asked
	// for once, by the other client's wake.
	resolvertest.Eventually(t, 5*time.Second, "the operator to hear of cold-100", func() bool { return e.op.postsFor("cold-100") > 0 })
	if n := e.op.postsFor("cold-100"); n != 1 {
		t.Errorf("%d POSTs for cold-100, want the other client's 1", n)
	}

	clock.step(100 * time.Millisecond) // one wake refills
	hold(noisy, cold(101))
	resolvertest.Eventually(t, 5*time.Second, "a wake after the refill held", func() bool { return queued() == 103 })
	resp = send(noisy, cold(102))
	if readAll(t, resp); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("a second wake after one refilled: %d, want 429", resp.StatusCode)
	}
}

// Over a resolver port a TCP client out of wakes is closed at once, not
// held.
func TestATCPClientOutOfWakesIsClosed(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	cfg := testConfig()
	cfg.SourceWakeRate, cfg.SourceWakeBurst = 0.001, 1
	pe := newPortEnv(t, cfg)
	pe.eps.SetAppProtocol(testSvc, "tcp") // no sniffing: held at once
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	req := pe.request(t, ctx, "GET", "/", nil)
	req.Host = "other.team"
	client := newClient(t)
	wg.Go(func() {
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
		}
	})
	resolvertest.Eventually(t, 5*time.Second, "the client's one wake spent", func() bool {
		return pe.r.admit.admitted(clusterview.ServiceRef{Namespace: "team", Name: "other"}) == 1
	})

	c := pe.dial(t)
	if _, err := c.Read(make([]byte, 1)); err == nil || strings.Contains(err.Error(), "timeout") {
		t.Fatalf("read from a client out of wakes: %v, want the connection closed at once", err)
	}
	if got := metricValue(t, pe.r.metrics.WakeRateLimited.WithLabelValues(ProtocolTCP)); got != 1 {
		t.Errorf("tcp rate-limited counter = %v, want 1", got)
	}
	if n := pe.r.admit.admitted(testSvc); n != 0 {
		t.Errorf("the refused connection holds %d slots", n)
	}
}
