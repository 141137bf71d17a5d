package operator_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	coordinationv1 "k8s.io/api/coordination/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/idle"
	"github.com/elasti-dev/elasti/pkg/operator"
	"github.com/elasti-dev/elasti/pkg/outcome"
	"github.com/elasti-dev/elasti/pkg/scaletarget"
	"github.com/elasti-dev/elasti/pkg/triggers"
	"github.com/elasti-dev/elasti/pkg/wakeserver"
	"github.com/elasti-dev/elasti/test/install"
	"github.com/elasti-dev/elasti/test/localcluster/clustertest"
	"github.com/elasti-dev/elasti/test/testenv"
)

// startScaling starts an operator that polls fast, with its scale endpoint
// on a loopback server.
func startScaling(e *testenv.Env, prom *testenv.FakePrometheus) string {
	e.T.Helper()
	e.Opts.PollingInterval = 200 * time.Millisecond
	e.Opts.QueryTimeout = time.Second
	if prom != nil {
		e.Opts.PrometheusServerAddress = prom.URL
	}
	op := e.StartOperatorReturning()
	srv := httptest.NewServer(op.WakeServer.Handler())
	e.T.Cleanup(srv.Close)
	return srv.URL + wakeserver.Path
}

func TestIdleScalesToZeroThenARequestWakesIt(t *testing.T) {
	t.Parallel()
	const cooldownSeconds = 4
	const cooldown = cooldownSeconds * time.Second
	e := testenv.New(t)
	prom := testenv.NewFakePrometheus(t)
	scaleURL := startScaling(e, prom)
	e.Resolver(1)
	e.App("web", 2)
	e.ElastiServiceWith("web", "web", elastiv1alpha1.KindDeployment, "web", func(es *elastiv1alpha1.ElastiService) {
		es.Spec.CooldownPeriod = cooldownSeconds
		es.Spec.Triggers = testenv.IdleTrigger("0.5")
	})
	// Younger than the cooldown: nothing happens yet.
	e.HoldsReplicas(elastiv1alpha1.KindDeployment, "web", 2, time.Second)
	e.WaitReplicas(elastiv1alpha1.KindDeployment, "web", 0)
	e.WaitMode("web", elastiv1alpha1.ModeProxy)
	e.Eventually("a ScaledToZero event", func() (bool, string) { return e.HasEvent("web", idle.ReasonScaledToZero) })

	// KubeElasti's resolver request, byte for byte.
	wokeAt := time.Now()
	code, body := testenv.Post(t, scaleURL, testenv.WakeBody("web", e.NS))
	if code != http.StatusOK || !strings.Contains(body, string(outcome.WakeScaled)) {
		t.Fatalf("wake: %d %s", code, body)
	}
	if got := e.Replicas(elastiv1alpha1.KindDeployment, "web"); got != 2 {
		t.Fatalf("the 200 came before the scale write: replicas %d", got)
	}
	e.WaitMode("web", elastiv1alpha1.ModeServe)
	e.Eventually("lastScaledUpTime recorded", func() (bool, string) {
		es := e.Get("web")
		return es.Status.LastScaledUpTime != nil, fmt.Sprintf("%v", es.Status.LastScaledUpTime)
	})

	// The key series moved.
	m := e.LastOperator.Metrics
	for name, got := range map[string]float64{
		"scale up":               testutil.ToFloat64(m.ScaleCounter.WithLabelValues("up", "success")),
		"scale down":             testutil.ToFloat64(m.ScaleCounter.WithLabelValues("down", "success")),
		"scaled_to_zero verdict": testutil.ToFloat64(m.IdleEvaluations.WithLabelValues(string(outcome.IdleScaledToZero), "")),
		"poller last run":        testutil.ToFloat64(m.PollerLastRun),
		"queue adds":             testutil.ToFloat64(m.Queues.NewAddsMetric("elastiservice").(prometheus.Counter)),
	} {
		if got < 1 {
			t.Errorf("%s metric = %v, want it to have moved", name, got)
		}
	}
	for _, name := range []string{"elasti_operator_cold_start_seconds", "elasti_operator_reconcile", "elasti_operator_scale_request_duration_seconds"} {
		if n, err := testutil.GatherAndCount(m.Registry, name); err != nil || n == 0 {
			t.Errorf("%s has no samples (%v)", name, err)
		}
	}

	// The cooldown counts from the wake: still idle, but it stays up...
	e.HoldsReplicas(elastiv1alpha1.KindDeployment, "web", 2, time.Until(wokeAt.Add(cooldown-500*time.Millisecond)))
	// ...until the cooldown has passed.
	e.WaitReplicas(elastiv1alpha1.KindDeployment, "web", 0)
}

// A target scaled up from zero by hand, as a person or a CI job pre-warms a
// service, gets the cooldown a wake gets: its triggers stay idle, yet it
// stays up until the cooldown has passed, and only then goes back to zero.
func TestScaleUpFromZeroByHandStartsTheCooldown(t *testing.T) {
	t.Parallel()
	const cooldownSeconds = 4
	const cooldown = cooldownSeconds * time.Second
	e := testenv.New(t)
	prom := testenv.NewFakePrometheus(t)
	startScaling(e, prom)
	e.Resolver(1)
	e.App("web", 2)
	e.ElastiServiceWith("web", "web", elastiv1alpha1.KindDeployment, "web", func(es *elastiv1alpha1.ElastiService) {
		es.Spec.CooldownPeriod = cooldownSeconds
		es.Spec.Triggers = testenv.IdleTrigger("0.5")
	})
	e.WaitReplicas(elastiv1alpha1.KindDeployment, "web", 0)
	e.WaitMode("web", elastiv1alpha1.ModeProxy)

	// kubectl scale --replicas=1, with the triggers still idle.
	scaledAt := time.Now()
	e.Scale(elastiv1alpha1.KindDeployment, "web", 1)
	e.HoldsReplicas(elastiv1alpha1.KindDeployment, "web", 1, time.Until(scaledAt.Add(cooldown-500*time.Millisecond)))
	// The cooldown's start is in status, for the next leader, as a wake's is.
	es := e.Get("web")
	if last := es.Status.LastScaledUpTime; last == nil || last.Time.Before(scaledAt.Truncate(time.Second)) {
		t.Errorf("lastScaledUpTime = %v, want the scale-up at %s", last, scaledAt.Format(time.RFC3339))
	}
	// After the cooldown, still idle: back to zero.
	e.WaitReplicas(elastiv1alpha1.KindDeployment, "web", 0)
}

func TestConcurrentRequestsCoalesceIntoOneScaleWrite(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	scaleURL := startScaling(e, nil)
	e.Resolver(1)
	e.Fronted("web", 0)

	const n = 1000
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	var wg sync.WaitGroup
	var ok, bad atomic.Int64
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			resp, err := client.Post(scaleURL, "application/json", strings.NewReader(testenv.WakeBody("web", e.NS)))
			if err != nil {
				bad.Add(1)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				ok.Add(1)
			} else {
				bad.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	if ok.Load() != n {
		t.Fatalf("%d of %d requests answered 200 (%d failed)", ok.Load(), n, bad.Load())
	}
	e.WaitMode("web", elastiv1alpha1.ModeServe)
	writes := testenv.CountScaleWrites(t, e.NS, "deployments", "web")
	t.Logf("%d concurrent requests caused %d scale writes", n, writes)
	if writes < 1 || writes > 2 {
		t.Errorf("%d concurrent requests caused %d scale writes; want 1 (at most 2)", n, writes)
	}
}

func TestNoScaleDownWhenTriggersFail(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	prom := testenv.NewFakePrometheus(t)
	// Failing from the start: an idle answer before the loop below picks
	// a failure mode would rightly scale a target down.
	prom.Set("0", "1", testenv.PrometheusServerDown)
	// A closed server: Prometheus unreachable.
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	startScaling(e, prom)
	op := e.LastOperator
	e.Resolver(1)
	cases := []struct{ name, mode, value, up, server string }{
		{"unreachable", "", "0", "1", deadURL},
		{"garbage", testenv.PrometheusGarbage, "0", "1", ""},
		{"two-series", testenv.PrometheusTwoSeries, "0", "1", ""},
		{"server-error", testenv.PrometheusServerDown, "0", "1", ""},
		{"prometheus-was-down", "", "0", "0", ""},
		{"nan", "", "NaN", "1", ""},
	}
	for _, c := range cases {
		name := "svc-" + c.name
		e.App(name, 1)
		e.ElastiServiceWith(name, name, elastiv1alpha1.KindDeployment, name, func(es *elastiv1alpha1.ElastiService) {
			es.Spec.CooldownPeriod = 1
			md := map[string]string{"query": "q-" + c.name, "threshold": "1"}
			if c.server != "" {
				md["serverAddress"] = c.server
			}
			raw, _ := json.Marshal(md)
			es.Spec.Triggers = []elastiv1alpha1.ScaleTrigger{{Type: "prometheus", Metadata: raw}}
		})
	}
	// The fake answers per mode for every query, so run the modes one at a
	// time; the unreachable case fails on its own address throughout.
	for _, c := range cases[1:] {
		prom.Set(c.value, c.up, c.mode)
		name := "svc-" + c.name
		e.Eventually(name+": a TriggerError event", func() (bool, string) { return e.HasEvent(name, idle.ReasonTriggerError) })
		e.HoldsReplicas(elastiv1alpha1.KindDeployment, name, 1, 600*time.Millisecond)
	}
	e.Eventually("svc-unreachable: a TriggerError event", func() (bool, string) { return e.HasEvent("svc-unreachable", idle.ReasonTriggerError) })
	for _, c := range cases {
		if got := e.Replicas(elastiv1alpha1.KindDeployment, "svc-"+c.name); got != 1 {
			t.Errorf("%s: scaled to %d on an error", c.name, got)
		}
	}
	// Every failure reached the metric with a bounded reason.
	for _, reason := range []triggers.Reason{triggers.ReasonUnreachable, triggers.ReasonBadResponse, triggers.ReasonMultipleSeries,
		triggers.ReasonBadStatus, triggers.ReasonPrometheusDown, triggers.ReasonNotFinite} {
		if got := testutil.ToFloat64(op.Metrics.IdleEvaluations.WithLabelValues(string(outcome.IdleTriggerError), string(reason))); got < 1 {
			t.Errorf("trigger errors with reason %s = %v, want at least 1", reason, got)
		}
	}
	// Control: with a healthy, idle Prometheus the same setup does scale down.
	prom.Set("0", "1", "")
	e.WaitReplicas(elastiv1alpha1.KindDeployment, "svc-garbage", 0)
}

func TestOutsideEnabledPeriodKeepsTheTargetUp(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	prom := testenv.NewFakePrometheus(t)
	startScaling(e, prom)
	e.Resolver(1)
	e.App("web", 0)
	// A window that opens at midnight on 1 January only: not now.
	closed := time.Now().UTC()
	schedule := "0 0 1 1 *"
	if closed.Month() == time.January && closed.Day() == 1 {
		schedule = "0 0 1 7 *"
	}
	e.ElastiServiceWith("web", "web", elastiv1alpha1.KindDeployment, "web", func(es *elastiv1alpha1.ElastiService) {
		es.Spec.CooldownPeriod = 1
		es.Spec.Triggers = testenv.IdleTrigger("1")
		es.Spec.EnabledPeriod = &elastiv1alpha1.EnabledPeriod{Schedule: schedule, Duration: "1h"}
	})
	e.WaitReplicas(elastiv1alpha1.KindDeployment, "web", 2)
	e.Eventually("a ScaledUpOutsideEnabledPeriod event", func() (bool, string) {
		return e.HasEvent("web", idle.ReasonOutsideEnabledRange)
	})
	e.HoldsReplicas(elastiv1alpha1.KindDeployment, "web", 2, time.Second)
}

var scaledObjectCRD = &apiextensionsv1.CustomResourceDefinition{
	ObjectMeta: metav1.ObjectMeta{Name: "scaledobjects.keda.sh"},
	Spec: apiextensionsv1.CustomResourceDefinitionSpec{
		Group: "keda.sh",
		Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "scaledobjects", Singular: "scaledobject", Kind: "ScaledObject", ListKind: "ScaledObjectList"},
		Scope: apiextensionsv1.NamespaceScoped,
		Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
			Name: "v1alpha1", Served: true, Storage: true,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}},
		}},
	},
}

func TestKEDAIsPausedForZeroAndResumedOnWake(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	cfg := clustertest.Get(t).RESTConfig()
	if err := install.ApplyCRDs(e.Ctx(), cfg, scaledObjectCRD.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(cfg)
	soGVR := schema.GroupVersionResource{Group: "keda.sh", Version: "v1alpha1", Resource: "scaledobjects"}
	so := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
		"metadata": map[string]any{"name": "web-so", "namespace": e.NS},
		"spec":     map[string]any{"scaleTargetRef": map[string]any{"name": "web"}},
	}}
	if _, err := dyn.Resource(soGVR).Namespace(e.NS).Create(e.Ctx(), so, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	annotations := func() map[string]string {
		got, err := dyn.Resource(soGVR).Namespace(e.NS).Get(e.Ctx(), "web-so", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got.GetAnnotations()
	}

	prom := testenv.NewFakePrometheus(t)
	scaleURL := startScaling(e, prom)
	e.Resolver(1)
	e.App("web", 1)
	e.ElastiServiceWith("web", "web", elastiv1alpha1.KindDeployment, "web", func(es *elastiv1alpha1.ElastiService) {
		es.Spec.CooldownPeriod = 1
		es.Spec.Triggers = testenv.IdleTrigger("1")
		es.Spec.Autoscaler = &elastiv1alpha1.AutoscalerSpec{Type: "keda", Name: "web-so"}
	})
	e.WaitReplicas(elastiv1alpha1.KindDeployment, "web", 0)
	a := annotations()
	if a[scaletarget.KEDAPausedAnnotation] != "true" || a[scaletarget.KEDAPausedReplicasAnnotation] != "0" {
		t.Fatalf("after scale-to-zero the ScaledObject annotations are %v; want paused=true and paused-replicas=0", a)
	}

	prom.Set("5", "1", "") // busy from now on, so it stays awake
	if code, body := testenv.Post(t, scaleURL, testenv.WakeBody("web", e.NS)); code != http.StatusOK {
		t.Fatalf("wake: %d %s", code, body)
	}
	a = annotations()
	if a[scaletarget.KEDAPausedAnnotation] != "false" {
		t.Errorf("after wake paused = %q, want false", a[scaletarget.KEDAPausedAnnotation])
	}
	if _, ok := a[scaletarget.KEDAPausedReplicasAnnotation]; ok {
		t.Errorf("after wake paused-replicas is still set: %v", a)
	}
}

func TestStatefulSetWakesThroughTheEndpoint(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	scaleURL := startScaling(e, nil)
	e.Resolver(1)
	e.StatefulSet("db", 0)
	e.Service("db", "db")
	e.ElastiService("db", "db", elastiv1alpha1.KindStatefulSet, "db")
	e.WaitMode("db", elastiv1alpha1.ModeProxy)
	if code, body := testenv.Post(t, scaleURL, testenv.WakeBody("db", e.NS)); code != http.StatusOK {
		t.Fatalf("wake: %d %s", code, body)
	}
	e.WaitReplicas(elastiv1alpha1.KindStatefulSet, "db", 2)
	e.WaitMode("db", elastiv1alpha1.ModeServe)
}

func TestBadScaleRequestsGetClearCodes(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	scaleURL := startScaling(e, nil)
	e.Resolver(1)
	e.Fronted("web", 0)

	cases := []struct {
		name, method, body string
		code               int
		want               string
	}{
		{"malformed JSON", "POST", `{"svc":`, http.StatusBadRequest, "malformed JSON"},
		{"not an object", "POST", `[1,2]`, http.StatusBadRequest, "malformed JSON"},
		{"missing svc", "POST", `{"count":1,"namespace":"` + e.NS + `"}`, http.StatusBadRequest, `"svc" is required`},
		{"missing namespace", "POST", `{"count":1,"svc":"web"}`, http.StatusBadRequest, `"namespace" is required`},
		{"bad name", "POST", `{"count":1,"svc":"Web_1","namespace":"` + e.NS + `"}`, http.StatusBadRequest, "is not a Service name"},
		{"oversized", "POST", `{"count":1,"svc":"web","namespace":"` + e.NS + `","pad":"` + strings.Repeat("x", 10000) + `"}`, http.StatusRequestEntityTooLarge, "too large"},
		{"GET", "GET", "", http.StatusMethodNotAllowed, "POST"},
		{"PUT", "PUT", testenv.WakeBody("web", e.NS), http.StatusMethodNotAllowed, "POST"},
		{"unknown service", "POST", testenv.WakeBody("nope", e.NS), http.StatusNotFound, "nope"},
	}
	for _, c := range cases {
		req, err := http.NewRequest(c.method, scaleURL, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var got struct{ Outcome, Message string }
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if err != nil || resp.StatusCode != c.code || !strings.Contains(got.Message, c.want) {
			t.Errorf("%s: %d %+v (decode: %v); want %d with a message containing %q", c.name, resp.StatusCode, got, err, c.code, c.want)
		}
	}
	if got := e.Replicas(elastiv1alpha1.KindDeployment, "web"); got != 0 {
		t.Errorf("bad requests scaled the target to %d", got)
	}
}

// A follower answers 503 and never scales.
func TestFollowerAnswers503(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Resolver(1)
	e.App("web", 0)
	e.ElastiService("web", "web", elastiv1alpha1.KindDeployment, "web")
	// Started as the binary is with --leader-elect, on a Lease another
	// replica holds for an hour: this one stays a follower.
	const leaseName = "elasti-operator-leader"
	held := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: leaseName, Namespace: e.NS},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To("another-replica"),
			LeaseDurationSeconds: ptr.To[int32](3600),
			AcquireTime:          &metav1.MicroTime{Time: time.Now()},
			RenewTime:            &metav1.MicroTime{Time: time.Now()},
		},
	}
	if _, err := e.Kube.CoordinationV1().Leases(e.NS).Create(e.Ctx(), held, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	lock, err := operator.NewLeaseLock(clustertest.Get(t).RESTConfig(), e.NS, leaseName, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	op := e.StartOperatorWith(&operator.Election{
		Lock: lock, LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
	})
	srv := httptest.NewServer(op.WakeServer.Handler())
	defer srv.Close()
	code, body := testenv.Post(t, srv.URL+wakeserver.Path, testenv.WakeBody("web", e.NS))
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "not the leader") {
		t.Errorf("follower answered %d %s, want 503", code, body)
	}
	if got := e.Replicas(elastiv1alpha1.KindDeployment, "web"); got != 0 {
		t.Errorf("a follower scaled the target to %d", got)
	}
}
