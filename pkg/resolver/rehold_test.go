package resolver

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/elasti-dev/elasti/pkg/resolver/admission"
	"github.com/elasti-dev/elasti/pkg/resolver/internal/resolvertest"
	"github.com/elasti-dev/elasti/pkg/wakeapi"
)

// gonePod is a Ready endpoint whose pod went away: nothing listens on it,
// and the endpoints lose it as the first connect to it fails.
const gonePod = "10.244.0.9:8080"

// listGonePod lists gonePod as testSvc's one Ready endpoint, until the
// first connect to it: then the endpoints lose it, as a slice catches up
// with the pod's deletion.
func listGonePod(e *testEnv) {
	e.eps.Set(testSvc, gonePod)
	e.net.onDial = func(addr string) {
		if addr == gonePod {
			e.eps.Set(testSvc)
		}
	}
}

// A request sent on to a Ready pod that goes away before it accepts (the
// Service put to sleep between the lookup and the connect) is held as any
// request for a Service with no Ready pod: it wakes the Service and is
// answered by the woken pod. Before, the connect rounds tried the gone
// pod until their patience ran out, answered 502 and woke nothing, so the
// Service stayed asleep under its client (the real node's gate, round 2
// of ing-l300-p1-d2, 1 Dec 2026: a 502 after 10.6 s, then the Service at
// zero for two minutes).
func TestARequestWhosePodWentAwayIsHeldAndWakesTheService(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	e := newEnv(t, testConfig())
	listGonePod(e)
	e.backend(t, "10.244.0.10:8080", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("woken")) }))
	e.op.setOnPost(func(wakeapi.Request) { e.eps.Set(testSvc, "10.244.0.10:8080") })

	if got := fetch(newClient(t), e.request(t, context.Background(), "GET", "/", nil)); got != "200 woken" {
		t.Fatalf("got %q, want the woken pod's 200", got)
	}
	if e.op.posts.Load() == 0 {
		t.Error("the Service was not woken")
	}
	if got := metricValue(t, e.r.metrics.Forward.EndpointsGone.WithLabelValues(admission.ProtocolHTTP)); got != 1 {
		t.Errorf("endpoints gone (http) = %v, want 1", got)
	}
}

// The same for a raw TCP connection on a resolver port: held, the Service
// woken, and the connection spliced to the woken pod.
func TestAConnectionWhosePodWentAwayIsHeldAndWakesTheService(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	pe := newPortEnv(t, testConfig())
	listGonePod(pe.testEnv)
	pe.net.route("10.244.0.6:5000", echoTCP(t, ""))
	pe.wakeOnPost("10.244.0.6:5000")

	c := pe.dial(t)
	_ = c.SetDeadline(time.Now().Add(8 * time.Second))
	msg := []byte("hello over raw tcp\n")
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != string(msg) {
		t.Fatalf("echo = %q, %v; want the woken pod's echo", got, err)
	}
	if pe.op.posts.Load() == 0 {
		t.Error("the Service was not woken")
	}
	if got := metricValue(t, pe.r.metrics.Forward.EndpointsGone.WithLabelValues(admission.ProtocolTCP)); got != 1 {
		t.Errorf("endpoints gone (tcp) = %v, want 1", got)
	}
}
