package resolver

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
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

// Refusals are retried with backoff, a bounded number of times.
func TestDialPatientlyGivesUpAfterItsAttempts(t *testing.T) {
	var calls atomic.Int32
	refused := errors.New("connection refused")
	dial := func(context.Context, string, string) (net.Conn, error) { calls.Add(1); return nil, refused }
	if _, err := dialPatiently(t.Context(), dial, "10.244.0.9:8080", time.Second); !errors.Is(err, refused) {
		t.Fatalf("err = %v, want the last refusal", err)
	}
	if got := calls.Load(); got != int32(len(connectAttempts)) {
		t.Fatalf("%d attempts, want %d", got, len(connectAttempts))
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
