package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/elasti-dev/elasti/pkg/command"
)

// "Serving" names the address the server bound, not the :0 it was given.
func TestServeLogsTheBoundAddress(t *testing.T) {
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	ctx := klog.NewContext(context.Background(), logger)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		serve(ctx, "test", "127.0.0.1:0", http.NotFoundHandler(), command.WriteTimeout)
	}()
	defer func() { cancel(); <-done }()

	buf := logger.GetSink().(ktesting.Underlier).GetBuffer()
	serving := regexp.MustCompile(`"?Serving"? server="test" address="(127\.0\.0\.1:[0-9]+)"`)
	var addr string
	for deadline := time.Now().Add(10 * time.Second); addr == ""; time.Sleep(10 * time.Millisecond) {
		if m := serving.FindStringSubmatch(buf.String()); m != nil {
			addr = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("no Serving log with a bound address:\n%s", buf.String())
		}
	}
	if addr == "127.0.0.1:0" {
		t.Fatalf("logged the requested address %s, not the bound one", addr)
	}
	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatalf("the logged address %s does not serve: %v", addr, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET %s: %s, want the handler's 404", addr, resp.Status)
	}

	// Headers are bounded before the handler runs.
	req, err := http.NewRequest("POST", "http://"+addr+"/informer/incoming-request", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Big", strings.Repeat("a", 2*command.MaxHeaderBytes))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a %d-byte header: %s, want 431", 2*command.MaxHeaderBytes, resp.Status)
	}
}

// /debug/pprof/ is served beside /metrics only with --profiling.
func TestProfilingOnlyWhenEnabled(t *testing.T) {
	for _, on := range []bool{false, true} {
		h := metricsHandler(prometheus.NewRegistry(), on)
		for path, want := range map[string]int{
			"/metrics":                  http.StatusOK,
			"/debug/pprof/":             http.StatusOK,
			"/debug/pprof/heap?debug=1": http.StatusOK,
			"/debug/pprof/cmdline":      http.StatusOK,
		} {
			if !on && path != "/metrics" {
				want = http.StatusNotFound
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
			if rec.Code != want {
				t.Errorf("profiling=%v: GET %s = %d, want %d", on, path, rec.Code, want)
			}
		}
	}
	o, err := parse(t, nil)
	if err != nil || o.profiling {
		t.Errorf("--profiling must default to off: %v %v", err, o.profiling)
	}
	if o, err = parse(t, nil, "--profiling"); err != nil || !o.profiling {
		t.Errorf("--profiling not parsed: %v", err)
	}
}

// TestGCPercentDefaultsUnlessGOGCIsSet: the operator collects at 50 % heap
// growth by default or with an empty GOGC, and a GOGC the user set is left
// alone.
func TestGCPercentDefaultsUnlessGOGCIsSet(t *testing.T) {
	restore := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(restore) })

	unset := func(string) string { return "" } // os.Getenv's answer for unset or empty
	if got := setGCPercent(unset); got != defaultGCPercent {
		t.Errorf("without GOGC: reported %d, want %d", got, defaultGCPercent)
	}
	if now := debug.SetGCPercent(100); now != defaultGCPercent {
		t.Errorf("without GOGC the runtime collects at %d, want %d", now, defaultGCPercent)
	}

	debug.SetGCPercent(200) // as the runtime would have read GOGC=200
	if got := setGCPercent(func(k string) string { return map[string]string{"GOGC": "200"}[k] }); got != 200 {
		t.Errorf("with GOGC=200: reported %d", got)
	}
	if now := debug.SetGCPercent(100); now != 200 {
		t.Errorf("with GOGC=200 the runtime collects at %d; a user's GOGC must stay", now)
	}
}
