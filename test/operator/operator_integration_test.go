package operator_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/controller"
	"github.com/elasti-dev/elasti/test/localcluster/clustertest"
	"github.com/elasti-dev/elasti/test/testenv"
)

func TestMain(m *testing.M) { os.Exit(clustertest.Main(m)) }

// startWithResolver is how most tests here begin: in parallel, in an Env of
// their own whose operator runs, with resolvers stand-in resolver pods.
func startWithResolver(t *testing.T, resolvers int32) *testenv.Env {
	t.Helper()
	t.Parallel()
	e := testenv.New(t)
	e.StartOperator()
	e.Resolver(resolvers)
	return e
}

// The operator's open watches, counted per user agent in the audit log, do
// not grow with the number of ElastiServices.
func TestWatchCountDoesNotGrowWithElastiServices(t *testing.T) {
	e := startWithResolver(t, 1)
	e.Fronted("app-0", 0)
	operatorWatches := func() int { return testenv.OpenWatches(t, " "+e.UserAgentSuffix()) }
	// Informers open their watches right after their first list.
	var withOne int
	e.Eventually("the operator's watches to open", func() (bool, string) {
		withOne = operatorWatches()
		return withOne >= 6, fmt.Sprintf("%d open", withOne)
	})

	const n = 200
	e.Fleet("more", n-1, 0)
	e.Eventually(fmt.Sprintf("all %d ElastiServices in proxy mode", n), func() (bool, string) {
		proxy, serve := e.CountModes()
		return proxy == n, fmt.Sprintf("%d in proxy, %d in serve", proxy, serve)
	})
	withMany := operatorWatches()
	t.Logf("operator watches: %d with 1 ElastiService, %d with %d", withOne, withMany, n)
	if withMany != withOne {
		t.Errorf("watches grew with ElastiServices: %d with 1, %d with %d", withOne, withMany, n)
	}
	if withOne > 10 {
		t.Errorf("operator holds %d watches; want at most 10", withOne)
	}
}

func TestProxyAndServeFollowTheTarget(t *testing.T) {
	e := startWithResolver(t, 2)
	e.Fronted("web", 1)

	es := e.Get("web")
	if !slices.Contains(es.Finalizers, elastiv1alpha1.Finalizer) {
		t.Errorf("finalizers = %v, want %s", es.Finalizers, elastiv1alpha1.Finalizer)
	}
	if es.Status.ObservedGeneration != es.Generation || es.Status.LastReconciledTime == nil {
		t.Errorf("status observedGeneration %d (generation %d), lastReconciledTime %v",
			es.Status.ObservedGeneration, es.Generation, es.Status.LastReconciledTime)
	}
	// Serving needs no private Service: it is made at the first switch to
	// proxy, as KubeElasti does.
	if _, err := e.PrivateService("web"); !apierrors.IsNotFound(err) {
		t.Errorf("private service while serving: %v, want NotFound", err)
	}

	// Scale to zero: proxy, and the public Service points at the resolver,
	// which reaches the pods through the private Service.
	e.Scale(elastiv1alpha1.KindDeployment, "web", 0)
	e.WaitMode("web", elastiv1alpha1.ModeProxy)
	var pvt *corev1.Service
	e.Eventually("the private service in proxy mode", func() (bool, string) {
		var err error
		pvt, err = e.PrivateService("web")
		return err == nil, fmt.Sprint(err)
	})
	if pvt.Spec.Selector["app"] != "web" || len(pvt.Spec.Ports) != 1 || pvt.Spec.Ports[0].Port != 80 ||
		pvt.Spec.Ports[0].TargetPort != intstr.FromString("http") || pvt.Spec.Ports[0].Name != "http" {
		t.Errorf("private service spec = %+v, want the public selector and ports", pvt.Spec)
	}
	if len(pvt.OwnerReferences) != 1 || pvt.OwnerReferences[0].UID != es.UID {
		t.Errorf("private service owners = %+v, want the ElastiService", pvt.OwnerReferences)
	}
	want := e.ReadyPodIPs(testenv.ResolverName)
	if len(want) != 2 {
		t.Fatalf("resolver has %d ready pods, want 2", len(want))
	}
	e.Eventually("the resolver slice to list both resolver pods", func() (bool, string) {
		s, err := e.ResolverSlice("web")
		if err != nil {
			return false, err.Error()
		}
		return slices.Equal(testenv.SliceIPs(*s), want), fmt.Sprintf("%v", testenv.SliceIPs(*s))
	})
	s, err := e.ResolverSlice("web")
	if err != nil {
		t.Fatal(err)
	}
	if s.Labels["kubernetes.io/service-name"] != "web" || s.AddressType != "IPv4" {
		t.Errorf("resolver slice labels %v addressType %s", s.Labels, s.AddressType)
	}
	if len(s.Ports) != 1 || ptr.Deref(s.Ports[0].Name, "") != "http" || ptr.Deref(s.Ports[0].Port, 0) != testenv.ResolverProxyPort {
		t.Errorf("resolver slice ports = %+v, want http → %d", s.Ports, testenv.ResolverProxyPort)
	}

	// elasti_operator_mode follows: 1 in proxy.
	mode := func() float64 { return testutil.ToFloat64(e.LastOperator.Metrics.Mode.WithLabelValues(e.NS, "web")) }
	if got := mode(); got != 1 {
		t.Errorf("elasti_operator_mode = %v in proxy mode, want 1", got)
	}

	// Scale up by hand: serve, and the resolver slice is gone.
	e.Scale(elastiv1alpha1.KindDeployment, "web", 1)
	e.WaitMode("web", elastiv1alpha1.ModeServe)
	if got := mode(); got != 0 {
		t.Errorf("elasti_operator_mode = %v in serve mode, want 0", got)
	}
	e.Eventually("the resolver slice to be deleted", func() (bool, string) {
		_, err := e.ResolverSlice("web")
		return apierrors.IsNotFound(err), fmt.Sprintf("get: %v", err)
	})
	if _, err := e.PrivateService("web"); err != nil {
		t.Errorf("private service after the switch back to serve: %v, want it kept for the next scale-down", err)
	}
	e.Eventually("SwitchedToProxy and SwitchedToServe events", func() (bool, string) {
		evs, err := e.Kube.CoreV1().Events(e.NS).List(e.Ctx(), metav1.ListOptions{FieldSelector: "involvedObject.name=web,involvedObject.kind=ElastiService"})
		if err != nil {
			return false, err.Error()
		}
		var reasons []string
		for _, ev := range evs.Items {
			reasons = append(reasons, ev.Reason)
		}
		return slices.Contains(reasons, controller.ReasonSwitchedToProxy) && slices.Contains(reasons, controller.ReasonSwitchedToServe),
			strings.Join(reasons, ",")
	})
}

// A pod that exists but is not Ready must not get traffic: the mode stays
// proxy until it is Ready. The pod is pinned to a node kwok does not manage
// (so it never becomes Ready) until the test hands that node to kwok.
func TestPodNotYetReadyKeepsProxy(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	nodeName := "unmanaged-" + e.NS
	capacity := corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("16Gi")}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: map[string]string{"elasti-test": e.NS}},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: "elasti-test/unmanaged", Value: e.NS, Effect: corev1.TaintEffectNoSchedule}}},
		Status:     corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
	if _, err := e.Kube.CoreV1().Nodes().Create(e.Ctx(), node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.Kube.CoreV1().Nodes().Delete(context.WithoutCancel(e.Ctx()), nodeName, metav1.DeleteOptions{})
	})

	e.StartOperator()
	e.Resolver(1)
	e.Deployment("slow", 0, func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.NodeSelector = map[string]string{"elasti-test": e.NS}
		d.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "elasti-test/unmanaged", Operator: corev1.TolerationOpExists}}
	})
	e.Service("slow", "slow")
	e.ElastiService("slow", "slow", elastiv1alpha1.KindDeployment, "slow")
	e.WaitMode("slow", elastiv1alpha1.ModeProxy)

	e.Scale(elastiv1alpha1.KindDeployment, "slow", 1)
	e.Eventually("a pod scheduled on the unmanaged node", func() (bool, string) {
		pods, err := e.Kube.CoreV1().Pods(e.NS).List(e.Ctx(), metav1.ListOptions{LabelSelector: "app=slow"})
		if err != nil || len(pods.Items) == 0 {
			return false, fmt.Sprintf("pods: %v", err)
		}
		return pods.Items[0].Spec.NodeName == nodeName, "node " + pods.Items[0].Spec.NodeName
	})
	// Replicas are 1 and a pod exists; for two seconds nothing may change.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		es := e.Get("slow")
		if es.Status.Mode != elastiv1alpha1.ModeProxy {
			t.Fatalf("switched to %q while the only pod is not Ready", es.Status.Mode)
		}
		if _, err := e.ResolverSlice("slow"); err != nil {
			t.Fatalf("resolver slice gone while the only pod is not Ready: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Hand the node to kwok: the pod becomes Ready, and only then serve.
	patch := []byte(`{"metadata":{"annotations":{"kwok.x-k8s.io/node":"fake"}}}`)
	if _, err := e.Kube.CoreV1().Nodes().Patch(e.Ctx(), nodeName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// kwok ignores pods bound before it adopted the node, so replace the
	// stuck pod; its successor lands on the now-managed node.
	if err := e.Kube.CoreV1().Pods(e.NS).DeleteCollection(e.Ctx(), metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)},
		metav1.ListOptions{LabelSelector: "app=slow"}); err != nil {
		t.Fatal(err)
	}
	e.WaitMode("slow", elastiv1alpha1.ModeServe)
	if ips := e.ReadyPodIPs("slow"); len(ips) != 1 {
		t.Errorf("serve mode with %d ready pods", len(ips))
	}
}

// The private Service, once made, stays and follows the public Service
// while the target serves again.
func TestPrivateServiceMirrorsPublicServiceEdits(t *testing.T) {
	e := startWithResolver(t, 1)
	e.FrontedAfterProxy("web", 1)

	// The Service's selector must keep selecting the target's pods (else
	// ServiceSelectsOtherPods), so the pod template gets the new label
	// first.
	// Read and written again on a conflict: the Deployment controller
	// writes web's status while its pod comes back (a fresh machine's CI
	// run failed here on "the object has been modified").
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := e.Kube.AppsV1().Deployments(e.NS).Get(e.Ctx(), "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		d.Spec.Template.Labels["tier"] = "frontend"
		_, err = e.Kube.AppsV1().Deployments(e.NS).Update(e.Ctx(), d, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		svc, err := e.Kube.CoreV1().Services(e.NS).Get(e.Ctx(), "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		svc.Spec.Selector = map[string]string{"app": "web", "tier": "frontend"}
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "grpc", Port: 9090, TargetPort: intstr.FromInt32(9090)})
		_, err = e.Kube.CoreV1().Services(e.NS).Update(e.Ctx(), svc, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	e.Eventually("the private service to mirror the new selector and ports", func() (bool, string) {
		pvt, err := e.PrivateService("web")
		if err != nil {
			return false, err.Error()
		}
		ok := pvt.Spec.Selector["tier"] == "frontend" && len(pvt.Spec.Ports) == 2 && pvt.Spec.Ports[1].Name == "grpc" && pvt.Spec.Ports[1].Port == 9090
		return ok, fmt.Sprintf("selector %v ports %+v", pvt.Spec.Selector, pvt.Spec.Ports)
	})

	// A hand edit of the private Service is put back.
	pvt, err := e.PrivateService("web")
	if err != nil {
		t.Fatal(err)
	}
	pvt.Spec.Selector = map[string]string{"app": "something-else"}
	if _, err := e.Kube.CoreV1().Services(e.NS).Update(e.Ctx(), pvt, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Eventually("the hand-edited private service to be restored", func() (bool, string) {
		pvt, err := e.PrivateService("web")
		if err != nil {
			return false, err.Error()
		}
		return pvt.Spec.Selector["app"] == "web", fmt.Sprintf("%v", pvt.Spec.Selector)
	})
}

func TestResolverSliceFollowsResolverPods(t *testing.T) {
	e := startWithResolver(t, 2)
	e.Fronted("web", 0)

	for _, n := range []int32{3, 1} {
		e.Scale(elastiv1alpha1.KindDeployment, testenv.ResolverName, n)
		e.Eventually(fmt.Sprintf("the resolver slice to follow %d resolver pods", n), func() (bool, string) {
			want := e.ReadyPodIPs(testenv.ResolverName)
			s, err := e.ResolverSlice("web")
			if err != nil {
				return false, err.Error()
			}
			got := testenv.SliceIPs(*s)
			return len(want) == int(n) && slices.Equal(got, want), fmt.Sprintf("slice %v, resolver pods %v", got, want)
		})
	}

	// No resolver at all: a condition says so and the slice is kept.
	e.Scale(elastiv1alpha1.KindDeployment, testenv.ResolverName, 0)
	es := e.WaitReason("web", metav1.ConditionFalse, controller.ReasonResolverUnavailable)
	if es.Status.Mode != elastiv1alpha1.ModeProxy {
		t.Errorf("mode = %q with no resolver, want proxy", es.Status.Mode)
	}
	e.Scale(elastiv1alpha1.KindDeployment, testenv.ResolverName, 1)
	e.WaitMode("web", elastiv1alpha1.ModeProxy)
}

func TestDeletionRestoresTheTargetAndCleansUp(t *testing.T) {
	e := startWithResolver(t, 1)
	e.Fronted("web", 0)
	if _, err := e.ResolverSlice("web"); err != nil {
		t.Fatalf("resolver slice before deletion: %v", err)
	}

	if err := e.Elasti.ElastiV1alpha1().ElastiServices(e.NS).Delete(e.Ctx(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Until the target has a ready pod the public Service must keep some
	// endpoint: the resolver slice or the target's own. The slice is read
	// first: it goes only after a pod is Ready, so a pod read after a
	// missing slice must be Ready (read the other way round, a pod that
	// became Ready between the two reads looked like a dark Service).
	e.Eventually("the ElastiService to be gone", func() (bool, string) {
		if _, err := e.ResolverSlice("web"); err != nil && len(e.ReadyPodIPs("web")) == 0 {
			t.Fatalf("the public service lost every endpoint during deletion: no ready pod and resolver slice %v", err)
		}
		_, err := e.Elasti.ElastiV1alpha1().ElastiServices(e.NS).Get(e.Ctx(), "web", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprintf("get: %v", err)
	})
	d, err := e.Kube.AppsV1().Deployments(e.NS).Get(e.Ctx(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ptr.Deref(d.Spec.Replicas, 0); got != 2 {
		t.Errorf("target replicas after deletion = %d, want minTargetReplicas 2", got)
	}
	if _, err := e.ResolverSlice("web"); !apierrors.IsNotFound(err) {
		t.Errorf("resolver slice after deletion: %v, want NotFound", err)
	}
	if _, err := e.PrivateService("web"); !apierrors.IsNotFound(err) {
		t.Errorf("private service after deletion: %v, want NotFound", err)
	}
}

func TestStatefulSetTarget(t *testing.T) {
	e := startWithResolver(t, 1)
	st := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: e.NS},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To[int32](1),
			ServiceName: "db",
			Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Template:    testenv.PodTemplate("db"),
		},
	}
	if _, err := e.Kube.AppsV1().StatefulSets(e.NS).Create(e.Ctx(), st, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Service("db", "db")
	e.ElastiService("db", "db", elastiv1alpha1.KindStatefulSet, "db")
	e.WaitMode("db", elastiv1alpha1.ModeServe)
	e.Scale(elastiv1alpha1.KindStatefulSet, "db", 0)
	e.WaitMode("db", elastiv1alpha1.ModeProxy)
	e.Scale(elastiv1alpha1.KindStatefulSet, "db", 1)
	e.WaitMode("db", elastiv1alpha1.ModeServe)

	// Deleting at zero restores the StatefulSet too.
	e.Scale(elastiv1alpha1.KindStatefulSet, "db", 0)
	e.WaitMode("db", elastiv1alpha1.ModeProxy)
	if err := e.Elasti.ElastiV1alpha1().ElastiServices(e.NS).Delete(e.Ctx(), "db", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Eventually("the StatefulSet back at minTargetReplicas", func() (bool, string) {
		got, err := e.Kube.AppsV1().StatefulSets(e.NS).Get(e.Ctx(), "db", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return ptr.Deref(got.Spec.Replicas, 0) == 2, fmt.Sprintf("replicas %d", ptr.Deref(got.Spec.Replicas, 0))
	})
}

func TestBadSpecsReportAndHealWithoutRestart(t *testing.T) {
	e := startWithResolver(t, 1)

	// Missing Service.
	e.ElastiService("web", "web", elastiv1alpha1.KindDeployment, "web")
	es := e.WaitReason("web", metav1.ConditionFalse, controller.ReasonServiceNotFound)
	if !strings.Contains(testenv.Describe(es), `Service "web" does not exist`) {
		t.Errorf("condition does not say which Service is missing: %s", testenv.Describe(es))
	}
	// Service appears, target still missing.
	e.Service("web", "web")
	es = e.WaitReason("web", metav1.ConditionFalse, controller.ReasonTargetNotFound)
	if !strings.Contains(testenv.Describe(es), `Deployment "web" does not exist`) {
		t.Errorf("condition does not name the missing target: %s", testenv.Describe(es))
	}
	// Target appears: healed by the watch, no restart.
	e.Deployment("web", 1, nil)
	e.WaitMode("web", elastiv1alpha1.ModeServe)

	// A second ElastiService for the same Service is refused politely.
	e.ElastiService("web-dup", "web", elastiv1alpha1.KindDeployment, "web")
	e.WaitReason("web-dup", metav1.ConditionFalse, controller.ReasonServiceConflict)
	// And takes over when the first goes.
	if err := e.Elasti.ElastiV1alpha1().ElastiServices(e.NS).Delete(e.Ctx(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.WaitMode("web-dup", elastiv1alpha1.ModeServe)
}

// An operator stopped in proxy mode and started again changes nothing.
func TestRestartInProxyModeIsANoop(t *testing.T) {
	e := startWithResolver(t, 1)
	e.Fronted("web", 0)
	e.Stop()

	before := e.Get("web")
	slice, err := e.ResolverSlice("web")
	if err != nil {
		t.Fatal(err)
	}
	pvt, err := e.PrivateService("web")
	if err != nil {
		t.Fatal(err)
	}

	e.StartOperator()
	time.Sleep(3 * time.Second)
	after := e.Get("web")
	if after.Status.Mode != elastiv1alpha1.ModeProxy || after.ResourceVersion != before.ResourceVersion {
		t.Errorf("restart rewrote the ElastiService: mode %q, resourceVersion %s → %s", after.Status.Mode, before.ResourceVersion, after.ResourceVersion)
	}
	ours := 0
	for _, s := range e.SlicesFor("web") {
		if s.Labels["endpointslice.kubernetes.io/managed-by"] == controller.ManagedByValue {
			ours++
			if s.UID != slice.UID || s.ResourceVersion != slice.ResourceVersion {
				t.Errorf("resolver slice was recreated or rewritten on restart")
			}
		}
	}
	if ours != 1 {
		t.Errorf("%d resolver slices after restart, want 1", ours)
	}
	got, err := e.PrivateService("web")
	if err != nil || got.UID != pvt.UID || got.ResourceVersion != pvt.ResourceVersion {
		t.Errorf("private service changed on restart: %v", err)
	}
}

// Changes made while the operator is down converge when it returns, in both
// directions.
func TestConvergesAfterChangesWhileDown(t *testing.T) {
	e := startWithResolver(t, 1)
	e.Fronted("web", 0)

	e.Stop()
	e.Scale(elastiv1alpha1.KindDeployment, "web", 1)
	e.Eventually("the target's pod ready while the operator is down", func() (bool, string) {
		ips := e.ReadyPodIPs("web")
		return len(ips) == 1, fmt.Sprintf("%v", ips)
	})
	e.StartOperator()
	e.WaitMode("web", elastiv1alpha1.ModeServe)
	e.Eventually("the resolver slice removed after restart", func() (bool, string) {
		_, err := e.ResolverSlice("web")
		return apierrors.IsNotFound(err), fmt.Sprintf("%v", err)
	})

	e.Stop()
	e.Scale(elastiv1alpha1.KindDeployment, "web", 0)
	e.StartOperator()
	e.WaitMode("web", elastiv1alpha1.ModeProxy)
}
