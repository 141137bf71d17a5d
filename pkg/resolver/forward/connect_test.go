package forward

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"

	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
)

var testSvc = clusterview.ServiceRef{Namespace: "team", Name: "web"}

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

// Connect rounds that give up name every endpoint they tried, each once,
// how many rounds they made and how long, and stay a dial error for the
// 502: the resolver's log line of a failed cold start says which
// addresses did not answer.
func TestConnectRoundsThatGiveUpNameTheEndpointsTried(t *testing.T) {
	eps := clusterview.NewMemoryEndpoints()
	const a, b = "10.244.0.5:8080", "10.244.0.6:8080"
	eps.Set(testSvc, a, b)
	c := newConnector(eps, nil, time.Second, ktesting.NewLogger(t, ktesting.NewConfig()))
	err := c.rounds(t.Context(), testSvc, "", []string{a, b}, 300*time.Millisecond, func(string) (bool, error) {
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

// The round-robin counters are kept per Service that had endpoints, and
// only up to maxRoundRobin of them: Services come and go for as long as
// the resolver runs.
func TestRoundRobinCountersAreBounded(t *testing.T) {
	c := newConnector(clusterview.NewMemoryEndpoints(), nil, time.Second, ktesting.NewLogger(t, ktesting.NewConfig()))
	addrs := []string{"10.244.0.1:80", "10.244.0.2:80"}
	for i := range maxRoundRobin + 1000 {
		c.order(clusterview.ServiceRef{Namespace: "team", Name: fmt.Sprintf("svc-%d", i)}, addrs)
	}
	if n := c.tracked(); n > maxRoundRobin {
		t.Fatalf("%d round-robin counters, want at most %d", n, maxRoundRobin)
	}
	// The counters still turn: one Service is sent to each endpoint in
	// turn.
	svc := clusterview.ServiceRef{Namespace: "team", Name: "web"}
	first, second := c.order(svc, addrs)[0], c.order(svc, addrs)[0]
	if first == second {
		t.Errorf("two requests in a row went to %s: the counter does not turn", first)
	}
}
