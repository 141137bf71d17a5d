package operator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/outcome"
	"github.com/elasti-dev/elasti/test/localcluster"
	"github.com/elasti-dev/elasti/test/localcluster/clustertest"
	"github.com/elasti-dev/elasti/test/testenv"
)

// These tests run the real HPA controller of the local control plane
// (kube-controller-manager's horizontal-pod-autoscaler-controller, with
// the HPAScaleToZero gate and a sync period of localcluster.HPASyncPeriod)
// next to elasti, on a real HPA object.

// hpaPasses is long enough for the HPA controller to have looked at an HPA
// a few times.
const hpaPasses = 3 * localcluster.HPASyncPeriod

// hpaScaleDownBound is how long a Service may be dark after the HPA scales
// its target to zero: the HPA's next pass, then the allowance every scale
// to zero elasti did not make gets (test/e2e/traffic's handScaleDownBound),
// since only elasti's own scale-down can put the resolver in front first.
const hpaScaleDownBound = localcluster.HPASyncPeriod + 3*time.Second

func createHPA(e *testenv.Env, hpa *autoscalingv2.HorizontalPodAutoscaler) {
	e.T.Helper()
	hpa.Namespace = e.NS
	if _, err := e.Kube.AutoscalingV2().HorizontalPodAutoscalers(e.NS).Create(e.Ctx(), hpa, metav1.CreateOptions{}); err != nil {
		e.T.Fatalf("create HPA %s: %v", hpa.Name, err)
	}
}

func hpaOf(target string, minReplicas, maxReplicas int32, metric autoscalingv2.MetricSpec) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: target},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: elastiv1alpha1.KindDeployment, Name: target},
			MinReplicas:    ptr.To(minReplicas),
			MaxReplicas:    maxReplicas,
			Metrics:        []autoscalingv2.MetricSpec{metric},
		},
	}
}

// cpuMetric is a resource metric: the bed has no metrics API, so the HPA
// never has its value and only holds the target inside its bounds.
var cpuMetric = autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
	Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)},
}}

// hpaCondition reports the HPA's condition of type cond: its status and
// reason, and all its conditions for a failure message.
func hpaCondition(e *testenv.Env, name string, cond autoscalingv2.HorizontalPodAutoscalerConditionType) (status corev1.ConditionStatus, reason, all string) {
	e.T.Helper()
	hpa, err := e.Kube.AutoscalingV2().HorizontalPodAutoscalers(e.NS).Get(e.Ctx(), name, metav1.GetOptions{})
	if err != nil {
		return "", "", err.Error()
	}
	var seen []string
	for _, c := range hpa.Status.Conditions {
		seen = append(seen, fmt.Sprintf("%s=%s(%s)", c.Type, c.Status, c.Reason))
		if c.Type == cond {
			status, reason = c.Status, c.Reason
		}
	}
	return status, reason, strings.Join(seen, " ")
}

func waitHPACondition(e *testenv.Env, name string, cond autoscalingv2.HorizontalPodAutoscalerConditionType, status corev1.ConditionStatus, reason string) {
	e.T.Helper()
	e.Eventually(fmt.Sprintf("HPA %s %s=%s (%s)", name, cond, status, reason), func() (bool, string) {
		s, r, all := hpaCondition(e, name, cond)
		return s == status && r == reason, all
	})
}

// An HPA with minReplicas 2 owns a target elasti sleeps and wakes. At zero
// the HPA disables itself and never scales the target back up; a wake
// scales straight to the HPA's minimum, and above zero the HPA decides:
// it raises the target to a new minimum, elasti leaves that alone, and the
// next sleep is still elasti's.
func TestHPAOwnsTheTargetAboveZero(t *testing.T) {
	t.Parallel()
	// Between the wake and the HPA's raise the triggers read busy, so
	// the raise never races elasti's next sleep: on a loaded machine the
	// HPA controller took longer than a 10 s cooldown (CI, 3 Dec 2026),
	// the target was asleep again and the HPA, at zero, never raised it.
	const cooldownSeconds = 10
	e := testenv.New(t)
	prom := testenv.NewFakePrometheus(t)
	scaleURL := startScaling(e, prom)
	e.Resolver(1)
	e.App("web", 2)
	createHPA(e, hpaOf("web", 2, 4, cpuMetric))
	// Watched from when its pods and the resolver's serve.
	e.Eventually("web's and the resolver's pods ready", func() (bool, string) {
		web, resolver := e.ReadyPodIPs("web"), e.ReadyPodIPs(testenv.ResolverName)
		return len(web) == 2 && len(resolver) == 1, fmt.Sprint(web, resolver)
	})
	e.ElastiServiceWith("web", "web", elastiv1alpha1.KindDeployment, "web", func(es *elastiv1alpha1.ElastiService) {
		es.Spec.MinTargetReplicas = 1 // below the HPA's minimum
		es.Spec.CooldownPeriod = cooldownSeconds
		es.Spec.Triggers = testenv.IdleTrigger("0.5")
		es.Spec.Autoscaler = &elastiv1alpha1.AutoscalerSpec{Type: elastiv1alpha1.AutoscalerTypeHPA, Name: "web"}
	})
	e.WaitMode("web", elastiv1alpha1.ModeServe)
	// Every scale to zero here is elasti's, make before break: web is
	// never dark.
	e.WatchDark("web")
	waitHPAFound(e, "web", metav1.ConditionTrue, elastiv1alpha1.ReasonHPAOwnsTarget)

	// elasti's sleep: the HPA looks at the target at zero, disables itself
	// and leaves it there.
	e.WaitReplicas(elastiv1alpha1.KindDeployment, "web", 0)
	e.WaitMode("web", elastiv1alpha1.ModeProxy)
	waitHPACondition(e, "web", autoscalingv2.ScalingActive, corev1.ConditionFalse, "ScalingDisabled")
	e.HoldsReplicas(elastiv1alpha1.KindDeployment, "web", 0, hpaPasses)

	// A request wakes it to the HPA's minimum, 2, not minTargetReplicas 1:
	// the scale write that answered the request already has it.
	prom.Set("10", "1", testenv.PrometheusHealthy) // busy until the HPA has decided
	code, body := testenv.Post(t, scaleURL, testenv.WakeBody("web", e.NS))
	if code != http.StatusOK || !strings.Contains(body, string(outcome.WakeScaled)) || !strings.Contains(body, "to 2 replicas") {
		t.Fatalf("wake: %d %s; want it scaled to the HPA's minimum 2", code, body)
	}
	if got := e.Replicas(elastiv1alpha1.KindDeployment, "web"); got != 2 {
		t.Fatalf("after the wake: %d replicas, want the HPA's minimum 2", got)
	}
	e.WaitMode("web", elastiv1alpha1.ModeServe)

	// Above zero the HPA decides: it raises the target to its new minimum
	// and elasti, asked to wake again, leaves the count alone.
	if _, err := e.Kube.AutoscalingV2().HorizontalPodAutoscalers(e.NS).Patch(e.Ctx(), "web", types.MergePatchType,
		[]byte(`{"spec":{"minReplicas":3}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.WaitReplicas(elastiv1alpha1.KindDeployment, "web", 3)
	code, body = testenv.Post(t, scaleURL, testenv.WakeBody("web", e.NS))
	if code != http.StatusOK || !strings.Contains(body, string(outcome.WakeAlreadyUp)) {
		t.Fatalf("wake of a target the HPA holds at 3: %d %s; want already up", code, body)
	}
	e.HoldsReplicas(elastiv1alpha1.KindDeployment, "web", 3, time.Second)

	// The cooldown passes with the triggers idle: elasti sleeps it again,
	// whatever the HPA's minimum, and the HPA leaves it at zero.
	prom.Set("0", "1", testenv.PrometheusHealthy)
	e.WaitReplicas(elastiv1alpha1.KindDeployment, "web", 0)
	e.WaitMode("web", elastiv1alpha1.ModeProxy)
	e.HoldsReplicas(elastiv1alpha1.KindDeployment, "web", 0, hpaPasses)
}

// externalMetrics serves the external metrics API on loopback, as a
// metrics adapter (KEDA's, prometheus-adapter) would: every metric of every
// namespace has the value set last. The apiserver reaches it through an
// APIService and an ExternalName Service naming 127.0.0.1, so nothing
// leaves loopback.
type externalMetrics struct {
	value atomic.Int64
}

func (m *externalMetrics) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	const gv = "external.metrics.k8s.io/v1beta1"
	switch {
	case r.URL.Path == "/apis/"+gv:
		_ = json.NewEncoder(w).Encode(metav1.APIResourceList{
			TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: gv,
			APIResources: []metav1.APIResource{{Name: "*", Namespaced: true, Kind: "ExternalMetricValueList", Verbs: []string{"get"}}},
		})
	case strings.HasPrefix(r.URL.Path, "/apis/"+gv+"/namespaces/"):
		name := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		fmt.Fprintf(w, `{"kind":"ExternalMetricValueList","apiVersion":"%s","metadata":{},"items":[{"metricName":%q,"metricLabels":{},"timestamp":%q,"value":%q}]}`,
			gv, name, time.Now().UTC().Format(time.RFC3339), strconv.FormatInt(m.value.Load(), 10))
	default:
		http.NotFound(w, r)
	}
}

// serveExternalMetrics registers m as the cluster's external metrics API
// until the test ends. An APIService is cluster-wide: only one test may
// use it, and it goes before the server does, so no client's discovery
// meets an APIService that does not answer.
func serveExternalMetrics(e *testenv.Env, m *externalMetrics) {
	e.T.Helper()
	srv := httptest.NewTLSServer(m)
	e.T.Cleanup(srv.Close)
	host, port, err := net.SplitHostPort(strings.TrimPrefix(srv.URL, "https://"))
	if err != nil {
		e.T.Fatal(err)
	}
	portNum, _ := strconv.Atoi(port)
	if _, err := e.Kube.CoreV1().Services(e.NS).Create(e.Ctx(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "external-metrics"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: host},
	}, metav1.CreateOptions{}); err != nil {
		e.T.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(clustertest.Get(e.T).RESTConfig())
	gvr := schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
	const name = "v1beta1.external.metrics.k8s.io"
	svc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"group": "external.metrics.k8s.io", "version": "v1beta1",
			"service":               map[string]any{"namespace": e.NS, "name": "external-metrics", "port": int64(portNum)},
			"insecureSkipTLSVerify": true,
			"groupPriorityMinimum":  int64(100), "versionPriority": int64(100),
		},
	}}
	if _, err := dyn.Resource(gvr).Create(e.Ctx(), svc, metav1.CreateOptions{}); err != nil {
		e.T.Fatalf("create APIService %s: %v", name, err)
	}
	e.T.Cleanup(func() {
		// The test's context is done by now.
		if err := dyn.Resource(gvr).Delete(context.WithoutCancel(e.T.Context()), name, metav1.DeleteOptions{}); err != nil {
			e.T.Errorf("delete APIService %s: %v", name, err)
		}
	})
	e.Eventually("the external metrics API to be available", func() (bool, string) {
		obj, err := dyn.Resource(gvr).Get(e.Ctx(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
		for _, c := range conds {
			if c, ok := c.(map[string]any); ok && c["type"] == "Available" {
				return c["status"] == "True", fmt.Sprint(c["reason"], ": ", c["message"])
			}
		}
		return false, "no Available condition"
	})
}

// An HPA with minReplicas 0 (the HPAScaleToZero gate) and an External
// metric owns the target. It scales the target to zero itself when the
// metric says so: elasti did not make that scale-down, puts the resolver in
// front within the bound any foreign scale-down gets, and does not fight
// it. A request wakes the target; with the metric at zero again the HPA
// scales it back down, and elasti leaves it down. When the metric rises the
// HPA scales it up from zero itself, and elasti serves from its pods.
func TestHPAScalesToZeroWithMinReplicasZero(t *testing.T) {
	// The external metrics APIService is the cluster's; no other test
	// registers one.
	t.Parallel()
	e := testenv.New(t)
	metrics := &externalMetrics{}
	metrics.value.Store(1)
	serveExternalMetrics(e, metrics)
	prom := testenv.NewFakePrometheus(t)
	// Busy for elasti's own triggers: every scale to zero here is the HPA's.
	prom.Set("10", "1", testenv.PrometheusHealthy)
	scaleURL := startScaling(e, prom)
	e.Resolver(1)
	e.App("web", 1)
	hpa := hpaOf("web", 0, 3, autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: "web_requests_in_flight"},
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: resource.NewQuantity(1, resource.DecimalSI)},
	}})
	// The default 5-minute scale-down stabilization would hold the target
	// up for the whole test.
	hpa.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0)}}
	createHPA(e, hpa) // refused unless the apiserver runs with HPAScaleToZero
	e.ElastiServiceWith("web", "web", elastiv1alpha1.KindDeployment, "web", func(es *elastiv1alpha1.ElastiService) {
		es.Spec.MinTargetReplicas = 1
		es.Spec.CooldownPeriod = 1
		es.Spec.Triggers = testenv.IdleTrigger("0.5")
		es.Spec.Autoscaler = &elastiv1alpha1.AutoscalerSpec{Type: elastiv1alpha1.AutoscalerTypeHPA, Name: "web"}
	})
	e.WaitMode("web", elastiv1alpha1.ModeServe)
	waitHPACondition(e, "web", autoscalingv2.ScalingActive, corev1.ConditionTrue, "ValidMetricFound")
	e.Eventually("the resolver's pod ready", func() (bool, string) {
		ips := e.ReadyPodIPs(testenv.ResolverName)
		return len(ips) == 1, fmt.Sprint(ips)
	})
	dark := e.WatchDark("web")

	// The metric drops: the HPA scales the target to zero, and elasti puts
	// the resolver in front.
	dark.Tolerate(hpaScaleDownBound)
	metrics.value.Store(0)
	e.WaitReplicas(elastiv1alpha1.KindDeployment, "web", 0)
	waitHPACondition(e, "web", autoscalingv2.ScaledToZero, corev1.ConditionTrue, "ScaledToZero")
	e.WaitMode("web", elastiv1alpha1.ModeProxy)
	if _, err := e.ResolverSlice("web"); err != nil {
		t.Fatalf("the HPA's scale to zero left web without the resolver slice: %v", err)
	}

	// A request wakes it, to minTargetReplicas 1 (the HPA's minimum is 0);
	// the metric then sees the demand and the HPA keeps it up.
	code, body := testenv.Post(t, scaleURL, testenv.WakeBody("web", e.NS))
	if code != http.StatusOK || !strings.Contains(body, string(outcome.WakeScaled)) || !strings.Contains(body, "to 1 replicas") {
		t.Fatalf("wake: %d %s; want it scaled to minTargetReplicas 1", code, body)
	}
	metrics.value.Store(1)
	e.WaitMode("web", elastiv1alpha1.ModeServe)
	e.HoldsReplicas(elastiv1alpha1.KindDeployment, "web", 1, hpaPasses)

	// The metric drops again: the HPA scales the target back down, and
	// elasti, with no request, leaves it at zero behind the resolver.
	dark.Tolerate(hpaScaleDownBound)
	metrics.value.Store(0)
	e.WaitReplicas(elastiv1alpha1.KindDeployment, "web", 0)
	e.WaitMode("web", elastiv1alpha1.ModeProxy)
	e.HoldsReplicas(elastiv1alpha1.KindDeployment, "web", 0, hpaPasses)

	// The metric rises: the HPA scales up from zero itself (it made this
	// zero), to 2 for a value of 2, and elasti serves from the pods.
	before := e.Get("web").Status.Wakes
	metrics.value.Store(2)
	e.WaitReplicas(elastiv1alpha1.KindDeployment, "web", 2)
	e.WaitMode("web", elastiv1alpha1.ModeServe)
	e.Eventually("the HPA's scale-up from zero counted as a wake", func() (bool, string) {
		w := e.Get("web").Status.Wakes
		return w > before, fmt.Sprintf("wakes %d, before %d", w, before)
	})
}

// waitHPAFound waits for the ElastiService's HPAFound condition.
func waitHPAFound(e *testenv.Env, name string, status metav1.ConditionStatus, reason string) {
	e.T.Helper()
	e.Eventually(fmt.Sprintf("%s HPAFound=%s (%s)", name, status, reason), func() (bool, string) {
		for _, c := range e.Get(name).Status.Conditions {
			if c.Type == elastiv1alpha1.ConditionHPAFound {
				return c.Status == status && c.Reason == reason, fmt.Sprintf("%s (%s): %s", c.Status, c.Reason, c.Message)
			}
		}
		return false, "no HPAFound condition"
	})
}

// The HPAFound condition says whether the HPA spec.autoscaler names scales
// the target: missing, an HPA of another workload, then the right one.
func TestHPAFoundCondition(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	prom := testenv.NewFakePrometheus(t)
	prom.Set("10", "1", testenv.PrometheusHealthy) // busy: no sleep here
	startScaling(e, prom)
	e.Resolver(1)
	e.App("web", 1)
	e.ElastiServiceWith("web", "web", elastiv1alpha1.KindDeployment, "web", func(es *elastiv1alpha1.ElastiService) {
		es.Spec.Triggers = testenv.IdleTrigger("0.5")
		es.Spec.Autoscaler = &elastiv1alpha1.AutoscalerSpec{Type: elastiv1alpha1.AutoscalerTypeHPA, Name: "web-hpa"}
	})
	waitHPAFound(e, "web", metav1.ConditionFalse, elastiv1alpha1.ReasonHPANotFound)

	e.Deployment("api", 1, nil)
	hpa := hpaOf("api", 1, 3, cpuMetric)
	hpa.Name = "web-hpa"
	createHPA(e, hpa)
	waitHPAFound(e, "web", metav1.ConditionFalse, elastiv1alpha1.ReasonHPAScalesAnotherTarget)

	if _, err := e.Kube.AutoscalingV2().HorizontalPodAutoscalers(e.NS).Patch(e.Ctx(), "web-hpa", types.MergePatchType,
		[]byte(`{"spec":{"scaleTargetRef":{"name":"web"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitHPAFound(e, "web", metav1.ConditionTrue, elastiv1alpha1.ReasonHPAOwnsTarget)
}
