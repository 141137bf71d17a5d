package operator_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/controller"
	"github.com/elasti-dev/elasti/pkg/idle"
	"github.com/elasti-dev/elasti/pkg/triggers"
	"github.com/elasti-dev/elasti/test/testenv"
)

// newRecorderOn is newRecorder listening on addr, a loopback address.
func newRecorderOn(t *testing.T, addr string, answer func(n int, w http.ResponseWriter, r *http.Request)) *recorder {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s: %v", addr, err)
	}
	rec := newRecorder(t, answer)
	handler := rec.Config.Handler
	rec.Close()
	rec.Server = httptest.NewUnstartedServer(handler)
	rec.Listener = l
	rec.Start()
	t.Cleanup(rec.Close)
	return rec
}

// otherNamespaceLabels are label values of another team's series that a
// many-to-many error of the shared Prometheus names.
var otherNamespaceLabels = []string{"payments", "card-vault-7d9f", "acme-bank"}

// The measurement of issue 30, items 1 and 8, on the local control plane.
// The default server, shared by every namespace, answers a many-to-many
// error that names another namespace's series; an ElastiService's author
// points a trigger at a server of their own on 127.0.0.2 with a Host
// header naming the default server. The operator sends the author's server
// nothing, so not its credential; the ElastiService is refused as invalid
// (InvalidSpec, since its metadata alone shows the Host header naming
// another server; without serverAddress, InvalidMetadata in the
// TriggersEvaluated condition and a TriggerError event); and no event or condition quotes
// the default server's text, only its class.
func TestHostHeaderTrickAndSharedServerErrors(t *testing.T) {
	t.Parallel()
	const credential = "Bearer operator-" + secretMarker
	e := testenv.New(t)

	def := newRecorder(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if strings.HasPrefix(r.URL.Query().Get("query"), "min_over_time(") {
			fmt.Fprint(w, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"1"]}]}}`)
			return
		}
		w.WriteHeader(http.StatusUnprocessableEntity)
		fmt.Fprint(w, `{"status":"error","errorType":"execution","error":"found duplicate series for the match group {namespace=\"payments\"} `+
			`on the right hand side of the operation: [{__name__=\"http_requests_total\", namespace=\"payments\", pod=\"card-vault-7d9f\", customer=\"acme-bank\"}];`+
			`many-to-many matching not allowed: matching labels must be unique on one side"}`)
	})
	attacker := newRecorderOn(t, "127.0.0.2:0", func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, `{"status":"error","errorType":"internal","error":"%s"}`, secretMarker)
	})
	defHost := strings.TrimPrefix(def.URL, "http://")

	e.Opts.PrometheusAuthorizationHeader = credential
	e.Opts.PollingInterval = 200 * time.Millisecond
	e.Opts.QueryTimeout = time.Second
	e.Opts.PrometheusServerAddress = def.URL
	e.StartOperatorReturning()
	e.Resolver(1)

	e.App("hosttrick", 1)
	e.ElastiServiceWith("hosttrick", "hosttrick", elastiv1alpha1.KindDeployment, "hosttrick", func(es *elastiv1alpha1.ElastiService) {
		es.Spec.CooldownPeriod = 1
		raw, _ := json.Marshal(map[string]any{
			"query": "sum(rate(http_requests_total[1m]))", "threshold": "0.5",
			"serverAddress": attacker.URL, "headers": map[string]string{"Host": defHost},
		})
		es.Spec.Triggers = []elastiv1alpha1.ScaleTrigger{{Type: "prometheus", Metadata: raw}}
	})
	// The same trick without serverAddress: the URL is the default server's,
	// and a Host header naming another is refused when the triggers run.
	e.App("hostdefault", 1)
	e.ElastiServiceWith("hostdefault", "hostdefault", elastiv1alpha1.KindDeployment, "hostdefault", func(es *elastiv1alpha1.ElastiService) {
		es.Spec.CooldownPeriod = 1
		raw, _ := json.Marshal(map[string]any{
			"query": "sum(rate(http_requests_total[1m]))", "threshold": "0.5",
			"headers": map[string]string{"Host": strings.TrimPrefix(attacker.URL, "http://")},
		})
		es.Spec.Triggers = []elastiv1alpha1.ScaleTrigger{{Type: "prometheus", Metadata: raw}}
	})
	e.App("tenant", 1)
	e.ElastiServiceWith("tenant", "tenant", elastiv1alpha1.KindDeployment, "tenant", func(es *elastiv1alpha1.ElastiService) {
		es.Spec.CooldownPeriod = 1
		es.Spec.Triggers = triggerAt("")
	})

	condition := func(name string) *metav1.Condition {
		return meta.FindStatusCondition(e.Get(name).Status.Conditions, elastiv1alpha1.ConditionTriggersEvaluated)
	}
	// With serverAddress set, the metadata alone shows the Host header
	// names another server: the spec is refused (InvalidSpec), as every
	// invalid trigger metadata is, before any query.
	e.Eventually("hosttrick: an InvalidSpec event", func() (bool, string) { return e.HasEvent("hosttrick", controller.ReasonInvalidSpec) })
	e.Eventually("hostdefault: a TriggerError event", func() (bool, string) { return e.HasEvent("hostdefault", idle.ReasonTriggerError) })
	e.Eventually("tenant: a TriggerError event", func() (bool, string) { return e.HasEvent("tenant", idle.ReasonTriggerError) })
	e.Eventually("hostdefault: TriggersEvaluated False with InvalidMetadata", func() (bool, string) {
		c := condition("hostdefault")
		if c == nil {
			return false, fmt.Sprintf("no condition in %+v", e.Get("hostdefault").Status.Conditions)
		}
		return c.Status == metav1.ConditionFalse && c.Reason == string(triggers.ReasonInvalidMetadata), c.Reason + ": " + c.Message
	})
	e.Eventually("tenant: TriggersEvaluated False with BadStatus", func() (bool, string) {
		c := condition("tenant")
		if c == nil {
			return false, fmt.Sprintf("no condition in %+v", e.Get("tenant").Status.Conditions)
		}
		return c.Status == metav1.ConditionFalse && c.Reason == string(triggers.ReasonBadStatus), c.Reason + ": " + c.Message
	})
	// The issue measured 8 credentialed requests in 8 s; forty polls here.
	e.HoldsReplicas(elastiv1alpha1.KindDeployment, "hosttrick", 1, 8*time.Second)

	for i, h := range attacker.seen() {
		t.Errorf("request %d reached the author's server (Authorization %q)", i, h.Get("Authorization"))
	}
	if seen := def.seen(); len(seen) == 0 || seen[0].Get("Authorization") != credential {
		t.Errorf("the default server's requests %v; want the operator's credential", seen)
	}
	if c := condition("hostdefault"); !strings.Contains(c.Message, `"Host"`) {
		t.Errorf("hostdefault's condition %q does not name the Host header", c.Message)
	}
	for _, name := range []string{"hosttrick", "hostdefault"} {
		for _, reason := range []string{controller.ReasonInvalidSpec, idle.ReasonTriggerError} {
			if ok, msg := e.HasEvent(name, reason); ok && !strings.Contains(msg, "Host") {
				t.Errorf("%s's %s event %q does not name the Host header", name, reason, msg)
			}
		}
	}
	if c := condition("tenant"); !strings.Contains(c.Message, "HTTP 422") || !strings.Contains(c.Message, "(execution): many-to-many matching") {
		t.Errorf("tenant's condition %q does not give the error's status and class", c.Message)
	}

	// Let the event sink write what the last polls reported.
	time.Sleep(time.Second)
	noSecretInEvents(t, e)
	evs, err := e.Kube.CoreV1().Events(e.NS).List(e.Ctx(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{condition("tenant").Message, condition("hostdefault").Message}
	for _, ev := range evs.Items {
		texts = append(texts, ev.Message)
	}
	for _, text := range texts {
		for _, label := range otherNamespaceLabels {
			if strings.Contains(text, label) {
				t.Errorf("%q quotes another namespace's series (%s)", text, label)
			}
		}
	}
}
