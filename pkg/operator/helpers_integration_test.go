package operator_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	versioned "github.com/elasti-dev/elasti/pkg/generated/clientset/versioned"
	"github.com/elasti-dev/elasti/pkg/install"
	"github.com/elasti-dev/elasti/pkg/localcluster"
	"github.com/elasti-dev/elasti/pkg/localcluster/clustertest"
	"github.com/elasti-dev/elasti/pkg/operator"
)

const (
	resolverName      = "resolver"
	resolverProxyPort = 8012
	waitTimeout       = 60 * time.Second
)

var crdOnce sync.Once

func installCRD(t testing.TB) {
	t.Helper()
	var err error
	crdOnce.Do(func() {
		root, rerr := localcluster.RepoRoot()
		if rerr != nil {
			err = rerr
			return
		}
		crds, rerr := install.ReadCRDs(filepath.Join(root, install.CRDFile))
		if rerr != nil {
			err = rerr
			return
		}
		err = install.ApplyCRDs(context.Background(), clustertest.Get(t).RESTConfig(), crds...)
	})
	if err != nil {
		t.Fatalf("install CRD: %v", err)
	}
}

// env is one test's namespace with its own operator watching only it, so
// tests can run in parallel on one cluster.
type env struct {
	t      testing.TB
	ns     string
	kube   kubernetes.Interface
	elasti versioned.Interface
	opts   operator.Options
	stop   func()
	// lastOperator is the most recently started operator.
	lastOperator *operator.Operator
}

func newEnv(t *testing.T) *env { return newBenchEnv(t) }

// newBenchEnv is newEnv for benchmarks too.
func newBenchEnv(t testing.TB) *env {
	t.Helper()
	installCRD(t)
	cfg := clustertest.Get(t).RESTConfig()
	e := &env{
		t:      t,
		ns:     clustertest.Namespace(t),
		kube:   kubernetes.NewForConfigOrDie(cfg),
		elasti: versioned.NewForConfigOrDie(cfg),
	}
	e.opts = operator.DefaultOptions()
	e.opts.WatchNamespace = e.ns
	e.opts.ResolverNamespace = e.ns
	e.opts.ResolverService = resolverName
	e.opts.ResolverProxyPort = resolverProxyPort
	e.opts.DeletionGrace = 20 * time.Second
	return e
}

// startOperator runs an operator in-process until the test ends or stop.
func (e *env) startOperator() { e.t.Helper(); e.startOperatorReturning() }

func (e *env) startOperatorReturning() *operator.Operator {
	e.t.Helper()
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background().WithValues("test", e.t.Name())))
	op, err := operator.New(ctx, clustertest.Get(e.t).RESTConfig(), e.opts)
	if err != nil {
		cancel()
		e.t.Fatalf("operator.New: %v", err)
	}
	e.lastOperator = op
	done := make(chan error, 1)
	go func() { done <- op.Run(ctx) }()
	var once sync.Once
	e.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					e.t.Errorf("operator.Run: %v", err)
				}
			case <-time.After(30 * time.Second):
				e.t.Error("operator did not stop within 30s of cancellation")
			}
		})
	}
	e.t.Cleanup(e.stop)
	// Runs before the stop above: delete every ElastiService while an
	// operator can still finalize it, so no namespace is left terminating.
	e.t.Cleanup(e.finalizeAll)
	return op
}

func (e *env) finalizeAll() {
	ctx := e.ctx()
	err := e.elasti.ElastiV1alpha1().ElastiServices(e.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	if err != nil {
		e.t.Errorf("cleanup: delete ElastiServices: %v", err)
		return
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		list, err := e.elasti.ElastiV1alpha1().ElastiServices(e.ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 0, nil
	})
	if err != nil {
		e.t.Errorf("cleanup: ElastiServices were not finalized within %s", waitTimeout)
	}
}

func (e *env) ctx() context.Context { return context.Background() }

// app creates a Deployment and a public Service selecting it.
func (e *env) app(name string, replicas int32) {
	e.t.Helper()
	e.deployment(name, replicas, nil)
	e.service(name, name)
}

func podTemplate(app string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: "registry.example/app:1",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
		}}},
	}
}

func (e *env) deployment(name string, replicas int32, mutate func(*appsv1.Deployment)) {
	e.t.Helper()
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: podTemplate(name),
		},
	}
	if mutate != nil {
		mutate(d)
	}
	if _, err := e.kube.AppsV1().Deployments(e.ns).Create(e.ctx(), d, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) service(name, app string) {
	e.t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": app},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
		},
	}
	if _, err := e.kube.CoreV1().Services(e.ns).Create(e.ctx(), svc, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// resolver stands in for the resolver Deployment: kwok makes its pods Ready
// with pod IPs, which is all the operator reads.
func (e *env) resolver(replicas int32) {
	e.t.Helper()
	e.deployment(resolverName, replicas, nil)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: resolverName, Namespace: e.ns},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": resolverName},
			Ports:    []corev1.ServicePort{{Name: "http-proxy", Port: resolverProxyPort}},
		},
	}
	if _, err := e.kube.CoreV1().Services(e.ns).Create(e.ctx(), svc, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) elastiService(name, service, kind, target string) *elastiv1alpha1.ElastiService {
	e.t.Helper()
	return e.elastiServiceWith(name, service, kind, target, nil)
}

func (e *env) elastiServiceWith(name, service, kind, target string, mutate func(*elastiv1alpha1.ElastiService)) *elastiv1alpha1.ElastiService {
	e.t.Helper()
	apiVersion := elastiv1alpha1.APIVersionApps
	if kind == elastiv1alpha1.KindRollout {
		apiVersion = elastiv1alpha1.APIVersionArgoV1
	}
	es := &elastiv1alpha1.ElastiService{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: elastiv1alpha1.ElastiServiceSpec{
			Service:           service,
			ScaleTargetRef:    elastiv1alpha1.ScaleTargetRef{APIVersion: apiVersion, Kind: kind, Name: target},
			MinTargetReplicas: 2,
			CooldownPeriod:    60,
		},
	}
	if mutate != nil {
		mutate(es)
	}
	created, err := e.elasti.ElastiV1alpha1().ElastiServices(e.ns).Create(e.ctx(), es, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return created
}

func (e *env) scale(kind, name string, replicas int32) {
	e.t.Helper()
	var err error
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas)
	switch kind {
	case elastiv1alpha1.KindDeployment:
		_, err = e.kube.AppsV1().Deployments(e.ns).Patch(e.ctx(), name, "application/merge-patch+json", patch, metav1.PatchOptions{}, "scale")
	case elastiv1alpha1.KindStatefulSet:
		_, err = e.kube.AppsV1().StatefulSets(e.ns).Patch(e.ctx(), name, "application/merge-patch+json", patch, metav1.PatchOptions{}, "scale")
	}
	if err != nil {
		e.t.Fatal(err)
	}
}

// eventually polls cond until it holds, failing the test with desc and the
// last observation otherwise.
func (e *env) eventually(desc string, cond func() (bool, string)) {
	e.t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(e.ctx(), 50*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		ok, obs := cond()
		last = obs
		return ok, nil
	})
	if err != nil {
		e.t.Fatalf("timed out after %s waiting for %s; last seen: %s", waitTimeout, desc, last)
	}
}

func (e *env) get(name string) *elastiv1alpha1.ElastiService {
	e.t.Helper()
	es, err := e.elasti.ElastiV1alpha1().ElastiServices(e.ns).Get(e.ctx(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return es
}

func describe(es *elastiv1alpha1.ElastiService) string {
	cond := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionReady)
	if cond == nil {
		return fmt.Sprintf("mode=%q, no Ready condition", es.Status.Mode)
	}
	return fmt.Sprintf("mode=%q Ready=%s/%s: %s", es.Status.Mode, cond.Status, cond.Reason, cond.Message)
}

func (e *env) waitMode(name, mode string) {
	e.t.Helper()
	e.eventually(fmt.Sprintf("%s to be in %s mode", name, mode), func() (bool, string) {
		es := e.get(name)
		cond := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionReady)
		return es.Status.Mode == mode && cond != nil && cond.Status == metav1.ConditionTrue, describe(es)
	})
}

func (e *env) waitReason(name string, status metav1.ConditionStatus, reason string) *elastiv1alpha1.ElastiService {
	e.t.Helper()
	var got *elastiv1alpha1.ElastiService
	e.eventually(fmt.Sprintf("%s Ready=%s reason %s", name, status, reason), func() (bool, string) {
		got = e.get(name)
		cond := meta.FindStatusCondition(got.Status.Conditions, elastiv1alpha1.ConditionReady)
		return cond != nil && cond.Status == status && cond.Reason == reason, describe(got)
	})
	return got
}

// slicesFor lists the EndpointSlices labelled for a Service.
func (e *env) slicesFor(service string) []discoveryv1.EndpointSlice {
	e.t.Helper()
	list, err := e.kube.DiscoveryV1().EndpointSlices(e.ns).List(e.ctx(), metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: service}).String(),
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return list.Items
}

// readyPodIPs lists the IPs of an app's Ready pods, sorted.
func (e *env) readyPodIPs(app string) []string {
	e.t.Helper()
	pods, err := e.kube.CoreV1().Pods(e.ns).List(e.ctx(), metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		e.t.Fatal(err)
	}
	var ips []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || p.Status.PodIP == "" {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ips = append(ips, p.Status.PodIP)
			}
		}
	}
	sort.Strings(ips)
	return ips
}

func sliceIPs(s discoveryv1.EndpointSlice) []string {
	var ips []string
	for _, ep := range s.Endpoints {
		ips = append(ips, ep.Addresses...)
	}
	sort.Strings(ips)
	return ips
}

// watchCount sums the apiserver's open WATCH requests.
func watchCount(t *testing.T) int {
	t.Helper()
	raw, err := clustertest.Clientset(t).Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("apiserver metrics: %v", err)
	}
	total := 0
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_longrunning_requests{") || !strings.Contains(line, `verb="WATCH"`) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("parse %q: %v", line, err)
		}
		total += int(v)
	}
	return total
}

func readFile(path string) ([]byte, error) { return os.ReadFile(path) }

func createStatefulSet(t *testing.T, e *env, name string, replicas int32) {
	t.Helper()
	st := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To(replicas),
			ServiceName: name,
			Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template:    podTemplate(name),
		},
	}
	if _, err := e.kube.AppsV1().StatefulSets(e.ns).Create(e.ctx(), st, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
