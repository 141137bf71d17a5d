// Package testenv is the shared fixture of the integration and end-to-end
// tests: a namespace on the local control plane with an operator watching
// only it, the objects tests build, and the waits they need.
package testenv

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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
	// ResolverName names the stand-in resolver Deployment and Service.
	ResolverName = "resolver"
	// ResolverProxyPort is the resolver port proxy-mode slices point at.
	ResolverProxyPort = 8012
	// PerPortRoutingPortName (the resolver Service's port),
	// PerPortContainerPortName (the container port it targets by name) and
	// PerPortRoutingPort are how elasti's resolver pods declare per-port
	// routing (manifests/30-resolver.yaml). A container port name has at
	// most 15 characters, hence two names.
	PerPortRoutingPortName   = "per-port-routing"
	PerPortContainerPortName = "per-port"
	PerPortRoutingPort       = 8014
	// ResolverPodLabel marks the pods the resolver Service selects.
	ResolverPodLabel = "elasti.test/resolver"
	// WaitTimeout bounds every Eventually.
	WaitTimeout = 60 * time.Second
)

var crdOnce sync.Once

func InstallCRD(t testing.TB) {
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
type Env struct {
	T      testing.TB
	NS     string
	Kube   kubernetes.Interface
	Elasti versioned.Interface
	// Opts configure the next StartOperator; tests may edit them first.
	Opts operator.Options
	// Stop stops the most recently started operator.
	Stop func()
	// LastOperator is the most recently started operator.
	LastOperator *operator.Operator
}

// New makes an Env in a fresh namespace with the CRD installed.
func New(t testing.TB) *Env {
	t.Helper()
	InstallCRD(t)
	cfg := clustertest.Get(t).RESTConfig()
	e := &Env{
		T:      t,
		NS:     clustertest.Namespace(t),
		Kube:   kubernetes.NewForConfigOrDie(cfg),
		Elasti: versioned.NewForConfigOrDie(cfg),
	}
	e.Opts = operator.DefaultOptions()
	e.Opts.WatchNamespace = e.NS
	e.Opts.ResolverNamespace = e.NS
	e.Opts.ResolverService = ResolverName
	e.Opts.ResolverProxyPort = ResolverProxyPort
	e.Opts.DeletionGrace = 20 * time.Second
	e.Opts.UserAgentSuffix = e.UserAgentSuffix()
	return e
}

// startOperator runs an operator in-process until the test ends or stop.
func (e *Env) StartOperator() { e.T.Helper(); e.StartOperatorReturning() }

// StartOperatorReturning is StartOperator, returning the operator. It starts
// it as the binary does without --leader-elect, through operator.Start.
func (e *Env) StartOperatorReturning() *operator.Operator {
	e.T.Helper()
	return e.StartOperatorWith(nil)
}

// StartOperatorWith is StartOperatorReturning, taking part in election as
// the binary does with --leader-elect when election is not nil.
func (e *Env) StartOperatorWith(election *operator.Election) *operator.Operator {
	e.T.Helper()
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background().WithValues("test", e.T.Name())))
	op, err := operator.New(ctx, clustertest.Get(e.T).RESTConfig(), e.Opts)
	if err != nil {
		cancel()
		e.T.Fatalf("operator.New: %v", err)
	}
	e.LastOperator = op
	done := make(chan error, 1)
	go func() { done <- op.Start(ctx, election) }()
	var once sync.Once
	e.Stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					e.T.Errorf("operator.Start: %v", err)
				}
			case <-time.After(30 * time.Second):
				e.T.Error("operator did not stop within 30s of cancellation")
			}
		})
	}
	e.T.Cleanup(e.Stop)
	// Runs before the stop above: delete every ElastiService while an
	// operator can still finalize it, so no namespace is left terminating.
	e.T.Cleanup(e.FinalizeAll)
	return op
}

func (e *Env) FinalizeAll() {
	ctx := e.Ctx()
	err := e.Elasti.ElastiV1alpha1().ElastiServices(e.NS).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	if err != nil {
		e.T.Errorf("cleanup: delete ElastiServices: %v", err)
		return
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, WaitTimeout, true, func(ctx context.Context) (bool, error) {
		list, err := e.Elasti.ElastiV1alpha1().ElastiServices(e.NS).List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 0, nil
	})
	if err != nil {
		e.T.Errorf("cleanup: ElastiServices were not finalized within %s", WaitTimeout)
	}
}

func (e *Env) Ctx() context.Context { return context.Background() }

// app creates a Deployment and a public Service selecting it.
func (e *Env) App(name string, replicas int32) {
	e.T.Helper()
	e.Deployment(name, replicas, nil)
	e.Service(name, name)
}

// PodTemplate is an app's pod: it is pinned to the kwok node and tolerates
// its taint, so kwok runs it (its IP answers through the pod network's
// shared backends), never the process node, which cannot run its image.
func PodTemplate(app string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.example/app:1",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
			}},
			NodeSelector: map[string]string{localcluster.FakeNodeLabel: localcluster.FakeNodeLabelValue},
			Tolerations:  []corev1.Toleration{FakeNodeToleration},
		},
	}
}

// FakeNodeToleration lets a pod onto the kwok node.
var FakeNodeToleration = corev1.Toleration{
	Key: localcluster.FakeNodeTaint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule,
}

func (e *Env) Deployment(name string, replicas int32, mutate func(*appsv1.Deployment)) {
	e.T.Helper()
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.NS},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: PodTemplate(name),
		},
	}
	if mutate != nil {
		mutate(d)
	}
	if _, err := e.Kube.AppsV1().Deployments(e.NS).Create(e.Ctx(), d, metav1.CreateOptions{}); err != nil {
		e.T.Fatal(err)
	}
}

func (e *Env) Service(name, app string) {
	e.T.Helper()
	if err := e.CreateService(name, app); err != nil {
		e.T.Fatal(err)
	}
}

// CreateService creates a public Service (port 80 named http, to the pods'
// http port) selecting app; unlike Service it is safe from any goroutine.
func (e *Env) CreateService(name, app string) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.NS},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": app},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
		},
	}
	_, err := e.Kube.CoreV1().Services(e.NS).Create(e.Ctx(), svc, metav1.CreateOptions{})
	return err
}

// resolver stands in for the resolver Deployment: kwok makes its pods Ready
// with pod IPs, which is all the operator reads. Its pods do not declare
// per-port routing, as KubeElasti's resolver pods do not.
func (e *Env) Resolver(replicas int32) {
	e.T.Helper()
	e.ResolverService()
	e.ResolverPods(ResolverName, replicas, false)
}

// ResolverService creates the resolver Service as elasti's manifests do:
// the proxy port, and the per-port-routing port that only pods declaring it
// (by a container port of that name) are listed under. It selects every
// pod ResolverPods makes.
func (e *Env) ResolverService() {
	e.T.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: ResolverName, Namespace: e.NS},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{ResolverPodLabel: "true"},
			Ports: []corev1.ServicePort{
				{Name: "http-proxy", Port: ResolverProxyPort},
				{Name: PerPortRoutingPortName, Port: PerPortRoutingPort, TargetPort: intstr.FromString(PerPortContainerPortName)},
			},
		},
	}
	if _, err := e.Kube.CoreV1().Services(e.NS).Create(e.Ctx(), svc, metav1.CreateOptions{}); err != nil {
		e.T.Fatal(err)
	}
}

// ResolverPods runs replicas resolver stand-in pods in a Deployment called
// name (its pods are labelled app=name), behind ResolverService. With
// perPort they declare per-port routing as elasti's resolver manifests do,
// with the container port named PerPortContainerPortName.
func (e *Env) ResolverPods(name string, replicas int32, perPort bool) {
	e.T.Helper()
	e.Deployment(name, replicas, func(d *appsv1.Deployment) {
		d.Spec.Template.Labels[ResolverPodLabel] = "true"
		if perPort {
			c := &d.Spec.Template.Spec.Containers[0]
			c.Ports = append(c.Ports, corev1.ContainerPort{Name: PerPortContainerPortName, ContainerPort: PerPortRoutingPort})
		}
	})
}

func (e *Env) ElastiService(name, service, kind, target string) *elastiv1alpha1.ElastiService {
	e.T.Helper()
	return e.ElastiServiceWith(name, service, kind, target, nil)
}

func (e *Env) ElastiServiceWith(name, service, kind, target string, mutate func(*elastiv1alpha1.ElastiService)) *elastiv1alpha1.ElastiService {
	e.T.Helper()
	apiVersion := elastiv1alpha1.APIVersionApps
	if kind == elastiv1alpha1.KindRollout {
		apiVersion = elastiv1alpha1.APIVersionArgoV1
	}
	es := &elastiv1alpha1.ElastiService{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.NS},
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
	created, err := e.Elasti.ElastiV1alpha1().ElastiServices(e.NS).Create(e.Ctx(), es, metav1.CreateOptions{})
	if err != nil {
		e.T.Fatal(err)
	}
	return created
}

func (e *Env) Scale(kind, name string, replicas int32) {
	e.T.Helper()
	var err error
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas)
	switch kind {
	case elastiv1alpha1.KindDeployment:
		_, err = e.Kube.AppsV1().Deployments(e.NS).Patch(e.Ctx(), name, "application/merge-patch+json", patch, metav1.PatchOptions{}, "scale")
	case elastiv1alpha1.KindStatefulSet:
		_, err = e.Kube.AppsV1().StatefulSets(e.NS).Patch(e.Ctx(), name, "application/merge-patch+json", patch, metav1.PatchOptions{}, "scale")
	}
	if err != nil {
		e.T.Fatal(err)
	}
}

// eventually polls cond until it holds, failing the test with desc and the
// last observation otherwise.
func (e *Env) Eventually(desc string, cond func() (bool, string)) {
	e.T.Helper()
	var last string
	err := wait.PollUntilContextTimeout(e.Ctx(), 50*time.Millisecond, WaitTimeout, true, func(context.Context) (bool, error) {
		ok, obs := cond()
		last = obs
		return ok, nil
	})
	if err != nil {
		e.T.Fatalf("timed out after %s waiting for %s; last seen: %s", WaitTimeout, desc, last)
	}
}

func (e *Env) Get(name string) *elastiv1alpha1.ElastiService {
	e.T.Helper()
	es, err := e.Elasti.ElastiV1alpha1().ElastiServices(e.NS).Get(e.Ctx(), name, metav1.GetOptions{})
	if err != nil {
		e.T.Fatal(err)
	}
	return es
}

func Describe(es *elastiv1alpha1.ElastiService) string {
	cond := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionReady)
	if cond == nil {
		return fmt.Sprintf("mode=%q, no Ready condition", es.Status.Mode)
	}
	return fmt.Sprintf("mode=%q Ready=%s/%s: %s", es.Status.Mode, cond.Status, cond.Reason, cond.Message)
}

func (e *Env) WaitMode(name, mode string) {
	e.T.Helper()
	e.Eventually(fmt.Sprintf("%s to be in %s mode", name, mode), func() (bool, string) {
		es := e.Get(name)
		cond := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionReady)
		return es.Status.Mode == mode && cond != nil && cond.Status == metav1.ConditionTrue, Describe(es)
	})
}

func (e *Env) WaitReason(name string, status metav1.ConditionStatus, reason string) *elastiv1alpha1.ElastiService {
	e.T.Helper()
	var got *elastiv1alpha1.ElastiService
	e.Eventually(fmt.Sprintf("%s Ready=%s reason %s", name, status, reason), func() (bool, string) {
		got = e.Get(name)
		cond := meta.FindStatusCondition(got.Status.Conditions, elastiv1alpha1.ConditionReady)
		return cond != nil && cond.Status == status && cond.Reason == reason, Describe(got)
	})
	return got
}

// WaitResolverPorts waits until name records a resolver port for each of
// the Service ports given, and nothing else, with ResolverPortsAssigned
// True, and returns them by Service port.
func (e *Env) WaitResolverPorts(name string, servicePorts ...int32) map[int32]int32 {
	e.T.Helper()
	var got map[int32]int32
	e.Eventually(fmt.Sprintf("%s to record resolver ports for %v", name, servicePorts), func() (bool, string) {
		es := e.Get(name)
		got = map[int32]int32{}
		for _, p := range es.Status.ResolverPorts {
			got[p.Port] = p.ResolverPort
		}
		cond := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionResolverPortsAssigned)
		ok := cond != nil && cond.Status == metav1.ConditionTrue && len(got) == len(servicePorts)
		for _, p := range servicePorts {
			ok = ok && got[p] != 0
		}
		return ok, fmt.Sprintf("resolverPorts %+v, condition %+v", es.Status.ResolverPorts, cond)
	})
	return got
}

// slicesFor lists the EndpointSlices labelled for a Service.
func (e *Env) SlicesFor(service string) []discoveryv1.EndpointSlice {
	e.T.Helper()
	list, err := e.Kube.DiscoveryV1().EndpointSlices(e.NS).List(e.Ctx(), metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: service}).String(),
	})
	if err != nil {
		e.T.Fatal(err)
	}
	return list.Items
}

// readyPodIPs lists the IPs of an app's Ready pods, sorted.
func (e *Env) ReadyPodIPs(app string) []string {
	e.T.Helper()
	pods, err := e.Kube.CoreV1().Pods(e.NS).List(e.Ctx(), metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		e.T.Fatal(err)
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

func SliceIPs(s discoveryv1.EndpointSlice) []string {
	var ips []string
	for _, ep := range s.Endpoints {
		ips = append(ips, ep.Addresses...)
	}
	sort.Strings(ips)
	return ips
}

// watchCount sums the apiserver's open WATCH requests.
func WatchCount(t testing.TB) int {
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

func CreateStatefulSet(t testing.TB, e *Env, name string, replicas int32) {
	t.Helper()
	st := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.NS},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To(replicas),
			ServiceName: name,
			Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template:    PodTemplate(name),
		},
	}
	if _, err := e.Kube.AppsV1().StatefulSets(e.NS).Create(e.Ctx(), st, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Fronted creates a Deployment with replicas, its Service and an
// ElastiService for them, all named name, and waits for the mode replicas
// implies: proxy at zero, serve otherwise.
func (e *Env) Fronted(name string, replicas int32) {
	e.T.Helper()
	e.App(name, replicas)
	e.ElastiService(name, name, elastiv1alpha1.KindDeployment, name)
	if replicas == 0 {
		e.WaitMode(name, elastiv1alpha1.ModeProxy)
	} else {
		e.WaitMode(name, elastiv1alpha1.ModeServe)
	}
}

// Fleet creates n Deployments with replicas, each with its Service and an
// ElastiService, named prefix-0 … prefix-(n-1), and returns the names.
func (e *Env) Fleet(prefix string, n int, replicas int32) []string {
	e.T.Helper()
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("%s-%d", prefix, i)
		e.App(names[i], replicas)
		e.ElastiService(names[i], names[i], elastiv1alpha1.KindDeployment, names[i])
	}
	return names
}

// CountModes counts the namespace's ElastiServices in proxy and in serve.
func (e *Env) CountModes() (proxy, serve int) {
	e.T.Helper()
	list, err := e.Elasti.ElastiV1alpha1().ElastiServices(e.NS).List(e.Ctx(), metav1.ListOptions{})
	if err != nil {
		e.T.Fatal(err)
	}
	for _, es := range list.Items {
		switch es.Status.Mode {
		case elastiv1alpha1.ModeProxy:
			proxy++
		case elastiv1alpha1.ModeServe:
			serve++
		}
	}
	return proxy, serve
}

// Post sends body to url as JSON and returns the status code and body.
func Post(t testing.TB, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// WakeBody is KubeElasti's scale request body.
func WakeBody(svc, ns string) string {
	return fmt.Sprintf(`{"count":1,"svc":%q,"namespace":%q}`, svc, ns)
}

func (e *Env) Replicas(kind, name string) int32 {
	e.T.Helper()
	switch kind {
	case elastiv1alpha1.KindStatefulSet:
		s, err := e.Kube.AppsV1().StatefulSets(e.NS).Get(e.Ctx(), name, metav1.GetOptions{})
		if err != nil {
			e.T.Fatal(err)
		}
		return ptr.Deref(s.Spec.Replicas, 1)
	default:
		d, err := e.Kube.AppsV1().Deployments(e.NS).Get(e.Ctx(), name, metav1.GetOptions{})
		if err != nil {
			e.T.Fatal(err)
		}
		return ptr.Deref(d.Spec.Replicas, 1)
	}
}

func (e *Env) WaitReplicas(kind, name string, want int32) {
	e.T.Helper()
	e.Eventually(fmt.Sprintf("%s %s at %d replicas", kind, name, want), func() (bool, string) {
		got := e.Replicas(kind, name)
		return got == want, fmt.Sprintf("%d replicas", got)
	})
}

// HoldsReplicas asserts the target stays at want for d.
func (e *Env) HoldsReplicas(kind, name string, want int32, d time.Duration) {
	e.T.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if got := e.Replicas(kind, name); got != want {
			e.T.Fatalf("%s %s went to %d replicas; it must stay at %d", kind, name, got, want)
		}
	}
}

func (e *Env) HasEvent(object, reason string) (bool, string) {
	evs, err := e.Kube.CoreV1().Events(e.NS).List(e.Ctx(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + object})
	if err != nil {
		return false, err.Error()
	}
	var seen []string
	for _, ev := range evs.Items {
		if ev.Reason == reason {
			return true, ev.Message
		}
		seen = append(seen, ev.Reason)
	}
	return false, strings.Join(seen, ",")
}

// CountScaleWrites counts writes to a target's scale subresource in the
// apiserver's audit log.
func CountScaleWrites(t testing.TB, namespace, resource, name string) int {
	t.Helper()
	n := 0
	EachAuditEvent(t, func(ev AuditEvent) {
		r := ev.ObjectRef
		if ev.Stage == "ResponseComplete" && (ev.Verb == "patch" || ev.Verb == "update") &&
			r.Resource == resource && r.Namespace == namespace && r.Name == name && r.Subresource == "scale" {
			n++
		}
	})
	return n
}

// AuditEvent is the part of an apiserver audit event the tests read.
type AuditEvent struct {
	AuditID   string `json:"auditID"`
	Stage     string `json:"stage"`
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	ObjectRef struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
}

// EachAuditEvent calls f for every event in the cluster's audit log so far.
func EachAuditEvent(t testing.TB, f func(AuditEvent)) {
	t.Helper()
	file, err := os.Open(clustertest.Get(t).AuditLog)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev AuditEvent
		if json.Unmarshal(sc.Bytes(), &ev) == nil {
			f(ev)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

// UserAgentSuffix ends the user agent of this Env's operators, so their
// requests can be told apart in the audit log.
func (e *Env) UserAgentSuffix() string { return "test/" + e.NS }

// OpenWatches counts the watches held open right now by clients whose user
// agent ends with agentSuffix, from the apiserver's audit log: a watch is
// open from its ResponseStarted stage until its ResponseComplete. Unlike the
// apiserver's own gauge, it ignores every other component's watches.
func OpenWatches(t testing.TB, agentSuffix string) int {
	t.Helper()
	open := map[string]bool{}
	EachAuditEvent(t, func(ev AuditEvent) {
		if ev.Verb != "watch" || !strings.HasSuffix(ev.UserAgent, agentSuffix) {
			return
		}
		switch ev.Stage {
		case "ResponseStarted":
			open[ev.AuditID] = true
		case "ResponseComplete", "Panic":
			delete(open, ev.AuditID)
		}
	})
	return len(open)
}
