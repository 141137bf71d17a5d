// Command sampleapp is the test bed's sample application, run as a real
// container on the real node (package realnode builds its image as
// hack/images builds elasti's) and in `make demo`: a small HTTP server
// (HTTP/1.1, and HTTP/2 by prior knowledge on the same port) that starts
// the way a real app does, and a client mode for pods that request
// it.
//
//	sampleapp [flags]         serve on :$PORT (8080): JSON {servedBy, host, path, …}
//	sampleapp get <url>       GET url, print the status and body; exit 0 on 200;
//	                          it waits GET_TIMEOUT (a Go duration, 90s, at most 15m)
//
// Flags (each also read from the environment variable named after it):
//
//	-listen-delay (LISTEN_DELAY)    how long after its process starts it listens (0)
//	-not-ready-for (NOT_READY_FOR)  how long after it listens its readiness path
//	                                answers 503, while every other path answers (0)
//	-ready-path (READY_PATH)        its readiness path (/ready)
//
// It records when its process started, when it listened, when its
// readiness path first answered 200 and whose check that was (the
// kubelet's or the resolver's direct probe, by its User-Agent), and how many
// requests other than a readiness check (or a /metrics scrape) arrived
// before that: a request
// sent to the pod before its own readiness check passed. Every answer
// carries them in its headers (Header*), so a client measures the time
// beyond the app's first readiness 200 on the app's own clock. GET
// /metrics is http_requests_total, the requests it answered other than
// readiness checks and scrapes, as an instrumented app exposes it for
// Prometheus.
//
// It is a test fixture, not part of the product.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/elasti-dev/elasti/hack/sampleapp/answer"
)

// getTimeout bounds a client request: a request at zero is held while the
// target's pod starts as a real container. GET_TIMEOUT sets another, up
// to maxGetTimeout, for an app that starts for minutes
// (deploy/samples/model-server.yaml).
const (
	getTimeout    = 90 * time.Second
	maxGetTimeout = 15 * time.Minute
)

// getTimeoutOf reads GET_TIMEOUT's value: getTimeout when empty.
func getTimeoutOf(v string) (time.Duration, error) {
	if v == "" {
		return getTimeout, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 || d > maxGetTimeout {
		return 0, fmt.Errorf("GET_TIMEOUT %q: want a duration above 0 and at most %s", v, maxGetTimeout)
	}
	return d, nil
}

// The headers on every answer: instants in Unix microseconds (the clients
// run on the same host, so the wall clocks agree), 0 for "not yet".
const (
	HeaderStarted   = "X-Sampleapp-Started"
	HeaderListening = "X-Sampleapp-Listening"
	// HeaderFirstReady is when the readiness path first answered 200.
	HeaderFirstReady = "X-Sampleapp-First-Ready"
	// HeaderArrived is when this request arrived.
	HeaderArrived = "X-Sampleapp-Arrived"
	// HeaderEarly counts the requests, this one included, that arrived
	// before the readiness path first answered 200.
	HeaderEarly = "X-Sampleapp-Early-Requests"
)

// started is taken first thing, as near the process's start as Go gets.
var started = time.Now()

func main() {
	if len(os.Args) == 3 && os.Args[1] == "get" {
		os.Exit(get(os.Args[2]))
	}
	cfg, err := parseConfig(os.Args[1:], os.Getenv)
	if err == nil {
		err = serve(cfg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sampleapp:", err)
		os.Exit(1)
	}
}

// config is how the app starts.
type config struct {
	port        string
	listenDelay time.Duration
	notReadyFor time.Duration
	readyPath   string
}

// maxDelay bounds both delays: a fixture that never gets ready is a
// mistake, not a scenario.
const maxDelay = 10 * time.Minute

func parseConfig(args []string, getenv func(string) string) (config, error) {
	fs := flag.NewFlagSet("sampleapp", flag.ContinueOnError)
	envOr := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	cfg := config{port: envOr("PORT", "8080")}
	listen := fs.String("listen-delay", envOr("LISTEN_DELAY", "0s"), "how long after the process starts it listens")
	notReady := fs.String("not-ready-for", envOr("NOT_READY_FOR", "0s"), "how long after it listens its readiness path answers 503")
	fs.StringVar(&cfg.readyPath, "ready-path", envOr("READY_PATH", "/ready"), "the readiness path")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	for _, d := range []struct {
		name string
		in   string
		out  *time.Duration
	}{{"listen-delay", *listen, &cfg.listenDelay}, {"not-ready-for", *notReady, &cfg.notReadyFor}} {
		v, err := time.ParseDuration(d.in)
		if err != nil || v < 0 || v > maxDelay {
			return cfg, fmt.Errorf("-%s %q: want a duration from 0 to %s", d.name, d.in, maxDelay)
		}
		*d.out = v
	}
	if len(cfg.readyPath) == 0 || cfg.readyPath[0] != '/' {
		return cfg, fmt.Errorf("-ready-path %q: want a path starting with /", cfg.readyPath)
	}
	return cfg, nil
}

// app is the server's state: when it listened, when its readiness path
// first answered 200, and what arrived before.
type app struct {
	cfg  config
	name string
	now  func() time.Time

	mu           sync.Mutex // guards the fields below
	listening    time.Time
	firstReady   time.Time
	firstReadyBy string
	early        int64
	requests     int64
}

// micros is t in Unix microseconds, 0 for the zero time.
func micros(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

func (a *app) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	arrived := a.now()
	a.mu.Lock()
	switch r.URL.Path {
	case a.cfg.readyPath:
		// Ready once the window after listening is over; the first 200
		// is the instant the app is first known ready.
		if a.firstReady.IsZero() && !arrived.Before(a.listening.Add(a.cfg.notReadyFor)) {
			a.firstReady = arrived
			a.firstReadyBy = answer.CheckerOf(r.UserAgent())
		}
	case "/metrics":
		// A scrape is not a user's request: Prometheus scrapes every pod,
		// Ready or not.
	default:
		a.requests++
		if a.firstReady.IsZero() {
			a.early++
		}
	}
	listening, firstReady, firstReadyBy, early, requests := a.listening, a.firstReady, a.firstReadyBy, a.early, a.requests
	a.mu.Unlock()

	h := w.Header()
	for name, v := range map[string]int64{
		HeaderStarted: micros(started), HeaderListening: micros(listening), HeaderFirstReady: micros(firstReady),
		HeaderArrived: micros(arrived), HeaderEarly: early,
	} {
		h.Set(name, strconv.FormatInt(v, 10))
	}
	switch r.URL.Path {
	case a.cfg.readyPath:
		if firstReady.IsZero() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	case "/metrics":
		h.Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprintf(w, "# HELP http_requests_total Requests this pod answered, readiness checks and scrapes aside.\n# TYPE http_requests_total counter\nhttp_requests_total %d\n", requests)
	default:
		h.Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(answer.Reply{
			ServedBy: a.name, Host: r.Host, Path: r.URL.Path,
			ListenDelay: a.cfg.listenDelay.String(), NotReadyFor: a.cfg.notReadyFor.String(),
			Started: micros(started), Listening: micros(listening), FirstReady: micros(firstReady), FirstReadyBy: firstReadyBy,
			Arrived: micros(arrived), Early: early,
		})
	}
}

func serve(cfg config) error {
	name, _ := os.Hostname()
	a := &app{cfg: cfg, name: name, now: time.Now}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	// Starting up: the port is closed until the delay is over, as an app
	// that loads its configuration and warms its caches first.
	select {
	case <-time.After(cfg.listenDelay - time.Since(started)):
	case <-ctx.Done():
		return nil
	}
	l, err := net.Listen("tcp", ":"+cfg.port)
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.listening = time.Now()
	a.mu.Unlock()
	srv := newServer(a)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	fmt.Printf("sampleapp %s serving on :%s, %s after its start (listen delay %s, readiness %s not ready for %s)\n",
		name, cfg.port, time.Since(started).Round(time.Millisecond), cfg.listenDelay, cfg.readyPath, cfg.notReadyFor)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// The kubelet's SIGTERM: finish what is in flight, then exit.
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// newServer serves h on one port over HTTP/1.1 and over HTTP/2 by prior
// knowledge (h2c), as a gRPC server or an app behind an h2c hop does: a
// Service port that declares kubernetes.io/h2c reaches it over HTTP/2.
func newServer(h http.Handler) *http.Server {
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: h, Protocols: new(http.Protocols)}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	return srv
}

func get(url string) int {
	timeout, err := getTimeoutOf(os.Getenv("GET_TIMEOUT"))
	if err != nil {
		fmt.Println(err)
		return 2
	}
	client := &http.Client{Timeout: timeout}
	start := time.Now()
	resp, err := client.Get(url)
	if err != nil {
		fmt.Printf("GET %s: %v after %s\n", url, err, time.Since(start).Round(time.Millisecond))
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	fmt.Printf("GET %s: %d after %s\n%s", url, resp.StatusCode, time.Since(start).Round(time.Millisecond), body)
	if resp.StatusCode != http.StatusOK {
		return 1
	}
	return 0
}
