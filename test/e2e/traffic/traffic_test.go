package traffic

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/names"
	"github.com/elasti-dev/elasti/test/localcluster/realnet"
	"github.com/elasti-dev/elasti/test/testenv"
)

const (
	app = "web"
	// wakeTimeout bounds one request that wakes a Service: the resolver
	// holds it while the operator scales the target and a pod starts.
	wakeTimeout = 60 * time.Second
	// quickTimeout bounds a request that should be answered at once.
	quickTimeout = 10 * time.Second
)

// ingressAddr is the ingress controller's Service by the name a pod in
// any namespace calls it.
const ingressAddr = realnet.IngressService + "." + realnet.IngressNamespace

// scenario is one test's app under an ElastiService, a client pod in its
// namespace and a dark-Service watcher.
type scenario struct {
	t      testing.TB
	bed    *bed
	e      *testenv.Env
	client *realnet.Client
	dark   *testenv.DarkWatch
	ctx    context.Context
	// explained is set once a failure's path was logged, shared with the
	// copies for subtests: a subtest logs it when it fails, with the state
	// of its own failure, and its parent does not log it again.
	explained *atomic.Bool
}

// sideBySideScenario marks t as a scenario that runs beside the others
// marked so: each works in its own namespace on a Service of its own (or
// asks a Prometheus of its own), and changes nothing the others read: no
// restart or scaling of elasti, kube-proxy, kube-controller-manager or
// the bed's Prometheus, no read of a resolver-wide counter or gauge, no
// fill of a resolver-wide budget. Go runs parallel tests once every serial
// test of the package is over, so none of them meets a test that does
// one of those. Most of their time is waits (cooldowns, rate windows,
// scrapes, a wake), and TestMain lets all of them run at once
// (scenariosSideBySide).
func sideBySideScenario(t *testing.T) { t.Parallel() }

func newScenario(t testing.TB) *scenario { t.Helper(); return newScenarioWithPorts(t) }

// newScenarioWithPorts is newScenario with more ports on web's Service.
func newScenarioWithPorts(t testing.TB, extra ...corev1.ServicePort) *scenario {
	t.Helper()
	b := testBed(t)
	b.checkInstalled(t)
	e := testenv.New(t)
	e.App(app, 1)
	if len(extra) > 0 {
		svc, err := e.Kube.CoreV1().Services(e.NS).Get(t.Context(), app, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		svc.Spec.Ports = append(svc.Spec.Ports, extra...)
		if _, err := e.Kube.CoreV1().Services(e.NS).Update(t.Context(), svc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.ElastiServiceWith(app, app, elastiv1alpha1.KindDeployment, app, func(es *elastiv1alpha1.ElastiService) {
		es.Spec.MinTargetReplicas = 1
	})
	e.WaitMode(app, elastiv1alpha1.ModeServe)
	e.Eventually("web's pod to be Ready", func() (bool, string) {
		ips := e.ReadyPodIPs(app)
		return len(ips) == 1, fmt.Sprint(ips)
	})
	client, err := b.Client(t.Context(), e.NS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	s := &scenario{t: t, bed: b, e: e, client: client, ctx: t.Context(), explained: new(atomic.Bool)}
	t.Cleanup(s.explainFailure)
	// kube-proxy programs a new Service within about a second; only then
	// is the Service reachable, so only then can it go dark.
	s.e.Eventually("kube-proxy to route web's ClusterIP to its pod", func() (bool, string) {
		resp := s.do(realnet.Request{URL: "http://" + s.clusterIP() + "/", Timeout: 2 * time.Second})
		return resp.Status == 200, resp.String()
	})
	// And every other port of the Service: kube-proxy may program the
	// extra ones a sync later (TestProtocolsPassIntact's gRPC port was
	// refused at the ClusterIP while port 80 answered, 2 Dec 2026).
	if err := b.WaitKubeProxyFollows(t.Context(), e.NS, app, testenv.WaitTimeout); err != nil {
		t.Fatal(err)
	}
	s.dark = e.WatchDark(app)
	return s
}

// in returns s for subtest t, so that a failure stops t and not its
// parent (FailNow must run on the failing test's goroutine) and is
// explained as t ends, before the next subtest changes the state. The
// dark-Service watcher stays the parent's.
func (s *scenario) in(t *testing.T) *scenario {
	c, e := *s, *s.e
	e.T = t
	c.t, c.e = t, &e
	t.Cleanup(c.explainFailure)
	return &c
}

// explainFailure logs what the path looked like when a test failed,
// most telling first, since CI keeps only part of a long log: where web's
// traffic goes now, elasti's and the ingress controller's logs, the
// objects, and kube-proxy's log.
func (s *scenario) explainFailure() {
	if !s.t.Failed() || !s.explained.CompareAndSwap(false, true) {
		return
	}
	ctx := context.Background()
	s.t.Logf("where %s's traffic goes now:\n%s", app, s.bed.DescribeRoutes(ctx, s.client, s.e.NS, app))
	s.t.Logf("elasti's pods:\n%s", s.bed.Node.Logs(elastiNamespace, "", 20))
	s.t.Logf("the ingress controller, on this namespace:\n%s", linesWith(s.bed.Node.Logs(realnet.IngressNamespace, "", 400), s.e.NS, 15))
	if out, err := s.bed.cluster.Kubectl(ctx, "-n", s.e.NS, "get", "svc,endpointslices,pods", "-o", "wide"); err == nil {
		s.t.Logf("objects:\n%s", out)
	}
	s.t.Logf("kube-proxy:\n%s", s.bed.KubeProxyLog(15))
}

// linesWith returns the last n lines of text that contain substr.
func linesWith(text, substr string, n int) string {
	var keep []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, substr) {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep[max(0, len(keep)-n):], "\n")
}

// handScaleDownBound is how long a Service may be dark after a test scales
// its target to zero by hand: the pods' endpoints go at once, and the
// operator needs this long at most, on this 2-core machine under a full
// test run, to see the target at zero and put the resolver in front. The
// operator's own scale-down is make-before-break and gets no such
// allowance.
const handScaleDownBound = 3 * time.Second

// sleep scales web to zero by hand, as an idle poller or a person would,
// and waits for the resolver to be in front.
func (s *scenario) sleep() {
	s.t.Helper()
	s.dark.Tolerate(handScaleDownBound)
	s.e.Scale(elastiv1alpha1.KindDeployment, app, 0)
	s.e.WaitMode(app, elastiv1alpha1.ModeProxy)
	s.e.Eventually("web's pods to be gone", func() (bool, string) {
		ips := s.e.ReadyPodIPs(app)
		return len(ips) == 0, fmt.Sprint(ips)
	})
	// kube-proxy applies EndpointSlice changes after its sync period
	// (about 1 s); until then a new connection still goes to the gone pod,
	// whose SYN is dropped and retried by TCP a second later.
	if err := s.bed.WaitKubeProxyFollows(s.ctx, s.e.NS, app, testenv.WaitTimeout); err != nil {
		s.t.Fatal(err)
	}
}

func (s *scenario) do(req realnet.Request) realnet.Response {
	s.t.Helper()
	resp, err := s.client.Do(s.ctx, req)
	if err != nil {
		s.t.Fatal(err)
	}
	return resp
}

// fqdn is web's full DNS name.
func (s *scenario) fqdn() string { return fmt.Sprintf("%s.%s.svc.cluster.local", app, s.e.NS) }

func (s *scenario) clusterIP() string {
	s.t.Helper()
	svc, err := s.e.Kube.CoreV1().Services(s.e.NS).Get(s.ctx, app, metav1.GetOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	return svc.Spec.ClusterIP
}

// expectWokenBy checks that resp is web's answer from a pod that is Ready
// now, and that the target was scaled up for it.
func (s *scenario) expectWoken(resp realnet.Response) echoReply {
	s.t.Helper()
	if resp.Status != 200 {
		s.t.Fatalf("want 200 from a new pod, got %s", resp)
	}
	var reply echoReply
	if err := json.Unmarshal([]byte(resp.Body), &reply); err != nil {
		s.t.Fatalf("not the app's answer: %v: %s", err, resp)
	}
	if ips := s.e.ReadyPodIPs(app); !slices.Contains(ips, reply.ServedBy) {
		s.t.Fatalf("answered by %s, which is not a Ready pod of %s (Ready: %v)", reply.ServedBy, app, ips)
	}
	if got := s.e.Replicas(elastiv1alpha1.KindDeployment, app); got != 1 {
		s.t.Fatalf("target has %d replicas after the wake, want 1", got)
	}
	s.e.WaitMode(app, elastiv1alpha1.ModeServe)
	s.t.Logf("woken in %s (%s), answered by pod %s", resp.Duration.Round(time.Millisecond), resp.Phases, reply.ServedBy)
	return reply
}

// TestFullDNSNameWakesAService: at zero, a GET by the Service's full DNS
// name from a client pod resolves through CoreDNS, reaches the resolver
// through kube-proxy and elasti's EndpointSlice, and is answered by a new
// pod. How long it was held reaches web's status.lastHeld, to the
// millisecond of the header its client got.
func TestFullDNSNameWakesAService(t *testing.T) {
	sideBySideScenario(t)
	s := newScenario(t)
	// Awake, the same name goes straight to the pod.
	s.expectWoken(s.do(realnet.Request{URL: "http://" + s.fqdn() + "/", Timeout: quickTimeout}))
	s.sleep()
	resp := s.do(realnet.Request{URL: "http://" + s.fqdn() + "/hello", Timeout: wakeTimeout})
	s.expectWokenHeld(resp)
	// What the client waited reaches kubectl elasti status's LAST HELD.
	s.expectLastHeld(resp)
}

// TestNamespaceQualifiedNameWakesAService: "web.<ns>" resolves through the
// client pod's search path, and the resolver knows the Service by it.
func TestNamespaceQualifiedNameWakesAService(t *testing.T) {
	sideBySideScenario(t)
	s := newScenario(t)
	s.sleep()
	s.expectWoken(s.do(realnet.Request{URL: fmt.Sprintf("http://%s.%s/", app, s.e.NS), Timeout: wakeTimeout}))
}

// TestClusterIPWakesAServiceWhenHostNamesIt: at zero, a request to the
// ClusterIP goes through kube-proxy to the resolver; the Host header names
// the Service in full, as KubeElasti's routing contract needs today.
func TestClusterIPWakesAServiceWhenHostNamesIt(t *testing.T) {
	sideBySideScenario(t)
	s := newScenario(t)
	s.sleep()
	resp := s.do(realnet.Request{URL: "http://" + s.clusterIP() + "/", Host: s.fqdn(), Timeout: wakeTimeout})
	s.expectWoken(resp)
	if want := s.clusterIP() + ":80"; resp.RemoteAddr != want {
		t.Errorf("the client connected to %s, want the ClusterIP %s", resp.RemoteAddr, want)
	}
}

// TestWakeNeedsNoPrivateService: the resolver forwards to the pods the
// Service's own EndpointSlices list, so a wake does not wait for the
// private Service the operator creates for KubeElasti's resolver. Here the
// namespace is at its Service quota, so that create is refused all along;
// a request by short name at zero is still held and answered by a new pod.
func TestWakeNeedsNoPrivateService(t *testing.T) {
	sideBySideScenario(t)
	s := newScenario(t)
	s.fillServiceQuota(names.PrivateService(app))
	// The operator's first sync may have found no pod listed yet and
	// asked for the private Service. That create can land at any time
	// until the quota is enforced (under load, after a delete made here
	// before it: the warm CI run of 9478938), so it is deleted only now,
	// when no create can pass the quota again.
	err := s.e.Kube.CoreV1().Services(s.e.NS).Delete(s.ctx, names.PrivateService(app), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	s.sleep()
	s.expectWoken(s.do(realnet.Request{URL: "http://" + app + "/", Timeout: wakeTimeout}))
	if _, err := s.e.PrivateService(app); !apierrors.IsNotFound(err) {
		t.Fatalf("the private Service: %v; want it refused by the quota all along", err)
	}
}

// fillServiceQuota sets a ResourceQuota that allows no more Services in the
// namespace than it has, not counting the ones named in except. The
// cluster runs no quota controller, so the quota's usage is written here,
// as that controller would, and nothing recomputes it.
func (s *scenario) fillServiceQuota(except ...string) {
	s.t.Helper()
	list, err := s.e.Kube.CoreV1().Services(s.e.NS).List(s.ctx, metav1.ListOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	count := 0
	for _, svc := range list.Items {
		if !slices.Contains(except, svc.Name) {
			count++
		}
	}
	n := resource.MustParse(fmt.Sprint(count))
	q := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "services", Namespace: s.e.NS},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceServices: n}},
	}
	q, err = s.e.Kube.CoreV1().ResourceQuotas(s.e.NS).Create(s.ctx, q, metav1.CreateOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	q.Status = corev1.ResourceQuotaStatus{Hard: q.Spec.Hard, Used: corev1.ResourceList{corev1.ResourceServices: n}}
	if _, err := s.e.Kube.CoreV1().ResourceQuotas(s.e.NS).UpdateStatus(s.ctx, q, metav1.UpdateOptions{}); err != nil {
		s.t.Fatal(err)
	}
	probe := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "over-quota", Namespace: s.e.NS},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}
	s.e.Eventually("the quota to refuse a Service", func() (bool, string) {
		_, err := s.e.Kube.CoreV1().Services(s.e.NS).Create(s.ctx, probe, metav1.CreateOptions{})
		if err == nil {
			_ = s.e.Kube.CoreV1().Services(s.e.NS).Delete(s.ctx, probe.Name, metav1.DeleteOptions{})
		}
		return apierrors.IsForbidden(err), fmt.Sprint(err)
	})
}

// TestBurstAtZeroIsHeldAndWakesOnce: 50 clients call a sleeping Service by
// DNS name at once; every one is answered by the new pod, with its own
// request, and the target is scaled up exactly once.
func TestBurstAtZeroIsHeldAndWakesOnce(t *testing.T) {
	sideBySideScenario(t)
	s := newScenario(t)
	s.sleep()
	before := testenv.CountScaleWrites(t, s.e.NS, "deployments", app) // the hand scale-down's
	const n = 50
	resp := s.do(realnet.Request{URL: "http://" + s.fqdn() + "/burst/{i}", Timeout: wakeTimeout, Parallel: n})
	if len(resp.Parallel) != n {
		t.Fatalf("%d answers for %d requests: %s", len(resp.Parallel), n, resp)
	}
	pods := s.e.ReadyPodIPs(app)
	for i, r := range resp.Parallel {
		var reply echoReply
		if r.Status != 200 || json.Unmarshal([]byte(r.Body), &reply) != nil {
			t.Fatalf("request %d lost: %s", i, r)
		}
		if reply.Path != fmt.Sprintf("/burst/%d", i) || !slices.Contains(pods, reply.ServedBy) {
			t.Fatalf("request %d answered %+v; want its own path, served by one of %v", i, reply, pods)
		}
	}
	if writes := testenv.CountScaleWrites(t, s.e.NS, "deployments", app) - before; writes != 1 {
		t.Errorf("%d requests caused %d scale-ups; want exactly 1", n, writes)
	}
	t.Logf("%d requests held and answered in %s", n, resp.Duration.Round(time.Millisecond))
}

// TestIngressWakesAService: the ingress controller reads EndpointSlices and
// connects to the resolver directly while web sleeps; the request wakes web
// and the new pod answers.
func TestIngressWakesAService(t *testing.T) {
	sideBySideScenario(t)
	s := newScenario(t)
	s.ingress("by-service-name", s.fqdn())
	viaIngress := realnet.Request{URL: "http://" + ingressAddr + "/", Host: s.fqdn()}
	s.waitIngressRoutes(viaIngress)
	s.setProbeRule()
	s.sleep()
	s.waitIngressReachesResolver(s.fqdn())
	viaIngress.Timeout = wakeTimeout
	s.expectWoken(s.do(viaIngress))
}

// ingress routes host to web through the ingress controller.
func (s *scenario) ingress(name, host string) { s.t.Helper(); s.ingressTo(name, host, app) }

// ingressTo routes host to service's port named http through the ingress
// controller.
func (s *scenario) ingressTo(name, host, service string) {
	s.t.Helper()
	ing := realnet.Ingress(s.e.NS, name, host, service)
	if _, err := s.e.Kube.NetworkingV1().Ingresses(s.e.NS).Create(s.ctx, ing, metav1.CreateOptions{}); err != nil {
		s.t.Fatal(err)
	}
}

// waitIngressRoutes waits, while web is awake, until the ingress
// controller has picked up its Ingress and answers from web's pod.
func (s *scenario) waitIngressRoutes(req realnet.Request) {
	s.t.Helper()
	req.Timeout = 2 * time.Second
	s.e.Eventually("the ingress controller to route to web", func() (bool, string) {
		resp := s.do(req)
		return resp.Status == 200 && strings.Contains(resp.Body, "servedBy"), resp.String()
	})
}

// waitIngressReachesResolver waits, while web sleeps, until a request for
// host through the ingress controller reaches a resolver: a probe, which
// the resolver answers with the probe rule's canned answer (setProbeRule,
// set before web slept) and which wakes nothing. The controller's API
// showing the resolver's endpoints is not enough: in CI Traefik's API
// listed them while its router still sent a request to web's gone pod,
// where it hung for the client's whole minute.
func (s *scenario) waitIngressReachesResolver(host string) {
	s.t.Helper()
	s.waitIngressFollows()
	req := probe(way{addr: ingressAddr, host: host})
	req.Timeout = 2 * time.Second // a request to the gone pod hangs: try again soon
	s.e.Eventually("the ingress controller to send web's requests to a resolver", func() (bool, string) {
		resp := s.do(req)
		return isProbeAnswer(resp), resp.String()
	})
}

// waitIngressFollows waits until the ingress controller's API routes web
// to the endpoints its EndpointSlices list now.
func (s *scenario) waitIngressFollows() {
	s.t.Helper()
	if err := s.bed.WaitIngressFollows(s.ctx, s.client, s.e.NS, app, testenv.WaitTimeout); err != nil {
		s.t.Fatal(err)
	}
}

// TestClusterIPWithoutKubeProxyFailsInsideTheNamespace proves the guard of
// the network rule: with kube-proxy gone, a ClusterIP request from a
// client pod is refused inside the node namespace at once instead of
// leaving it, and the host's nftables never gained kube-proxy's table.
func TestClusterIPWithoutKubeProxyFailsInsideTheNamespace(t *testing.T) {
	s := newScenario(t)
	url := "http://" + s.clusterIP() + "/"
	if resp := s.do(realnet.Request{URL: url, Timeout: quickTimeout}); resp.Status != 200 {
		t.Fatalf("with kube-proxy, the ClusterIP answers: got %s", resp)
	}
	if err := s.bed.StopKubeProxy(s.ctx); err != nil {
		t.Fatal(err)
	}
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			if err := s.bed.StartKubeProxy(context.Background()); err != nil {
				t.Errorf("restart kube-proxy: %v", err)
			}
		}
	})
	resp := s.do(realnet.Request{URL: url, Timeout: quickTimeout})
	if !strings.Contains(resp.Err, "connection refused") || resp.Duration > 2*time.Second {
		t.Errorf("without kube-proxy a ClusterIP must be refused at once inside the namespace; got %s", resp)
	}
	host, err := hostNetworkState("")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(host, "kube-proxy") {
		t.Errorf("the host's nftables hold kube-proxy's rules:\n%s", host)
	}
	if err := s.bed.StartKubeProxy(s.ctx); err != nil {
		t.Fatal(err)
	}
	restarted = true
	s.e.Eventually("the ClusterIP to answer again once kube-proxy is back", func() (bool, string) {
		resp := s.do(realnet.Request{URL: url, Timeout: 2 * time.Second})
		return resp.Status == 200, resp.String()
	})
}
