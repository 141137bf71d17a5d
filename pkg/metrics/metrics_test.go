package metrics

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/prometheus/client_golang/prometheus/testutil"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/outcome"
	"github.com/elasti-dev/elasti/pkg/triggers"
)

// kubeElastiNames break Prometheus naming rules, but existing KubeElasti
// dashboards query them, so they keep their names.
var kubeElastiNames = map[string]bool{"elasti_operator_scale_counter": true}

func TestMetricsPassLintAndMove(t *testing.T) {
	m := NewOperator()
	m.ObserveWakeRequest(outcome.WakeScaled, 3*time.Millisecond)
	m.ObserveWakeRequest(outcome.WakeFailed, time.Millisecond)
	m.ObserveIdleEvaluation(outcome.IdleTriggerError, triggers.ReasonUnreachable)
	m.ObserveIdleEvaluation(outcome.IdleScaledToZero, "")
	m.ObservePoll(time.Unix(1700000000, 0), 20*time.Millisecond)
	es := types.NamespacedName{Namespace: "shop", Name: "web"}
	m.ObserveSync(2*time.Millisecond, outcome.SyncSuccess)
	m.ObserveSync(time.Millisecond, outcome.SyncRequeued)
	m.ObserveSync(time.Millisecond, outcome.SyncError)
	m.ObserveMode(es, elastiv1alpha1.ModeProxy)
	m.WakeStarted(es, time.Unix(100, 0))
	m.WakeStarted(es, time.Unix(101, 0)) // a second request during the same wake
	m.ModeSwitched(es, elastiv1alpha1.ModeServe, time.Unix(103, 0))
	m.ModeSwitched(es, elastiv1alpha1.ModeServe, time.Unix(200, 0)) // no wake pending: not a cold start
	// A wake whose end was never seen lends nothing to one an hour later.
	m.WakeStarted(es, time.Unix(1000, 0))
	m.WakeStarted(es, time.Unix(4600, 0))
	m.ModeSwitched(es, elastiv1alpha1.ModeServe, time.Unix(4602, 0))
	q := m.Queues.NewAddsMetric("elastiservice")
	q.Inc()
	m.RegisterResolverPorts(func() (int, int) { return 3, 10000 })

	problems, err := testutil.GatherAndLint(m.Registry)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if kubeElastiNames[p.Metric] {
			continue
		}
		t.Errorf("metric %s: %s", p.Metric, p.Text)
	}
	if got := testutil.ToFloat64(m.ScaleCounter.WithLabelValues("up", "success")); got != 1 {
		t.Errorf("scale up successes = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.ScaleCounter.WithLabelValues("down", "success")); got != 1 {
		t.Errorf("scale down successes = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.IdleEvaluations.WithLabelValues(string(outcome.IdleTriggerError), string(triggers.ReasonUnreachable))); got != 1 {
		t.Errorf("trigger errors = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.PollerLastRun); got != 1700000000 {
		t.Errorf("poller last run = %v", got)
	}
	if got := testutil.ToFloat64(m.Mode.WithLabelValues("shop", "web")); got != 1 {
		t.Errorf("mode gauge = %v, want 1 for proxy", got)
	}
	if n := histogramCount(t, m, "elasti_operator_cold_start_seconds"); n != 2 {
		t.Errorf("cold starts observed = %d, want 2 (each from its first request to serve)", n)
	}
	if sum := histogramSum(t, m, "elasti_operator_cold_start_seconds"); sum != 5 {
		t.Errorf("cold starts = %vs in all, want 3s + 2s", sum)
	}
	if got, err := testutil.GatherAndCount(m.Registry, "elasti_operator_resolver_ports_in_use", "elasti_operator_resolver_ports_capacity"); err != nil || got != 2 {
		t.Errorf("resolver port gauges: %d series, %v", got, err)
	}
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(`
# HELP elasti_operator_resolver_ports_in_use Resolver ports assigned to Service ports (see --resolver-port-range).
# TYPE elasti_operator_resolver_ports_in_use gauge
elasti_operator_resolver_ports_in_use 3
`), "elasti_operator_resolver_ports_in_use"); err != nil {
		t.Error(err)
	}
	for _, result := range []string{"success", "requeued", "error"} {
		if n := reconcileCount(t, m, result); n != 1 {
			t.Errorf("syncs with result %q: %d, want 1", result, n)
		}
	}
	m.ForgetElastiService(es)
	if n := testutil.CollectAndCount(m.Mode); n != 0 {
		t.Errorf("%d mode series after the ElastiService went, want 0", n)
	}
}

func histogram(t *testing.T, m *Operator, name string) *dto.Histogram {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetHistogram()
		}
	}
	t.Fatalf("no metric %s", name)
	return nil
}

// reconcileCount is how many syncs elasti_operator_reconcile counted with
// the given result.
func reconcileCount(t *testing.T, m *Operator, result string) uint64 {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "elasti_operator_reconcile" {
			continue
		}
		for _, metric := range f.GetMetric() {
			for _, l := range metric.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return metric.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return 0
}

func histogramCount(t *testing.T, m *Operator, name string) uint64 {
	return histogram(t, m, name).GetSampleCount()
}

func histogramSum(t *testing.T, m *Operator, name string) float64 {
	return histogram(t, m, name).GetSampleSum()
}

// client-go's requests reach the registry, labelled without URLs.
func TestClientGoMetrics(t *testing.T) {
	m := NewOperator()
	m.RegisterClientGoMetrics()
	apiserver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"NamespaceList","apiVersion":"v1","items":[]}`))
	}))
	defer apiserver.Close()
	cs := kubernetes.NewForConfigOrDie(&rest.Config{Host: apiserver.URL})
	if _, err := cs.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(m.clientGo.results.WithLabelValues("GET", "200")); got < 1 {
		t.Errorf("rest_client_requests_total{method=GET,code=200} = %v, want >= 1", got)
	}
	if n := testutil.CollectAndCount(m.clientGo.latency); n != 1 {
		t.Errorf("rest_client_request_duration_seconds has %d series, want 1", n)
	}
	if got := histogramCount(t, m, `rest_client_request_duration_seconds`); got < 1 {
		t.Errorf("rest_client_request_duration_seconds counted %d, want >= 1", got)
	}
	problems, err := testutil.GatherAndLint(m.Registry, "rest_client_requests_total", "rest_client_request_duration_seconds")
	if err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", err, problems)
	}
}

// The resource label is the path's resource when the operator's role names
// it, and "other" for everything else, so a path never makes a series of
// its own.
func TestResourceOfARequestPath(t *testing.T) {
	for path, want := range map[string]string{
		"/api/v1/namespaces/t-1/services/web":                "services",
		"/api/v1/namespaces/t-1/services":                    "services",
		"/api/v1/services":                                   "services",
		"/api/v1/namespaces":                                 "other",
		"/api/v1/namespaces/t-1":                             "other",
		"/apis/apps/v1/namespaces/t-1/deployments/web/scale": "deployments/scale",
		"/apis/apps/v1/namespaces/t-1/deployments/web":       "deployments",
		"/apis/elasti.truefoundry.com/v1alpha1/namespaces/t-1/elastiservices/a/status": "elastiservices/status",
		"/apis/discovery.k8s.io/v1/namespaces/t-1/endpointslices":                      "endpointslices",
		"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/rollouts.argoproj.io": "customresourcedefinitions",
		"/apis/coordination.k8s.io/v1/namespaces/elasti/leases/elasti-operator":        "leases",
		"/api/v1/namespaces/t-1/secrets/s":                                             "other",
		"/api/v1/namespaces/t-1/services/web/proxy":                                    "other",
		"/api/v1/namespaces/t-1/Services/web":                                          "other",
		"/apis/apps/v1/namespaces/t-1/deployments/web%2Fscale":                         "deployments", // a name, not a subresource
		"/apis":    "other",
		"/version": "other",
		"":         "other",
		"/api/v1/namespaces/t-1/services/web/status/extra": "other",
	} {
		if got := resourceOf(path); got != want {
			t.Errorf("resourceOf(%q) = %q, want %q", path, got, want)
		}
	}
}
