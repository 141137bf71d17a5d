package resolver

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/elasti-dev/elasti/pkg/resolver/admission"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
	"github.com/elasti-dev/elasti/pkg/resolver/internal/resolvertest"
	"github.com/elasti-dev/elasti/pkg/wakeapi"
)

// postsFor counts the POSTs that asked the operator to wake svc.
func (o *fakeOperator) postsFor(svc string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, b := range o.bodies {
		var req wakeapi.Request
		if json.Unmarshal([]byte(b), &req) == nil && req.Svc == svc {
			n++
		}
	}
	return n
}

// clientFrom returns an HTTP client whose connections come from the
// loopback address local.
func clientFrom(t *testing.T, local string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: time.Second}
	tr := &http.Transport{Proxy: nil, DialContext: d.DialContext, MaxIdleConnsPerHost: 256}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 15 * time.Second}
}

// Over HTTP: the 101st wake from one client within the window is answered
// 429 with Retry-After and never reaches the operator; the same client's
// request for a Service already waking is held; another client's wake
// goes ahead.
func TestTheHundredAndFirstWakeFromOneClientIs429(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	clock := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	e := newEnv(t, testConfig(), func(o *Options) { o.Clock = clock }) // the default limit: bursts of 100, 10 a second
	noisy, quiet := clientFrom(t, "127.0.0.1"), clientFrom(t, "127.0.0.2")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	hold := func(client *http.Client, svc clusterview.ServiceRef) {
		req := e.request(t, ctx, "GET", "/", nil)
		req.Host = svc.Name + "." + svc.Namespace
		wg.Go(func() {
			if resp, err := client.Do(req); err == nil {
				resp.Body.Close()
				t.Errorf("request for %s answered %d, want it held until cancelled", svc, resp.StatusCode)
			}
		})
	}
	send := func(client *http.Client, svc clusterview.ServiceRef) *http.Response {
		req := e.request(t, context.Background(), "GET", "/", nil)
		req.Host = svc.Name + "." + svc.Namespace
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	queued := func() float64 { return metricValue(t, e.r.metrics.Hold.Queued) }

	for i := range 100 {
		hold(noisy, cold(i))
	}
	resolvertest.Eventually(t, 10*time.Second, "100 wakes held", func() bool { return queued() == 100 })

	resp := send(noisy, cold(100))
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" || !strings.Contains(body, "team/cold-100") {
		t.Fatalf("the 101st wake: %d Retry-After=%q %q; want 429, Retry-After 1 and the Service named", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if got := metricValue(t, e.r.metrics.Admission.WakeRateLimited.WithLabelValues(admission.ProtocolHTTP)); got != 1 {
		t.Errorf("rate-limited counter = %v, want 1", got)
	}

	hold(noisy, cold(7)) // already waking: joins, costs nothing
	hold(quiet, cold(100))
	resolvertest.Eventually(t, 5*time.Second, "the join and the other client's wake held", func() bool { return queued() == 102 })
	if got := metricValue(t, e.r.metrics.Admission.WakeRateSources); got != 2 {
		t.Errorf("elasti_resolver_wake_rate_limit_sources = %v, want the 2 clients", got)
	}
	if e.r.admit.Admitted(cold(7)) != 2 || e.r.admit.Admitted(cold(100)) != 1 {
		t.Errorf("slots: cold-7 %d, cold-100 %d; want 2 and 1", e.r.admit.Admitted(cold(7)), e.r.admit.Admitted(cold(100)))
	}

	// The refused request told the operator nothing: cold-100 was asked
	// for once, by the other client's wake.
	resolvertest.Eventually(t, 5*time.Second, "the operator to hear of cold-100", func() bool { return e.op.postsFor("cold-100") > 0 })
	if n := e.op.postsFor("cold-100"); n != 1 {
		t.Errorf("%d POSTs for cold-100, want the other client's 1", n)
	}

	clock.SetTime(clock.Now().Add(100 * time.Millisecond)) // one wake refills
	hold(noisy, cold(101))
	resolvertest.Eventually(t, 5*time.Second, "a wake after the refill held", func() bool { return queued() == 103 })
	resp = send(noisy, cold(102))
	if readAll(t, resp); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("a second wake after one refilled: %d, want 429", resp.StatusCode)
	}
}

// Over a resolver port a TCP client out of wakes is closed at once, not
// held.
func TestATCPClientOutOfWakesIsClosed(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	cfg := testConfig()
	cfg.SourceWakeRate, cfg.SourceWakeBurst = 0.001, 1
	pe := newPortEnv(t, cfg)
	pe.eps.SetAppProtocol(testSvc, "tcp") // no sniffing: held at once
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	req := pe.request(t, ctx, "GET", "/", nil)
	req.Host = "other.team"
	client := newClient(t)
	wg.Go(func() {
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
		}
	})
	resolvertest.Eventually(t, 5*time.Second, "the client's one wake spent", func() bool {
		return pe.r.admit.Admitted(clusterview.ServiceRef{Namespace: "team", Name: "other"}) == 1
	})

	c := pe.dial(t)
	if _, err := c.Read(make([]byte, 1)); err == nil || strings.Contains(err.Error(), "timeout") {
		t.Fatalf("read from a client out of wakes: %v, want the connection closed at once", err)
	}
	if got := metricValue(t, pe.r.metrics.Admission.WakeRateLimited.WithLabelValues(admission.ProtocolTCP)); got != 1 {
		t.Errorf("tcp rate-limited counter = %v, want 1", got)
	}
	if n := pe.r.admit.Admitted(testSvc); n != 0 {
		t.Errorf("the refused connection holds %d slots", n)
	}
}

// cold is the i-th of many sleeping Services of namespace team.
func cold(i int) clusterview.ServiceRef {
	return clusterview.ServiceRef{Namespace: "team", Name: fmt.Sprintf("cold-%d", i)}
}
