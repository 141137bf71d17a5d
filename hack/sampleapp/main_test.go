package main

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/elasti-dev/elasti/hack/sampleapp/answer"
)

// clock is a settable time for the app.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newApp(t *testing.T, args ...string) (*app, *clock) {
	t.Helper()
	cfg, err := parseConfig(args, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{t: time.Unix(1000, 0)}
	return &app{cfg: cfg, name: "pod", now: c.now, listening: c.t}, c
}

func do(a *app, path string) *httptest.ResponseRecorder { return doAs(a, path, "") }

// doAs is do with a User-Agent, as a readiness checker sends it.
func doAs(a *app, path, userAgent string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodGet, path, nil)
	r.Header.Set("User-Agent", userAgent)
	a.ServeHTTP(w, r)
	return w
}

// The readiness path answers 503 for the window after listening and 200
// from its end; every other path answers 200 throughout.
func TestReadinessWindow(t *testing.T) {
	a, c := newApp(t, "-not-ready-for", "500ms", "-ready-path", "/healthz")
	for _, step := range []struct {
		at   time.Duration
		path string
		want int
	}{
		{0, "/healthz", 503},
		{100 * time.Millisecond, "/", 200},
		{499 * time.Millisecond, "/healthz", 503},
		{500 * time.Millisecond, "/healthz", 200},
		{time.Second, "/healthz", 200},
		{time.Second, "/ready", 200}, // not the readiness path: an ordinary request
	} {
		c.t = a.listening.Add(step.at)
		if got := do(a, step.path).Code; got != step.want {
			t.Errorf("GET %s at +%s: %d, want %d", step.path, step.at, got, step.want)
		}
	}
}

// A request other than a readiness check or a scrape that arrives before
// the first readiness 200 is counted and reported in the headers and the
// body; one after it is not; the first 200's instant is reported.
func TestEarlyRequestsAndFirstReady(t *testing.T) {
	a, c := newApp(t, "-not-ready-for", "1s")
	early := func(w *httptest.ResponseRecorder) string { return w.Header().Get(HeaderEarly) }
	if w := do(a, "/metrics"); early(w) != "0" {
		t.Errorf("a scrape counted as an early request: %s", early(w))
	}
	if w := do(a, "/ready"); w.Code != 503 || early(w) != "0" || w.Header().Get(HeaderFirstReady) != "0" {
		t.Errorf("a failing readiness check: %d, early %s, first ready %s", w.Code, early(w), w.Header().Get(HeaderFirstReady))
	}
	c.t = c.t.Add(200 * time.Millisecond)
	w := do(a, "/orders")
	var r answer.Reply
	if err := json.Unmarshal(w.Body.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if early(w) != "1" || r.Early != 1 || r.FirstReady != 0 || r.Arrived != c.t.UnixMicro() || r.Path != "/orders" {
		t.Errorf("a request before readiness: header %s, body %+v", early(w), r)
	}
	c.t = a.listening.Add(1500 * time.Millisecond)
	readyAt := c.t
	if w := doAs(a, "/ready", "kube-probe/1.36"); w.Code != 200 || w.Header().Get(HeaderFirstReady) != strconv.FormatInt(readyAt.UnixMicro(), 10) {
		t.Errorf("the first readiness 200: %d, first ready %s, want %d", w.Code, w.Header().Get(HeaderFirstReady), readyAt.UnixMicro())
	}
	c.t = c.t.Add(time.Second)
	doAs(a, "/ready", "kube-probe/elasti") // a later 200 does not move the first, nor say whose it was
	w = do(a, "/after")
	if err := json.Unmarshal(w.Body.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if r.Early != 1 || r.FirstReady != readyAt.UnixMicro() || r.FirstReadyBy != answer.CheckedByKubelet || r.Arrived-r.FirstReady != time.Second.Microseconds() {
		t.Errorf("a request after readiness: %+v", r)
	}
	if m := do(a, "/metrics").Body.String(); !strings.Contains(m, "http_requests_total 2\n") {
		t.Errorf("metrics count the two ordinary requests only:\n%s", m)
	}
}

func TestParseConfig(t *testing.T) {
	env := map[string]string{"LISTEN_DELAY": "300ms", "NOT_READY_FOR": "2s", "PORT": "9000"}
	cfg, err := parseConfig(nil, func(k string) string { return env[k] })
	if err != nil || cfg.listenDelay != 300*time.Millisecond || cfg.notReadyFor != 2*time.Second || cfg.port != "9000" || cfg.readyPath != "/ready" {
		t.Errorf("from the environment: %+v, %v", cfg, err)
	}
	cfg, err = parseConfig([]string{"-listen-delay", "1s"}, func(k string) string { return env[k] })
	if err != nil || cfg.listenDelay != time.Second {
		t.Errorf("a flag wins over the environment: %+v, %v", cfg, err)
	}
	for _, bad := range [][]string{
		{"-listen-delay", "-1s"}, {"-listen-delay", "10m1s"}, {"-not-ready-for", "soon"}, {"-ready-path", "ready"}, {"-ready-path", ""},
	} {
		if _, err := parseConfig(bad, func(string) string { return "" }); err == nil {
			t.Errorf("%v: accepted", bad)
		}
	}
	if _, err := parseConfig([]string{"-listen-delay", "10m"}, func(string) string { return "" }); err != nil {
		t.Errorf("the bound itself is refused: %v", err)
	}
}

func TestGetTimeoutOf(t *testing.T) {
	for v, want := range map[string]time.Duration{"": getTimeout, "10m": 10 * time.Minute, "15m": maxGetTimeout, "1s": time.Second} {
		if got, err := getTimeoutOf(v); err != nil || got != want {
			t.Errorf("GET_TIMEOUT %q: %v, %v; want %v", v, got, err, want)
		}
	}
	for _, v := range []string{"15m1s", "0s", "-1m", "soon", "10"} {
		if _, err := getTimeoutOf(v); err == nil {
			t.Errorf("GET_TIMEOUT %q accepted", v)
		}
	}
}

// The server answers HTTP/1.1 and HTTP/2 by prior knowledge on one port.
func TestServerSpeaksHTTP1AndH2C(t *testing.T) {
	a, _ := newApp(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(a)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	for _, h2c := range []bool{false, true} {
		tr := &http.Transport{Protocols: new(http.Protocols)}
		want := "HTTP/1.1"
		if h2c {
			tr.Protocols.SetUnencryptedHTTP2(true)
			want = "HTTP/2.0"
		} else {
			tr.Protocols.SetHTTP1(true)
		}
		resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get("http://" + ln.Addr().String() + "/x")
		if err != nil {
			t.Fatalf("h2c %v: %v", h2c, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Proto != want {
			t.Errorf("h2c %v: %d over %s, want 200 over %s", h2c, resp.StatusCode, resp.Proto, want)
		}
		tr.CloseIdleConnections()
	}
}
