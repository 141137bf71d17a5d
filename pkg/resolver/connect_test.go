package resolver

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/elasti-dev/elasti/pkg/resolver/forward"
	"github.com/elasti-dev/elasti/pkg/wakeapi"
)

// A pod that is Ready a moment before it accepts does not cost the held
// request a 502: the forwarder keeps trying within its attempts.
func TestHeldRequestSurvivesAPodThatAcceptsLate(t *testing.T) {
	e := newEnv(t, testConfig())
	const pod = "10.244.0.5:8080"
	e.op.setOnPost(func(wakeapi.Request) {
		e.eps.Set(testSvc, pod) // Ready now, listening in 100ms
		go func() {
			time.Sleep(100 * time.Millisecond)
			e.backend(t, pod, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "late pod") }))
		}()
	})
	resp, err := newClient(t).Do(e.request(t, t.Context(), "GET", "/", nil))
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode != 200 || body != "late pod" {
		t.Fatalf("got %d %q, want the pod's answer", resp.StatusCode, body)
	}
	if got := metricValue(t, e.r.metrics.Forward.ConnectFailures); got < 1 {
		t.Errorf("%s = %v; the refused connects must be counted", "elasti_resolver_pod_connect_failures_total", got)
	}
}

// A pod is often Ready a second or more before its process listens: it
// has no readiness probe, or one that does not check the port it serves.
// Its connects are refused until then. The held request is still answered
// by the pod, not 502 after the first refusals, and the refusals are
// retried in rounds that back off, so they are few.
func TestHeldRequestReachesAPodReadyASecondBeforeItListens(t *testing.T) {
	e := newEnv(t, testConfig())
	const pod = "10.244.0.5:8080"
	const late = time.Second
	listening := make(chan time.Time, 1)
	e.op.setOnPost(func(wakeapi.Request) {
		e.eps.Set(testSvc, pod) // Ready now, listening a second later
		go func() {
			time.Sleep(late)
			e.backend(t, pod, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "late pod") }))
			listening <- time.Now()
		}()
	})
	resp, err := newClient(t).Do(e.request(t, t.Context(), "GET", "/", nil))
	if err != nil {
		t.Fatal(err)
	}
	answered := time.Now()
	if body := readAll(t, resp); resp.StatusCode != 200 || body != "late pod" {
		t.Fatalf("got %d %q, want the pod's answer", resp.StatusCode, body)
	}
	if after := answered.Sub(<-listening); after > 1500*time.Millisecond {
		t.Errorf("answered %v after the pod listened; the rounds back off to at most %v", after, forward.MaxConnectBackoff)
	}
	// Rounds at 0, 50, 150, 350, 750 ms are refused; 1550 ms connects.
	if got := metricValue(t, e.r.metrics.Forward.ConnectFailures); got < 3 || got > 6 {
		t.Errorf("%v failed connects to a pod a second late; want a few, with backoff", got)
	}
}

// A pod that never listens costs a request a 502 once the connect
// patience is spent, after a bounded number of connects.
func TestPodThatNeverListensIsA502AfterTheConnectPatience(t *testing.T) {
	cfg := testConfig()
	cfg.connectPatience = time.Second
	e := newEnv(t, cfg)
	const pod = "10.244.0.5:8080"
	e.eps.Set(testSvc, pod) // Ready, and refuses for ever
	began := time.Now()
	resp, err := newClient(t).Do(e.request(t, t.Context(), "GET", "/", nil))
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(began)
	if body := readAll(t, resp); resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "could not connect") {
		t.Fatalf("got %d %q, want a 502 saying no pod accepted", resp.StatusCode, body)
	}
	if took > e.r.cfg.connectPatience+500*time.Millisecond {
		t.Errorf("the 502 came after %v, past the %v connect patience", took, e.r.cfg.connectPatience)
	}
	// Rounds at 0, 50, 150, 350 and 750 ms; the next, at 1550 ms, would
	// pass the patience.
	if got := e.net.dialCount(pod); got < 3 || got > 5 {
		t.Errorf("%d connects in the %v patience; want 5 rounds at most", got, e.r.cfg.connectPatience)
	}
	if got := metricValue(t, e.r.metrics.Forward.ConnectFailures); got != float64(e.net.dialCount(pod)) {
		t.Errorf("%v failed connects counted, %d made", got, e.net.dialCount(pod))
	}
}
