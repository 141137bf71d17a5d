package operator_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/idle"
	"github.com/elasti-dev/elasti/pkg/outcome"
	"github.com/elasti-dev/elasti/pkg/triggers"
	"github.com/elasti-dev/elasti/test/testenv"
)

// secretMarker stands for anything a server reachable from the operator
// holds, or the operator's own credential: it must never reach an Event.
const secretMarker = "SECRET-MARKER-91c2"

// recorder is a loopback HTTP server that records the headers of every
// request and answers with answer(n) for the n-th, from 0.
type recorder struct {
	*httptest.Server
	mu      sync.Mutex
	headers []http.Header
}

func newRecorder(t *testing.T, answer func(n int, w http.ResponseWriter, r *http.Request)) *recorder {
	t.Helper()
	rec := &recorder{}
	rec.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.mu.Lock()
		n := len(rec.headers)
		rec.headers = append(rec.headers, r.Header.Clone())
		rec.mu.Unlock()
		answer(n, w, r)
	}))
	t.Cleanup(rec.Close)
	return rec
}

func (r *recorder) seen() []http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]http.Header(nil), r.headers...)
}

// triggerAt is one Prometheus trigger on server (the operator's default
// when empty) whose query the FakePrometheus answers as idle.
func triggerAt(server string) []elastiv1alpha1.ScaleTrigger {
	md := map[string]string{"query": "sum(rate(http_requests_total[1m]))", "threshold": "0.5"}
	if server != "" {
		md["serverAddress"] = server
	}
	raw, _ := json.Marshal(md)
	return []elastiv1alpha1.ScaleTrigger{{Type: "prometheus", Metadata: raw}}
}

// noSecretInEvents fails if any Event in the namespace, as `kubectl get
// events` lists them, holds the marker.
func noSecretInEvents(t *testing.T, e *testenv.Env) {
	t.Helper()
	evs, err := e.Kube.CoreV1().Events(e.NS).List(e.Ctx(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs.Items {
		if strings.Contains(ev.Message, secretMarker) || strings.Contains(ev.Reason, secretMarker) {
			t.Errorf("event %s %s on %s leaks a secret: %s", ev.Type, ev.Reason, ev.InvolvedObject.Name, ev.Message)
		}
	}
}

// The attack of issue #20: an ElastiService's author points its trigger
// at a server of their own, which records what the operator sends,
// redirects it to another server, and answers 500 with a body holding what
// it wants read back through the events. The operator sends it no
// credential, follows no redirect, repeats none of its text, and leaves
// the target alone; the default server still gets the credential.
func TestTriggerServerGetsNoCredentialAndIsNotEchoed(t *testing.T) {
	t.Parallel()
	const credential = "Bearer operator-" + secretMarker
	e := testenv.New(t)

	prom := testenv.NewFakePrometheus(t)
	// The default server: the FakePrometheus, with its requests' headers
	// recorded.
	def := newRecorder(t, func(_ int, w http.ResponseWriter, r *http.Request) { prom.Config.Handler.ServeHTTP(w, r) })
	redirectTarget := newRecorder(t, func(_ int, w http.ResponseWriter, r *http.Request) { prom.Config.Handler.ServeHTTP(w, r) })
	attacker := newRecorder(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n%2 == 0 {
			http.Redirect(w, r, redirectTarget.URL+r.URL.RequestURI(), http.StatusFound)
			return
		}
		w.Header().Set("X-Internal", secretMarker)
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, `{"status":"error","errorType":"internal","error":"db password: %s"}`, secretMarker)
	})

	e.Opts.PrometheusAuthorizationHeader = credential
	e.Opts.PollingInterval = 200 * time.Millisecond
	e.Opts.QueryTimeout = time.Second
	e.Opts.PrometheusServerAddress = def.URL
	op := e.StartOperatorReturning()
	e.Resolver(1)

	e.App("victim", 1)
	e.ElastiServiceWith("victim", "victim", elastiv1alpha1.KindDeployment, "victim", func(es *elastiv1alpha1.ElastiService) {
		es.Spec.CooldownPeriod = 1
		// A query parameter is a secret too, such as an API key.
		es.Spec.Triggers = triggerAt(attacker.URL + "/?api_key=" + secretMarker)
	})
	// Control: the same, on the default server.
	e.App("control", 1)
	e.ElastiServiceWith("control", "control", elastiv1alpha1.KindDeployment, "control", func(es *elastiv1alpha1.ElastiService) {
		es.Spec.CooldownPeriod = 1
		es.Spec.Triggers = triggerAt("")
	})

	// Both the redirect and the 500 have been answered more than once.
	e.Eventually("the attacker's server is polled", func() (bool, string) {
		n := len(attacker.seen())
		return n >= 6, fmt.Sprintf("%d requests", n)
	})
	e.Eventually("victim: a TriggerError event", func() (bool, string) { return e.HasEvent("victim", idle.ReasonTriggerError) })
	e.WaitReplicas(elastiv1alpha1.KindDeployment, "control", 0)

	for i, h := range attacker.seen() {
		if got := h.Get("Authorization"); got != "" {
			t.Errorf("request %d to the ElastiService's own server carried Authorization %q", i, got)
		}
	}
	if n := len(redirectTarget.seen()); n != 0 {
		t.Errorf("the redirect target got %d requests; redirects must not be followed", n)
	}
	var defAuth string
	if seen := def.seen(); len(seen) > 0 {
		defAuth = seen[0].Get("Authorization")
	}
	if defAuth != credential {
		t.Errorf("the default server got Authorization %q; want the operator's credential", defAuth)
	}
	e.HoldsReplicas(elastiv1alpha1.KindDeployment, "victim", 1, time.Second)
	// Let the event sink write what the last polls reported.
	time.Sleep(time.Second)
	noSecretInEvents(t, e)
	ok, msg := e.HasEvent("victim", idle.ReasonTriggerError)
	if !ok || !strings.Contains(msg, "HTTP ") {
		t.Errorf("victim's TriggerError event %q does not give the HTTP status", msg)
	}
	for _, reason := range []triggers.Reason{triggers.ReasonRedirected, triggers.ReasonBadStatus} {
		if got := testutil.ToFloat64(op.Metrics.IdleEvaluations.WithLabelValues(string(outcome.IdleTriggerError), string(reason))); got < 1 {
			t.Errorf("trigger errors with reason %s = %v, want at least 1", reason, got)
		}
	}
}

// With --prometheus-allowed-servers set, a trigger on a server not in it
// is refused before any request: the server hears nothing, the target
// stays, the event says why and the metric counts ServerNotAllowed.
func TestTriggerServerOutsideTheAllowListIsRefused(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	prom := testenv.NewFakePrometheus(t)
	listed := testenv.NewFakePrometheus(t)
	outside := newRecorder(t, func(_ int, w http.ResponseWriter, r *http.Request) { prom.Config.Handler.ServeHTTP(w, r) })
	list, err := triggers.ParseServerPrefixes(listed.URL)
	if err != nil {
		t.Fatal(err)
	}
	e.Opts.PrometheusAllowedServers = list
	e.Opts.PollingInterval = 200 * time.Millisecond
	e.Opts.QueryTimeout = time.Second
	e.Opts.PrometheusServerAddress = prom.URL
	op := e.StartOperatorReturning()
	e.Resolver(1)

	e.App("outside", 1)
	e.ElastiServiceWith("outside", "outside", elastiv1alpha1.KindDeployment, "outside", func(es *elastiv1alpha1.ElastiService) {
		es.Spec.CooldownPeriod = 1
		es.Spec.Triggers = triggerAt(outside.URL)
	})
	// Controls: the listed server and the default one are queried.
	e.App("listed", 1)
	e.ElastiServiceWith("listed", "listed", elastiv1alpha1.KindDeployment, "listed", func(es *elastiv1alpha1.ElastiService) {
		es.Spec.CooldownPeriod = 1
		es.Spec.Triggers = triggerAt(listed.URL)
	})
	e.App("default", 1)
	e.ElastiServiceWith("default", "default", elastiv1alpha1.KindDeployment, "default", func(es *elastiv1alpha1.ElastiService) {
		es.Spec.CooldownPeriod = 1
		es.Spec.Triggers = triggerAt("")
	})

	e.Eventually("outside: a TriggerError event", func() (bool, string) { return e.HasEvent("outside", idle.ReasonTriggerError) })
	e.WaitReplicas(elastiv1alpha1.KindDeployment, "listed", 0)
	e.WaitReplicas(elastiv1alpha1.KindDeployment, "default", 0)
	e.HoldsReplicas(elastiv1alpha1.KindDeployment, "outside", 1, time.Second)
	if n := len(outside.seen()); n != 0 {
		t.Errorf("the server outside the allow-list got %d requests", n)
	}
	if _, msg := e.HasEvent("outside", idle.ReasonTriggerError); !strings.Contains(msg, "--prometheus-allowed-servers") {
		t.Errorf("the event %q does not say which setting refused the server", msg)
	}
	if got := testutil.ToFloat64(op.Metrics.IdleEvaluations.WithLabelValues(string(outcome.IdleTriggerError), string(triggers.ReasonServerNotAllowed))); got < 1 {
		t.Errorf("trigger errors with reason %s = %v, want at least 1", triggers.ReasonServerNotAllowed, got)
	}
}
