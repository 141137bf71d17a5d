package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/klog/v2/ktesting"

	"github.com/elasti-dev/elasti/pkg/command"
	"github.com/elasti-dev/elasti/pkg/resolver"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
)

func TestProxyServerLimits(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	r, err := resolver.New(ctx, resolver.Config{}, resolver.Options{Endpoints: clusterview.NewMemoryEndpoints()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	srv := r.NewServer(":8012")
	if srv.HTTP2 == nil || srv.HTTP2.MaxConcurrentStreams < 1 || srv.HTTP2.MaxConcurrentStreams > 250 || srv.HTTP2.MaxReadFrameSize != 16<<10 {
		t.Errorf("HTTP/2 bounds %+v; want streams capped and 16 KiB frames", srv.HTTP2)
	}
	if srv.MaxHeaderBytes != 64<<10 || srv.IdleTimeout != 2*time.Minute || srv.ReadHeaderTimeout == 0 {
		t.Errorf("MaxHeaderBytes %d, IdleTimeout %v, ReadHeaderTimeout %v; want 64 KiB, 2m, set",
			srv.MaxHeaderBytes, srv.IdleTimeout, srv.ReadHeaderTimeout)
	}
	if srv.Protocols == nil || !srv.Protocols.UnencryptedHTTP2() {
		t.Error("proxy server does not speak h2c")
	}
}

// The internal and routes servers bound headers too: an oversized request
// is refused with 431 before the handler runs.
func TestInternalServerLimits(t *testing.T) {
	var reached atomic.Int32
	url := serve(t, command.Server("", http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached.Add(1) }), command.WriteTimeout))
	req, err := http.NewRequest("GET", url+"/readyz", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Big", strings.Repeat("a", 2*command.MaxHeaderBytes))
	if got := get(http.DefaultClient, req); !strings.HasPrefix(got, "431 ") || reached.Load() != 0 {
		t.Errorf("a %d-byte header: %q, handler reached %d times; want 431 and never", 2*command.MaxHeaderBytes, got, reached.Load())
	}
}

func TestShutdownGraceFlag(t *testing.T) {
	o, err := parse(t, nil)
	if err != nil || o.shutdownGrace != 5*time.Second {
		t.Errorf("default shutdown grace %v, %v; want 5s", o.shutdownGrace, err)
	}
	o, err = parse(t, nil, "--shutdown-grace=1s")
	if err != nil || o.shutdownGrace != time.Second {
		t.Errorf("--shutdown-grace=1s: %v, %v", o.shutdownGrace, err)
	}
	if _, err := parse(t, nil, "--shutdown-grace=-1s"); err == nil {
		t.Error("negative --shutdown-grace accepted")
	}
}

// serve starts srv on a loopback listener and returns its base URL.
func serve(t *testing.T, srv *http.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

func get(client *http.Client, req *http.Request) string {
	resp, err := client.Do(req)
	if err != nil {
		return "error: " + err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "error: " + err.Error()
	}
	if after := resp.Header.Get("Retry-After"); after != "" {
		return fmt.Sprint(resp.StatusCode, " ", string(b), " [Retry-After: ", after, "]")
	}
	return fmt.Sprint(resp.StatusCode, " ", string(b))
}

// TestDrainOrder: /readyz fails first, held requests keep waiting through
// the grace and the servers' shutdown, then get their 503 over a live
// connection, then the servers stop.
func TestDrainOrder(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	operator := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	defer operator.Close()
	r, err := resolver.New(ctx, resolver.Config{OperatorURL: operator.URL}, resolver.Options{Endpoints: clusterview.NewMemoryEndpoints()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()

	var draining atomic.Bool
	internal := http.NewServeMux()
	internal.HandleFunc("/readyz", readyzUnlessDraining(&draining, r.Readyz()))
	proxy := r.NewServer("")
	internalSrv := &http.Server{Handler: internal, ReadHeaderTimeout: 10 * time.Second}
	proxyURL, internalURL := serve(t, proxy), serve(t, internalSrv)
	client := &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 10 * time.Second}
	readyz := func() string {
		req, _ := http.NewRequest("GET", internalURL+"/readyz", nil)
		return get(client, req)
	}
	if got := readyz(); !strings.HasPrefix(got, "200 ") {
		t.Fatalf("readyz before shutdown: %q", got)
	}

	// The reply carries when it came, so the test asserts the order of
	// events, not how fast a loaded machine runs them.
	type reply struct {
		text string
		at   time.Time
	}
	held := make(chan reply, 1)
	req, _ := http.NewRequest("POST", proxyURL+"/", strings.NewReader("body"))
	req.Host = "web.team"
	go func() { got := get(client, req); held <- reply{got, time.Now()} }()
	deadline := time.Now().Add(5 * time.Second)
	for testutil.ToFloat64(r.Metrics().Hold.Queued) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("request was not held")
		}
		time.Sleep(5 * time.Millisecond)
	}

	const grace = 300 * time.Millisecond
	var closedAt atomic.Int64
	closeResolver := func() { closedAt.Store(time.Now().UnixNano()); r.Close() }
	start := time.Now()
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		drain(ktesting.NewLogger(t, ktesting.DefaultConfig), &draining, grace, closeResolver, 5*time.Second, proxy, internalSrv)
	}()

	// Not ready from the start of the drain on.
	time.Sleep(grace / 3)
	if got := readyz(); !strings.HasPrefix(got, "503 ") {
		t.Errorf("readyz while draining: %q, want 503", got)
	}

	// Held through the grace, then a 503 reply with a Retry-After, not a
	// reset, then the servers stop.
	select {
	case got := <-held:
		if !strings.HasPrefix(got.text, "503 ") || !strings.Contains(got.text, "shutting down") || !strings.HasSuffix(got.text, "[Retry-After: 1]") {
			t.Errorf("held request got %q, want a 503 saying the resolver shuts down, with Retry-After: 1", got.text)
		}
		if after := got.at.Sub(start); after < grace {
			t.Errorf("held request answered %v after the drain began, within the %v grace", after, grace)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("held request not answered")
	}
	select {
	case <-drained:
	case <-time.After(5 * time.Second):
		t.Fatal("drain did not return")
	}
	if at := time.Unix(0, closedAt.Load()); at.Sub(start) < grace {
		t.Errorf("resolver closed %v after drain began, before the %v grace", at.Sub(start), grace)
	}
	if _, err := client.Get(proxyURL + "/"); err == nil {
		t.Error("proxy server still accepts after drain")
	}
}

// TestDrainKeepsHoldingUntilTheTargetServes: a request held when the drain
// begins (a rollout replacing this resolver pod) whose target gets a ready
// pod after the grace, more than half the drain's timeout later (the
// soak's wake under load, 3 December 2026), is forwarded to it, not
// answered 503: the requests still held are answered drainAnswer before
// the timeout ends, no sooner.
func TestDrainKeepsHoldingUntilTheTargetServes(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	operator := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	defer operator.Close()
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "from the target")
	}))
	defer target.Close()
	eps := clusterview.NewMemoryEndpoints()
	r, err := resolver.New(ctx, resolver.Config{OperatorURL: operator.URL}, resolver.Options{Endpoints: eps})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	proxy := r.NewServer("")
	proxyURL := serve(t, proxy)
	client := &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 20 * time.Second}

	held := make(chan string, 1)
	req, _ := http.NewRequest("GET", proxyURL+"/", nil)
	req.Host = "web.team"
	go func() { held <- get(client, req) }()
	for deadline := time.Now().Add(5 * time.Second); testutil.ToFloat64(r.Metrics().Hold.Queued) != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("request was not held")
		}
	}

	const grace, timeout = 100 * time.Millisecond, 10 * time.Second
	var closed atomic.Bool
	drained := make(chan struct{})
	var draining atomic.Bool
	go func() {
		defer close(drained)
		drain(ktesting.NewLogger(t, ktesting.DefaultConfig), &draining, grace, func() { closed.Store(true); r.Close() }, timeout, proxy)
	}()
	// The grace is over once the proxy no longer accepts connections.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := net.DialTimeout("tcp", strings.TrimPrefix(proxyURL, "http://"), time.Second); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the proxy still accepts connections long after the grace")
		}
	}
	// The target's pod is Ready past half the timeout (5 s), 2 s before
	// the drain answers (8 s): room for a loaded machine's lag.
	time.Sleep(timeout/2 + time.Second)
	if closed.Load() {
		t.Fatal("held requests were answered before the drain's last drainAnswer")
	}
	eps.Set(clusterview.ServiceRef{Namespace: "team", Name: "web"}, strings.TrimPrefix(target.URL, "http://"))
	select {
	case got := <-held:
		if got != "200 from the target" {
			t.Errorf("held request got %q, want the target's answer", got)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("held request not answered")
	}
	select {
	case <-drained:
	case <-time.After(15 * time.Second):
		t.Fatal("drain did not return once nothing was held")
	}
}
