package resolver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/elasti-dev/elasti/pkg/resolver/internal/resolvertest"
	"github.com/elasti-dev/elasti/pkg/resolver/proberules"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
	"github.com/elasti-dev/elasti/pkg/wakeapi"
)

// The rule for every test here: connect to 127.0.0.1 only. Endpoints carry
// fake pod addresses (10.244.x.y); fakeNet maps them to loopback listeners
// and refuses everything else without dialing.

type fakeNet struct {
	mu    sync.Mutex
	m     map[string]string
	dials map[string]int
	// onDial, when set, is called with each address dialed, before the
	// dial: a test's way to change the endpoints under a connect.
	onDial func(addr string)
}

func newFakeNet() *fakeNet { return &fakeNet{m: map[string]string{}, dials: map[string]int{}} }

// route makes fake reach real, which must be a loopback address.
func (f *fakeNet) route(fake, real string) {
	host, _, err := net.SplitHostPort(real)
	if err != nil || !net.ParseIP(host).IsLoopback() {
		panic("fakeNet: refusing non-loopback target " + real)
	}
	f.mu.Lock()
	f.m[fake] = real
	f.mu.Unlock()
}

func (f *fakeNet) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if f.onDial != nil {
		f.onDial(addr)
	}
	f.mu.Lock()
	real, ok := f.m[addr]
	f.dials[addr]++
	f.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("fakeNet: connect %s: connection refused", addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, real)
}

func (f *fakeNet) dialCount(addr string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dials[addr]
}

// fakeOperator counts wake POSTs, and keeps the held reports apart.
type fakeOperator struct {
	srv   *httptest.Server
	posts atomic.Int64
	// held are the reports of held requests (wakeapi.HeldPath).
	held []wakeapi.HeldReport
	// mode: "up" answers 200, "reject" 503, "down" drops the connection.
	mode   atomic.Value
	mu     sync.Mutex
	bodies []string
	ctypes []string
	paths  []string
	onPost func(wakeapi.Request)
}

func newFakeOperator(t *testing.T) *fakeOperator {
	o := &fakeOperator{}
	o.mode.Store("up")
	o.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == wakeapi.HeldPath {
			rep, err := wakeapi.DecodeHeld(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			o.mu.Lock()
			o.held = append(o.held, rep)
			o.mu.Unlock()
			w.WriteHeader(http.StatusAccepted)
			return
		}
		body, _ := io.ReadAll(r.Body)
		o.posts.Add(1)
		o.mu.Lock()
		o.bodies = append(o.bodies, string(body))
		o.ctypes = append(o.ctypes, r.Header.Get("Content-Type"))
		o.paths = append(o.paths, r.Method+" "+r.URL.Path)
		hook := o.onPost
		o.mu.Unlock()
		switch o.mode.Load().(string) {
		case "down":
			c, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				_ = c.Close()
			}
			return
		case "reject":
			http.Error(w, "no", http.StatusServiceUnavailable)
			return
		}
		if hook != nil {
			var in wakeapi.Request
			_ = json.Unmarshal(body, &in)
			hook(in)
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(o.srv.Close)
	return o
}

// heldReports returns the held reports so far.
func (o *fakeOperator) heldReports() []wakeapi.HeldReport {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.held)
}

func (o *fakeOperator) setOnPost(f func(wakeapi.Request)) {
	o.mu.Lock()
	o.onPost = f
	o.mu.Unlock()
}

type testEnv struct {
	r     *Resolver
	srv   *httptest.Server
	eps   *clusterview.MemoryEndpoints
	net   *fakeNet
	op    *fakeOperator
	reg   *prometheus.Registry
	probe *proberules.Index
}

// testConfig has short intervals; RequestTimeout stays long unless a test
// shortens it.
func testConfig() Config {
	c := DefaultConfig()
	c.RequestTimeout = 10 * time.Second
	c.OperatorRetryInitial = 20 * time.Millisecond
	c.OperatorRetryMax = 5 * time.Second
	c.OperatorTimeout = 2 * time.Second
	c.DialTimeout = time.Second
	// Most tests hold for Services of one namespace and test another
	// bound; the namespace shares have tests of their own
	// (adversarial_shares_test.go).
	c.NamespaceShare = 100
	return c
}

func newEnv(t *testing.T, cfg Config, options ...func(*Options)) *testEnv {
	t.Helper()
	// Buffered as well as written to t, so a test can read what the
	// resolver logged (ktesting.Underlier).
	ctx := klog.NewContext(context.Background(), ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true))))
	e := &testEnv{eps: clusterview.NewMemoryEndpoints(), net: newFakeNet(), op: newFakeOperator(t), reg: prometheus.NewRegistry()}
	e.probe = proberules.NewStaticIndex(ctx)
	cfg.OperatorURL = e.op.srv.URL
	opts := Options{Endpoints: e.eps, Probes: e.probe, Registerer: e.reg, Dial: e.net.dial}
	for _, o := range options {
		o(&opts)
	}
	r, err := New(ctx, cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	e.r = r
	e.srv = httptest.NewUnstartedServer(r)
	ConfigureServer(e.srv.Config)
	e.srv.Start()
	t.Cleanup(func() {
		e.srv.CloseClientConnections()
		e.srv.Close()
		r.Close()
	})
	return e
}

// backend starts a loopback server and routes the fake pod address to it.
func (e *testEnv) backend(t *testing.T, fake string, h http.Handler) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(func() { s.CloseClientConnections(); s.Close() })
	e.net.route(fake, s.Listener.Addr().String())
	return s
}

var testSvc = clusterview.ServiceRef{Namespace: "team", Name: "web"}

const testHost = "web.team.svc.cluster.local"

func (e *testEnv) request(t *testing.T, ctx context.Context, method, path string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, e.srv.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = testHost
	return req
}

func newClient(t *testing.T) *http.Client {
	tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 256}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 15 * time.Second}
}

// readAll reads and closes resp's body; call it from the test's goroutine
// only (it stops the test on error).
func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	return string(b)
}

// readBody reads and closes resp's body. Unlike readAll it does not stop
// the test, so goroutines other than the test's may call it.
func readBody(resp *http.Response) (string, error) {
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return string(b), fmt.Errorf("reading body: %w", err)
	}
	return string(b), nil
}

// fetch sends req and returns "<status> <body>", or the error text. Safe
// outside the test's goroutine.
func fetch(client *http.Client, req *http.Request) string {
	resp, err := client.Do(req)
	if err != nil {
		return err.Error()
	}
	body, err := readBody(resp)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprint(resp.StatusCode, " ", body)
}

func metricValue(t *testing.T, c prometheus.Collector) float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 8)
	c.Collect(ch)
	close(ch)
	var sum float64
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		switch {
		case d.Gauge != nil:
			sum += d.Gauge.GetValue()
		case d.Counter != nil:
			sum += d.Counter.GetValue()
		case d.Histogram != nil:
			sum += float64(d.Histogram.GetSampleCount())
		}
	}
	return sum
}

// doInBackground sends req with client; the channel gets the client's
// error once the request ends.
func doInBackground(client *http.Client, req *http.Request) <-chan error {
	errc := make(chan error, 1)
	go func() {
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	return errc
}

// answerOnceHeld sends req with client, waits until it is the one request
// held, gives testSvc the endpoint pod and returns fetch's summary of the
// answer.
func (e *testEnv) answerOnceHeld(t *testing.T, client *http.Client, req *http.Request, pod string) string {
	t.Helper()
	done := make(chan string, 1)
	go func() { done <- fetch(client, req) }()
	resolvertest.Eventually(t, 5*time.Second, "held again", func() bool { return e.r.holds.Held(testSvc) == 1 })
	e.eps.Set(testSvc, pod)
	return <-done
}
