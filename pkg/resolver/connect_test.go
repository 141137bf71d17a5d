package resolver

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/elasti-dev/elasti/pkg/wakeapi"
)

// A lost SYN is retried by a fresh attempt long before the kernel's one
// second: an attempt that hangs gives way to the next after its timeout.
func TestDialPatientlyRetriesAHangingAttemptSoon(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var calls atomic.Int32
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		if calls.Add(1) == 1 {
			<-ctx.Done() // the first SYN is lost
			return nil, ctx.Err()
		}
		var d net.Dialer
		return d.DialContext(ctx, network, ln.Addr().String())
	}
	began := time.Now()
	c, err := dialPatiently(t.Context(), dial, "10.244.0.9:8080", 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	if took := time.Since(began); took > 900*time.Millisecond {
		t.Fatalf("connected after %v; the second attempt should follow the first's 250ms timeout", took)
	}
}

// An attempt that times out is followed by a longer one, a bounded number
// of times.
func TestDialPatientlyGivesUpAfterItsAttempts(t *testing.T) {
	var calls atomic.Int32
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		calls.Add(1)
		<-ctx.Done() // every SYN is lost
		return nil, ctx.Err()
	}
	if _, err := dialPatiently(t.Context(), dial, "10.244.0.9:8080", 300*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the last attempt's timeout", err)
	}
	if got := calls.Load(); got != int32(len(connectAttempts)) {
		t.Fatalf("%d attempts, want %d", got, len(connectAttempts))
	}
}

// A refusal ends dialPatiently at once: the caller's connect rounds try
// the other endpoints first, and this one again after a pause.
func TestDialPatientlyLeavesARefusalToItsCaller(t *testing.T) {
	var calls atomic.Int32
	refused := errors.New("connection refused")
	dial := func(context.Context, string, string) (net.Conn, error) { calls.Add(1); return nil, refused }
	if _, err := dialPatiently(t.Context(), dial, "10.244.0.9:8080", time.Second); !errors.Is(err, refused) {
		t.Fatalf("err = %v, want the refusal", err)
	}
	if got := calls.Load(); got != 1 {
		t.Fatalf("%d attempts, want 1", got)
	}
}

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
	if got := metricValue(t, e.r.metrics.ConnectFailures); got < 1 {
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
		t.Errorf("answered %v after the pod listened; the rounds back off to at most %v", after, maxConnectBackoff)
	}
	// Rounds at 0, 50, 150, 350, 750 ms are refused; 1550 ms connects.
	if got := metricValue(t, e.r.metrics.ConnectFailures); got < 3 || got > 6 {
		t.Errorf("%v failed connects to a pod a second late; want a few, with backoff", got)
	}
}

// A pod that never listens costs a request a 502 once the connect
// patience is spent, after a bounded number of connects.
func TestPodThatNeverListensIsA502AfterTheConnectPatience(t *testing.T) {
	e := newEnv(t, testConfig())
	e.r.fwd.connectPatience = time.Second
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
	if took > e.r.fwd.connectPatience+500*time.Millisecond {
		t.Errorf("the 502 came after %v, past the %v connect patience", took, e.r.fwd.connectPatience)
	}
	// Rounds at 0, 50, 150, 350 and 750 ms; the next, at 1550 ms, would
	// pass the patience.
	if got := e.net.dialCount(pod); got < 3 || got > 5 {
		t.Errorf("%d connects in the %v patience; want 5 rounds at most", got, e.r.fwd.connectPatience)
	}
	if got := metricValue(t, e.r.metrics.ConnectFailures); got != float64(e.net.dialCount(pod)) {
		t.Errorf("%v failed connects counted, %d made", got, e.net.dialCount(pod))
	}
}

// Connect rounds that give up name every endpoint they tried, each once,
// how many rounds they made and how long, and stay a dial error for the
// 502: the resolver's log line of a failed cold start says which
// addresses did not answer.
func TestConnectRoundsThatGiveUpNameTheEndpointsTried(t *testing.T) {
	e := newEnv(t, testConfig())
	const a, b = "10.244.0.5:8080", "10.244.0.6:8080"
	e.eps.Set(testSvc, a, b)
	err := e.r.conn.rounds(t.Context(), testSvc, "", []string{a, b}, 300*time.Millisecond, func(string) (bool, error) {
		return true, &dialError{errors.New("connection refused")}
	})
	var ce *connectError
	if !errors.As(err, &ce) {
		t.Fatalf("rounds gave up with %v (%T), want a *connectError", err, err)
	}
	if !slices.Equal(ce.endpoints, []string{a, b}) {
		t.Errorf("endpoints named %v, want %v, each once", ce.endpoints, []string{a, b})
	}
	if ce.rounds < 2 || ce.after <= 0 {
		t.Errorf("%d rounds over %v; want at least 2 in the patience", ce.rounds, ce.after)
	}
	var de *dialError
	if !errors.As(err, &de) {
		t.Errorf("%v is no longer a dial error", err)
	}
	for _, want := range []string{a, b, "connection refused"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not name %q", err, want)
		}
	}
}
