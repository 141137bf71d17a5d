package traffic

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/resolver"
	"github.com/elasti-dev/elasti/pkg/resolver/forward"
	"github.com/elasti-dev/elasti/pkg/resolver/identify"
	"github.com/elasti-dev/elasti/test/e2e/e2ebed"
	"github.com/elasti-dev/elasti/test/localcluster"
	"github.com/elasti-dev/elasti/test/localcluster/realnet"
	"github.com/elasti-dev/elasti/test/testenv"
)

// The no-errors gate (issue #22): at least 100 cold starts on each way a
// client reaches a sleeping Service, and not one failed request. The ways
// are a pod's request by the Service's short name, to its bare ClusterIP,
// through Traefik by an Ingress host, through Traefik's Gateway API
// provider by an HTTPRoute hostname, and a raw TCP connection by short
// name. It lives in this package because it needs this bed (kube-proxy,
// CoreDNS, Traefik with both providers, the real Prometheus, elasti from
// manifests/) and its helpers; a package of its own would start a second
// bed, and would not run beside this one anyway, since every package that
// uses the pod network waits for podnet's machine-wide lock.
//
// gateServicesPerPath Services per way, gatePaths × gateServicesPerPath in
// all, sleep and wake together, gateRounds times. The operator puts them
// to sleep itself, as it does an idle Service: each ElastiService's
// trigger reads idle on the bed's Prometheus (vector(0)) and its cooldown
// is gateCooldown, so a round's targets go back to zero that long after
// their wake and the next round can begin.
//
// A cold start counts only if it was one. Before a round, every Service is
// seen at zero (the Deployment's replicas 0, no pod at all, the
// ElastiService Ready in proxy mode), kube-proxy's rules send its
// ClusterIP to resolver pods only, so do Traefik's servers on the ingress
// and gateway paths, and a kubelet-like probe sent the way
// its cold start will come is answered by the resolver's probe rule
// (which wakes nothing). After it, each answer must come from a pod of
// that Service that became Ready after the round began, and the resolver
// pods must have held at least every TCP connection and every HTTP
// request whose answer carries the cold-start header, and spliced every
// TCP connection. HTTP answers without the header are counted apart (see
// pathFigures.unheld).
const (
	gateServicesPerPath = 20
	gateRounds          = 5
	gateCooldown        = 5 * time.Second
	// gateAsleepTimeout bounds the wait for a round's Services to be back
	// asleep: the cooldown, a poll, the scale-downs, kube-proxy's sync and
	// Traefik's throttle, for a hundred Services on a loaded machine.
	gateAsleepTimeout = 3 * time.Minute
	// gateProbeTimeout bounds one probe: a probe to a router that still
	// dials the gone pod hangs, and is tried again at the next look.
	gateProbeTimeout = 2 * time.Second
)

// gatePath is one way a client pod reaches a Service.
type gatePath struct {
	name   string // the figures' name for it
	prefix string // its Services are <prefix>-<i>
	tcp    bool   // a raw TCP client on tcpEchoPort; else HTTP on port 80
	// h2c: HTTP/2 without TLS (prior knowledge) on grpcEchoPort, which
	// the Service declares kubernetes.io/h2c, instead of HTTP/1.1 on 80.
	h2c bool
	// route, when set, makes what routes to svc this way (an Ingress, an
	// HTTPRoute).
	route func(g *gate, svc string)
	// addr is what a client connects to for svc, and host the Host it
	// sends ("" for addr's).
	addr func(g *gate, svc string) (addr, host string)
}

// publicHost is the hostname an Ingress or HTTPRoute of the gate gives
// svc: its own per test namespace, as a host claimed by two routes (one of
// an earlier run's namespace, still being deleted) goes to either.
func (g *gate) publicHost(svc string) string { return svc + "-" + g.e.NS + ".example.com" }

var gatePaths = []gatePath{
	{name: "short-name", prefix: "name", addr: func(g *gate, svc string) (string, string) { return svc, "" }},
	{name: "cluster-ip", prefix: "ip", addr: func(g *gate, svc string) (string, string) { return g.clusterIPs[svc], "" }},
	{
		name: "ingress", prefix: "ing",
		route: func(g *gate, svc string) { g.ingressTo(svc, g.publicHost(svc), svc) },
		addr:  func(g *gate, svc string) (string, string) { return ingressAddr, g.publicHost(svc) },
	},
	{
		name: "gateway", prefix: "gw",
		route: func(g *gate, svc string) { g.httpRouteTo(svc, g.publicHost(svc), svc) },
		addr:  func(g *gate, svc string) (string, string) { return ingressAddr, g.publicHost(svc) },
	},
	{name: "raw-tcp", prefix: "tcp", tcp: true, addr: func(g *gate, svc string) (string, string) { return svc, "" }},
}

func (p gatePath) service(i int) string { return fmt.Sprintf("%s-%d", p.prefix, i) }

// gate is the gate's namespace and what it measured.
type gate struct {
	// scenario is the gate's namespace and its clients' first (for the
	// resolver's route tables and metrics).
	*scenario
	// clients are one client pod per path, each with an address of its
	// own: the resolver limits the wakes one address starts at once.
	clients    map[string]*realnet.Client
	clusterIPs map[string]string
	// paths are the ways its clients take, perPath Services each.
	paths   []gatePath
	perPath int
	ready   *readyLog
	figures map[string]*pathFigures
	// evidenced and slowEvidenced count the failed and the slow cold
	// starts whose evidence was logged.
	evidenced, slowEvidenced int
}

// maxGateEvidence bounds the failed cold starts whose evidence a run
// logs, and the slow ones'.
const maxGateEvidence = 10

// evidence is what explains a failed cold start of svc in a round that
// began at since: the writes it waited on (its target's scale, its pods,
// its slices and the resolver slice, from the audit log, with their times
// and writers) and the lines of the resolver replicas, the operator and
// kube-controller-manager about it; the
// resolver's line of a failed connect names the addresses it tried and
// where it had them from (EndpointSlice or direct probe).
func (g *gate) evidence(svc string, since time.Time) string {
	key := g.e.NS + "/" + svc
	var b strings.Builder
	b.WriteString("\n--- writes since the round began ---\n")
	for _, w := range testenv.ColdStartWrites(g.t, g.e.NS, svc, "", since) {
		fmt.Fprintln(&b, w)
	}
	// Each resolver replica's own lines on the Service, without the
	// slice changes' (at -v=4 they would crowd out the hold's): which
	// replica held the request, and what it waited on.
	for _, replica := range g.bed.Node.ContainerLogs(elastiNamespace, resolverDeployment, 50000) {
		var own []string
		for _, l := range strings.Split(replica.Tail, "\n") {
			if strings.Contains(l, key+`"`) && !strings.Contains(l, "EndpointSlice changed") {
				own = append(own, l)
			}
		}
		fmt.Fprintf(&b, "--- %s on %s ---\n%s", strings.TrimSuffix(replica.File, ".log"), key, testenv.GrepTail(strings.Join(own, "\n"), key, 12))
	}
	fmt.Fprintf(&b, "--- the operator on %s ---\n%s", key, testenv.GrepTail(g.bed.Node.Logs(elastiNamespace, operatorDeployment, 20000), key, 12))
	fmt.Fprintf(&b, "--- kube-controller-manager on %s ---\n%s", key,
		testenv.GrepTail(localcluster.Tail(filepath.Join(g.bed.cluster.Dir, "kube-controller-manager.log"), 20000), key, 8))
	return b.String()
}

// pathFigures are one path's cold starts: the request's whole time, from
// its first byte to the answer, and the time from the new pod's Ready to
// the answer; and the requests that failed.
type pathFigures struct {
	total, beyondReady []time.Duration
	failed             []string
	// unheld are HTTP cold starts answered without the resolver's
	// cold-start header: the resolver did not hold them as HTTP requests.
	// On a port that declares no protocol, a client that sends nothing
	// for the resolver's sniff time (250 ms) after it connects is taken
	// for a server-first TCP protocol: its connection is held, wakes the
	// Service and is spliced to the pod, which answers the request
	// itself. Under heavy load Traefik was seen to be that slow. The
	// gate's HTTP ports are named http, which declares HTTP, so this
	// should stay empty; they count as cold starts, not as failures: the
	// Service was at zero behind the resolver, and a new pod answered.
	unheld []string
}

// runColdStartGate runs the gate and returns its figures by path. It fails
// tb for every failed request and every cold start it could not verify.
func runColdStartGate(tb testing.TB) map[string]*pathFigures {
	tb.Helper()
	g := newGate(tb, gatePaths, gateServicesPerPath)
	started := time.Now()
	for round := range gateRounds {
		began := g.waitAllAsleep()
		g.fire(round, began, nil)
	}
	g.report(gateRounds, time.Since(started))
	return g.figures
}

// report logs the figures of rounds rounds by path and fails tb for
// every failed request and every path short of its cold starts.
func (g *gate) report(rounds int, took time.Duration) {
	tb := g.t
	tb.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%d rounds of %d Services per path at once (%d cold starts at a time), in %s:\n",
		rounds, g.perPath, g.perPath*len(g.paths), took.Round(time.Second))
	fmt.Fprintf(&b, "%-11s %5s %6s %6s %23s %23s\n", "path", "cold", "failed", "unheld", "total p50 / p99", "beyond Ready p50 / p99")
	for _, p := range g.paths {
		f := g.figures[p.name]
		fmt.Fprintf(&b, "%-11s %5d %6d %6d %11s / %-9s %11s / %-9s\n", p.name, len(f.total), len(f.failed), len(f.unheld),
			testenv.Millis(testenv.Percentile(f.total, 50)), testenv.Millis(testenv.Percentile(f.total, 99)), testenv.Millis(testenv.Percentile(f.beyondReady, 50)), testenv.Millis(testenv.Percentile(f.beyondReady, 99)))
	}
	tb.Log(b.String())
	for _, p := range g.paths {
		if f := g.figures[p.name]; len(f.unheld) > 0 {
			tb.Logf("%s: %d answers without the %s header: %s", p.name, len(f.unheld), resolver.DefaultColdStartHeader, strings.Join(f.unheld, "; "))
		}
	}
	for _, p := range g.paths {
		f := g.figures[p.name]
		if len(f.failed) > 0 {
			tb.Errorf("%s: %d of %d cold starts failed; the first: %s", p.name, len(f.failed), rounds*g.perPath,
				strings.Join(f.failed[:min(len(f.failed), 5)], " | "))
		}
		if n := len(f.total) + len(f.failed); n < rounds*g.perPath {
			tb.Errorf("%s: %d cold starts, want %d", p.name, n, rounds*g.perPath)
		}
	}
	if tb.Failed() {
		tb.Logf("elasti's pods:\n%s", g.bed.Node.Logs(elastiNamespace, "", 30))
		tb.Logf("kube-proxy:\n%s", g.bed.KubeProxyLog(15))
	}
}

// newGate makes the gate's namespace: per path, gateServicesPerPath
// Deployments at one replica, their Services (the TCP path's with its TCP
// port too), ElastiServices that go idle gateCooldown after each wake, and
// the Ingresses and HTTPRoutes; and it waits until the resolver listens on
// every Service port.
func newGate(tb testing.TB, paths []gatePath, perPath int) *gate {
	tb.Helper()
	b := testBed(tb)
	startProtocolBackends(tb, b)
	e := testenv.New(tb)
	s := &scenario{t: tb, bed: b, e: e, ctx: tb.Context(), explained: new(atomic.Bool)}
	g := &gate{scenario: s, clients: map[string]*realnet.Client{}, clusterIPs: map[string]string{}, figures: map[string]*pathFigures{},
		paths: paths, perPath: perPath}
	for _, p := range paths {
		c, err := b.Client(s.ctx, e.NS)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(c.Close)
		g.clients[p.name] = c
		g.figures[p.name] = &pathFigures{}
	}
	s.client = g.clients[paths[0].name]
	g.ready = watchReady(tb, e, e.NS)

	idle := []elastiv1alpha1.ScaleTrigger{trigger("vector(0)", "1")}
	for _, p := range paths {
		for i := range perPath {
			svc := p.service(i)
			e.Deployment(svc, 1, nil)
			if p.tcp || p.h2c {
				g.twoPortService(svc, p)
			} else {
				e.Service(svc, svc)
			}
			e.ElastiServiceWith(svc, svc, elastiv1alpha1.KindDeployment, svc, func(es *elastiv1alpha1.ElastiService) {
				es.Spec.MinTargetReplicas = 1
				es.Spec.CooldownPeriod = int32(gateCooldown / time.Second)
				es.Spec.Triggers = idle
				es.Spec.ProbeResponse = probeRules()
			})
			if p.route != nil {
				p.route(g, svc)
			}
		}
	}
	svcs, err := e.Kube.CoreV1().Services(e.NS).List(s.ctx, metav1.ListOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	for _, svc := range svcs.Items {
		g.clusterIPs[svc.Name] = svc.Spec.ClusterIP
	}
	g.waitResolverListens()
	return g
}

// twoPortService is svc's Service with the HTTP port (probes) and path
// p's own: the raw TCP echo's, or the h2c echo's, declared
// kubernetes.io/h2c.
func (g *gate) twoPortService(svc string, p gatePath) {
	g.t.Helper()
	second := corev1.ServicePort{Name: "tcp", Port: tcpEchoPort, TargetPort: intstr.FromInt32(tcpEchoPort)}
	if p.h2c {
		second = grpcEchoServicePort
	}
	obj := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: svc, Namespace: g.e.NS},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": svc},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}, second},
		},
	}
	if _, err := g.e.Kube.CoreV1().Services(g.e.NS).Create(g.ctx, obj, metav1.CreateOptions{}); err != nil {
		g.t.Fatal(err)
	}
}

// ports is how many Service ports the gate's Services of path p have.
func (p gatePath) ports() int {
	if p.tcp || p.h2c {
		return 2
	}
	return 1
}

// waitResolverListens waits until every Ready resolver pod's route table
// lists every port of every gate Service as listening: the short name,
// the ClusterIP, the gateway and raw TCP name no Service in their Host, so
// they reach a sleeping Service only on its own resolver port.
func (g *gate) waitResolverListens() {
	g.t.Helper()
	want := map[string]int{}
	for _, p := range g.paths {
		for i := range g.perPath {
			want[p.service(i)] = p.ports()
		}
	}
	g.e.EventuallyWithin("the resolver pods to listen on every port of the gate's Services", gateAsleepTimeout, func() (bool, string) {
		pods := g.readyResolverPods()
		if len(pods) == 0 {
			return false, "no Ready resolver pod"
		}
		for _, pod := range pods {
			resp := g.do(realnet.Request{URL: fmt.Sprintf("http://%s:%d/routes", pod.Status.PodIP, resolverInternalPort), Timeout: quickTimeout})
			var table []identify.RouteStatus
			if err := json.Unmarshal([]byte(resp.Body), &table); err != nil {
				return false, fmt.Sprintf("%s: %s", pod.Name, resp)
			}
			got := map[string]int{}
			for _, r := range table {
				if r.Namespace == g.e.NS && r.Listening {
					got[r.Service]++
				}
			}
			for svc, n := range want {
				if got[svc] != n {
					return false, fmt.Sprintf("%s listens on %d ports for %s, want %d", pod.Name, got[svc], svc, n)
				}
			}
		}
		return true, ""
	})
}

// waitAllAsleep waits until every gate Service is asleep with the
// resolver in front on its path, checked as the gate's comment says, and
// returns a time before which no pod of theirs became Ready: their cold
// starts' pods must be Ready after it.
func (g *gate) waitAllAsleep() time.Time {
	g.t.Helper()
	pending := map[string]gatePath{}
	for _, p := range g.paths {
		for i := range g.perPath {
			pending[p.service(i)] = p
		}
	}
	start := time.Now()
	why := map[string]string{}
	for len(pending) > 0 {
		if time.Since(start) > gateAsleepTimeout {
			var stuck []string
			for svc := range pending {
				stuck = append(stuck, svc+": "+why[svc])
			}
			slices.Sort(stuck)
			g.t.Fatalf("%d Services not asleep with the resolver in front within %s: %s", len(stuck), gateAsleepTimeout, strings.Join(stuck[:min(len(stuck), 10)], "; "))
		}
		atZero := g.atZero(why)
		resolvers := map[string]bool{}
		for _, p := range g.readyResolverPods() {
			resolvers[p.Status.PodIP] = true
		}
		names := make([]string, 0, len(pending))
		for svc := range pending {
			names = append(names, svc)
		}
		routes, err := g.bed.KubeProxyRoutes(g.ctx, g.e.NS, names...)
		if err != nil {
			g.t.Fatal(err)
		}
		routed, err := g.bed.IngressRoutes(g.ctx, g.client, g.e.NS, names...)
		if err != nil {
			g.t.Fatal(err)
		}
		probes := map[string][]string{} // by path
		for svc, p := range pending {
			if !atZero[svc] {
				continue
			}
			if ok, desc := toResolversOnly(routes[svc], resolvers); !ok {
				why[svc] = "kube-proxy sends it to " + desc
				continue
			}
			// Traefik dials its servers itself, and lags the slices by its
			// throttle: until it drops the last round's pod, a request may
			// go to that address, which the pod network may have given to
			// another Service's new pod by then.
			if p.route != nil {
				if ok, desc := toResolversOnly(routed[svc], resolvers); !ok {
					why[svc] = "the ingress controller sends it to " + desc
					continue
				}
			}
			probes[p.name] = append(probes[p.name], svc)
		}
		for svc, answered := range g.probeAll(probes) {
			if answered {
				delete(pending, svc)
			} else {
				why[svc] = "the probe on its path is not answered by the resolver's probe rule"
			}
		}
		if len(pending) > 0 {
			time.Sleep(500 * time.Millisecond)
		}
	}
	// Nothing but a request wakes them, and none was sent: a last look
	// says they are all still at zero, so any pod Ready after began is a
	// cold start's.
	began := time.Now()
	why = map[string]string{}
	if atZero := g.atZero(why); len(atZero) != g.perPath*len(g.paths) || len(why) > 0 {
		g.t.Fatalf("Services left zero before the round began: %v", why)
	}
	return began
}

// atZero reads, in one look, which gate Services are at zero: the
// Deployment's replicas are 0, it has no pod at all, and its ElastiService
// is Ready in proxy mode. It notes in why what the others lack.
func (g *gate) atZero(why map[string]string) map[string]bool {
	g.t.Helper()
	ess, err := g.e.Elasti.ElastiV1alpha1().ElastiServices(g.e.NS).List(g.ctx, metav1.ListOptions{})
	if err != nil {
		g.t.Fatal(err)
	}
	deps, err := g.e.Kube.AppsV1().Deployments(g.e.NS).List(g.ctx, metav1.ListOptions{})
	if err != nil {
		g.t.Fatal(err)
	}
	pods, err := g.e.Kube.CoreV1().Pods(g.e.NS).List(g.ctx, metav1.ListOptions{})
	if err != nil {
		g.t.Fatal(err)
	}
	podsOf := map[string]int{}
	for _, p := range pods.Items {
		podsOf[p.Labels["app"]]++
	}
	zero := map[string]bool{}
	for _, d := range deps.Items {
		switch {
		case d.Spec.Replicas == nil || *d.Spec.Replicas != 0:
			why[d.Name] = "its Deployment is not scaled to 0"
		case podsOf[d.Name] > 0:
			why[d.Name] = fmt.Sprintf("%d pods left", podsOf[d.Name])
		default:
			zero[d.Name] = true
		}
	}
	for _, es := range ess.Items {
		cond := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionReady)
		if es.Status.Mode != elastiv1alpha1.ModeProxy || cond == nil || cond.Status != metav1.ConditionTrue {
			if zero[es.Name] {
				why[es.Name] = testenv.Describe(&es)
			}
			delete(zero, es.Name)
		}
	}
	return zero
}

// toResolversOnly says whether kube-proxy's backends of a Service are all
// resolver pods, and describes them.
func toResolversOnly(backends []string, resolvers map[string]bool) (bool, string) {
	if len(backends) == 0 {
		return false, "nothing"
	}
	for _, b := range backends {
		host, _, err := net.SplitHostPort(b)
		if err != nil || !resolvers[host] {
			return false, fmt.Sprint(backends)
		}
	}
	return true, fmt.Sprint(backends)
}

// probeAll sends, per path, a kubelet-like probe of each Service the way
// the path's cold start will come (a TCP Service's on its HTTP port by
// short name), from the path's client pod, all at once; it says which were
// answered by the resolver's probe rule. An h2c Service's probe, like a
// TCP one's, goes to its HTTP port.
func (g *gate) probeAll(byPath map[string][]string) map[string]bool {
	g.t.Helper()
	reqs := map[string][]coldRequest{}
	for _, p := range g.paths {
		for _, svc := range byPath[p.name] {
			addr, host := p.addr(g, svc)
			if p.tcp || p.h2c {
				addr, host = svc, ""
			}
			reqs[p.name] = append(reqs[p.name], coldRequest{
				URL: "http://" + addr + probePath, Host: host,
				Header: map[string]string{"User-Agent": probeAgent}, Timeout: gateProbeTimeout,
			})
		}
	}
	answers := g.runAll(reqs, gateProbeTimeout)
	out := map[string]bool{}
	for _, p := range g.paths {
		for i, svc := range byPath[p.name] {
			a := answers[p.name][i]
			out[svc] = a.Err == "" && a.Status == http.StatusOK && a.Body == probeAnswer
		}
	}
	return out
}

// runAll runs the cold-starts program once per path, in the path's client
// pod, all paths at once, and returns each path's answers in its
// requests' order. Every request is bounded by timeout.
func (g *gate) runAll(reqs map[string][]coldRequest, timeout time.Duration) map[string][]coldAnswer {
	g.t.Helper()
	out := map[string][]coldAnswer{}
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for path, rs := range reqs {
		if len(rs) == 0 {
			continue
		}
		wg.Go(func() {
			var answers []coldAnswer
			err := g.clients[path].Run(g.ctx, coldStartsProgram, rs, timeout+5*time.Second, &answers)
			if err == nil && len(answers) != len(rs) {
				err = fmt.Errorf("%d answers to %d requests", len(answers), len(rs))
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", path, err))
				return
			}
			out[path] = answers
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		g.t.Fatal(errs)
	}
	return out
}

// fire sends every Service's cold start of round at once, one client pod
// per path, and checks and records each; began is waitAllAsleep's. A
// fault, when set, runs beside the requests (the soak's resolver pod
// deleted, its apiserver restart): the resolver pods may change then,
// and their counters no longer add up, so the round checks the answers
// alone.
func (g *gate) fire(round int, began time.Time, fault func()) {
	g.t.Helper()
	reqs := map[string][]coldRequest{}
	for _, p := range g.paths {
		for i := range g.perPath {
			svc := p.service(i)
			addr, host := p.addr(g, svc)
			r := coldRequest{Timeout: wakeTimeout}
			switch {
			case p.tcp:
				r.URL, r.TCP, r.Body = fmt.Sprintf("tcp://%s:%d", addr, tcpEchoPort), true, fmt.Sprintf("cold %s %d", svc, round)
			case p.h2c:
				r.URL, r.H2C = fmt.Sprintf("http://%s:%d/cold/%s/%d", addr, grpcEchoPort, svc, round), true
			default:
				r.URL, r.Host = fmt.Sprintf("http://%s/cold/%s/%d", addr, svc, round), host
			}
			reqs[p.name] = append(reqs[p.name], r)
		}
	}
	before := g.resolverCounts()
	var faulted sync.WaitGroup
	if fault != nil {
		faulted.Go(fault)
	}
	fired := time.Now()
	answers := g.runAll(reqs, wakeTimeout)
	faulted.Wait()
	// A slow round is slow as a whole or in one Service: its time and the
	// machine's load beside it tell which.
	took := fmt.Sprintf("in %s (load average %s)", time.Since(fired).Round(time.Millisecond), loadAverage())
	after := g.resolverCounts()

	sent, tcp, headered := 0, 0, 0
	for _, p := range g.paths {
		f := g.figures[p.name]
		for i, a := range answers[p.name] {
			svc, req := p.service(i), reqs[p.name][i]
			sent++
			servedBy, why := checkColdAnswer(p, req, a)
			var ready time.Time
			if why == "" {
				var ok bool
				if ready, ok = g.ready.awaitReadyAfter(svc, servedBy, began); !ok {
					why = fmt.Sprintf("answered by %s, not a pod of %s that became Ready in this round (%s)", servedBy, svc, g.ready.describe(servedBy, began))
				}
			}
			if why == "" && a.Answered.Sub(ready) > e2ebed.StallBeyondReady {
				why = fmt.Sprintf("a stall: answered by %s %s after it was Ready (at most %s)", servedBy,
					a.Answered.Sub(ready).Round(time.Millisecond), e2ebed.StallBeyondReady)
			}
			if why != "" {
				f.failed = append(f.failed, fmt.Sprintf("round %d, %s: %s", round, svc, why))
				if g.evidenced < maxGateEvidence {
					// While the audit log and the logs still hold it.
					g.evidenced++
					g.t.Logf("evidence of round %d, %s (%s):%s", round, svc, why, g.evidence(svc, began))
				}
				continue
			}
			f.total = append(f.total, a.Answered.Sub(a.Sent))
			f.beyondReady = append(f.beyondReady, a.Answered.Sub(ready))
			if beyond := a.Answered.Sub(ready); beyond > e2ebed.SlowBeyondReady && g.slowEvidenced < maxGateEvidence {
				// While the audit log and the logs still hold it.
				g.slowEvidenced++
				g.t.Logf("slow cold start, round %d, %s: answered by %s %s after the test saw it Ready; sent +%s, Ready +%s, answered +%s after the round began; the resolver says it held it %q:%s",
					round, svc, servedBy, beyond.Round(time.Millisecond), a.Sent.Sub(began).Round(time.Millisecond),
					ready.Sub(began).Round(time.Millisecond), a.Answered.Sub(began).Round(time.Millisecond), a.ColdStart, g.evidence(svc, began))
			}
			switch {
			case p.tcp:
				tcp++
			case a.ColdStart == "":
				f.unheld = append(f.unheld, fmt.Sprintf("round %d, %s", round, svc))
			default:
				headered++
			}
		}
	}
	// Every TCP connection and every answer with the cold-start header was
	// held by a resolver pod (the resolver counts each hold once, when it
	// ends), and every TCP connection was spliced by one: none reached a
	// pod some other way. More holds are connections the resolver took
	// for TCP (see pathFigures.unheld).
	if fault != nil {
		g.t.Logf("round %d (with a fault): %d cold starts %s; the resolver pods were %v, then %v", round, sent, took, before.pods, after.pods)
		return
	}
	if !slices.Equal(before.pods, after.pods) {
		g.t.Fatalf("round %d: the resolver pods changed while it ran: %v, then %v", round, before.pods, after.pods)
	}
	held, spliced := after.held-before.held, after.spliced-before.spliced
	if held < headered+tcp || spliced < tcp {
		g.t.Errorf("round %d: the resolver pods held %d requests and connections and spliced %d TCP connections; the round's answers say at least %d and %d",
			round, held, spliced, headered+tcp, tcp)
	}
	g.t.Logf("round %d: %d cold starts %s; the resolver pods held %d and spliced %d", round, sent, took, held, spliced)
}

// checkColdAnswer checks a's answer to req, the cold start of a Service
// of path p: an HTTP 200 from the echo with the request's own path, or
// the TCP echo of the request's body. It returns the pod IP that
// answered, or why the request failed.
func checkColdAnswer(p gatePath, req coldRequest, a coldAnswer) (servedBy, why string) {
	if a.Err != "" {
		return "", fmt.Sprintf("error after %s: %s", a.Answered.Sub(a.Sent).Round(time.Millisecond), a.Err)
	}
	if p.tcp {
		ip, echoed, _ := strings.Cut(a.Body, " ")
		if echoed != req.Body {
			return "", fmt.Sprintf("TCP answer %q, want the echo of %q", a.Body, req.Body)
		}
		return ip, ""
	}
	var reply echoReply
	if a.Status != http.StatusOK || json.Unmarshal([]byte(a.Body), &reply) != nil {
		return "", fmt.Sprintf("%d: %q", a.Status, a.Body)
	}
	u, err := url.Parse(req.URL)
	if err != nil || reply.Path != u.Path {
		return "", fmt.Sprintf("answered %+v, for another request than %s", reply, req.URL)
	}
	return reply.ServedBy, ""
}

// resolverTally is what the Ready resolver pods counted so far.
type resolverTally struct {
	pods    []string // their names, sorted
	held    int      // requests and connections held until a pod was Ready
	spliced int      // TCP connections spliced to a pod
}

func (g *gate) resolverCounts() resolverTally {
	g.t.Helper()
	var t resolverTally
	for _, p := range g.readyResolverPods() {
		held, err := g.resolverGauge(p, "elasti_resolver_cold_start_wait_seconds_count")
		if err != nil {
			g.t.Fatal(err)
		}
		spliced, err := g.resolverGauge(p, `elasti_resolver_spliced_connections_total{outcome="`+forward.SplicedSuccess+`"}`)
		if err != nil {
			g.t.Fatal(err)
		}
		t.pods = append(t.pods, p.Name)
		t.held += held
		t.spliced += spliced
	}
	return t
}

// readyLog records when the test first saw each pod of a namespace Ready,
// through a watch: the pods' own Ready timestamps are whole seconds.
type readyLog struct {
	mu   sync.Mutex
	pods map[types.UID]readyPod
}

type readyPod struct {
	app, ip string
	at      time.Time
}

// watchReady starts a readyLog of namespace ns, until tb ends.
func watchReady(tb testing.TB, e *testenv.Env, ns string) *readyLog {
	tb.Helper()
	l := &readyLog{pods: map[types.UID]readyPod{}}
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactoryWithOptions(e.Kube, 0, informers.WithNamespace(ns))
	informer := factory.Core().V1().Pods().Informer()
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    l.see,
		UpdateFunc: func(_, obj any) { l.see(obj) },
	}); err != nil {
		tb.Fatal(err)
	}
	factory.Start(ctx.Done())
	tb.Cleanup(func() { cancel(); factory.Shutdown() })
	if !cache.WaitForCacheSync(tb.Context().Done(), informer.HasSynced) {
		tb.Fatal("the pod watch did not sync")
	}
	return l
}

func (l *readyLog) see(obj any) {
	now := time.Now()
	p, ok := obj.(*corev1.Pod)
	if !ok || p.DeletionTimestamp != nil || p.Status.PodIP == "" || !testenv.PodReady(p) {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, seen := l.pods[p.UID]; !seen {
		l.pods[p.UID] = readyPod{app: p.Labels["app"], ip: p.Status.PodIP, at: now}
	}
}

// readyAfter is when the pod of app with ip was first seen Ready, if it
// became Ready after after.
func (l *readyLog) readyAfter(app, ip string, after time.Time) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.pods {
		if p.app == app && p.ip == ip && p.at.After(after) {
			return p.at, true
		}
	}
	return time.Time{}, false
}

// readyLogLag bounds how long the log's watch may trail an answer: the
// pod was Ready before it answered, but the watch event that says so can
// reach the test after the answer on a loaded machine.
const readyLogLag = 10 * time.Second

// awaitReadyAfter is readyAfter, given up to readyLogLag to see the pod.
func (l *readyLog) awaitReadyAfter(app, ip string, after time.Time) (time.Time, bool) {
	deadline := time.Now().Add(readyLogLag)
	for {
		at, ok := l.readyAfter(app, ip, after)
		if ok || time.Now().After(deadline) {
			return at, ok
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// describe says which pods the log saw Ready with ip, and when against
// began: a failed cold start's answer from another Service's pod is a
// misroute, one from a pod Ready before began was no cold start.
func (l *readyLog) describe(ip string, began time.Time) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var seen []string
	for _, p := range l.pods {
		if p.ip == ip {
			seen = append(seen, fmt.Sprintf("a pod of %s Ready %s after the round began", p.app, p.at.Sub(began).Round(time.Millisecond)))
		}
	}
	if len(seen) == 0 {
		return "no pod with that address was seen Ready"
	}
	slices.Sort(seen)
	return strings.Join(seen, "; ")
}

// coldStartsProgram is a client-pod program (realnet.Program): many
// requests at once, each on a connection of its own, each reporting when
// it was sent and answered by the client's clock (the test's, on this
// machine), so the answer can be set against the new pod's Ready.
const coldStartsProgram = "cold-starts"

func init() { realnet.RegisterProgram(coldStartsProgram, runColdStarts) }

// coldRequest is one request of the cold-starts program: an HTTP GET of
// URL, or with TCP a raw connection to URL's host:port that sends Body,
// half-closes and reads the answer to EOF.
type coldRequest struct {
	URL    string            `json:"url"`
	Host   string            `json:"host,omitempty"`
	Header map[string]string `json:"header,omitempty"`
	TCP    bool              `json:"tcp,omitempty"`
	// H2C sends the GET over HTTP/2 without TLS, by prior knowledge.
	H2C     bool          `json:"h2c,omitempty"`
	Body    string        `json:"body,omitempty"`
	Timeout time.Duration `json:"timeout"`
}

// coldAnswer is what the client saw of one coldRequest.
type coldAnswer struct {
	Status int `json:"status,omitempty"`
	// ColdStart is the resolver's cold-start header, if the answer had it.
	ColdStart string `json:"coldStart,omitempty"`
	Body      string `json:"body,omitempty"`
	// Err is set when no whole answer came.
	Err      string    `json:"err,omitempty"`
	Sent     time.Time `json:"sent"`
	Answered time.Time `json:"answered"`
}

func runColdStarts(ctx context.Context, arg json.RawMessage) (any, error) {
	var reqs []coldRequest
	if err := json.Unmarshal(arg, &reqs); err != nil {
		return nil, err
	}
	out := make([]coldAnswer, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Go(func() { out[i] = coldStart(ctx, r) })
	}
	wg.Wait()
	return out, nil
}

func coldStart(ctx context.Context, r coldRequest) (a coldAnswer) {
	ctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	a.Sent = time.Now()
	defer func() { a.Answered = time.Now() }()
	fail := func(err error) coldAnswer { a.Err = err.Error(); return a }
	if r.TCP {
		u, err := url.Parse(r.URL)
		if err != nil {
			return fail(err)
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", u.Host)
		if err != nil {
			return fail(err)
		}
		defer c.Close()
		deadline, _ := ctx.Deadline()
		_ = c.SetDeadline(deadline)
		if _, err := io.WriteString(c, r.Body); err != nil {
			return fail(err)
		}
		if err := c.(*net.TCPConn).CloseWrite(); err != nil {
			return fail(err)
		}
		b, err := io.ReadAll(io.LimitReader(c, 4<<10))
		a.Body = string(b)
		if err != nil {
			return fail(err)
		}
		return a
	}
	// A connection of its own, closed after the answer.
	t := &http.Transport{Proxy: nil, DisableKeepAlives: true}
	if r.H2C {
		t.Protocols = new(http.Protocols)
		t.Protocols.SetUnencryptedHTTP2(true)
	}
	defer t.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.URL, nil)
	if err != nil {
		return fail(err)
	}
	if r.Host != "" {
		req.Host = r.Host
	}
	for k, v := range r.Header {
		req.Header.Set(k, v)
	}
	resp, err := t.RoundTrip(req)
	if err != nil {
		return fail(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	a.Status, a.ColdStart, a.Body = resp.StatusCode, resp.Header.Get(resolver.DefaultColdStartHeader), string(b)
	if err != nil {
		return fail(fmt.Errorf("reading the body: %w", err))
	}
	if r.H2C && resp.ProtoMajor != 2 {
		return fail(fmt.Errorf("answered over %s, want HTTP/2", resp.Proto))
	}
	return a
}

// TestColdStartGate is the no-errors gate: gateRounds × gateServicesPerPath
// (100) real cold starts on each path a client takes (short name,
// ClusterIP, Ingress host, Gateway API route, raw TCP), a hundred at once,
// and not one failed request. It logs the figures BenchmarkColdStartGate
// reports; docs/benchmarks.md has them.
func TestColdStartGate(t *testing.T) {
	runColdStartGate(t)
}

// BenchmarkColdStartGate runs the gate and reports, per path, the cold
// starts' p50, p99 and max, whole (from the client's first byte to the answer)
// and beyond the new pod's Ready (from the moment the pod was seen Ready to
// the answer), and the failed requests. Run it with `make bench`.
func BenchmarkColdStartGate(b *testing.B) {
	for range b.N {
		figures := runColdStartGate(b)
		failed, unheld := 0, 0
		for _, p := range gatePaths {
			f := figures[p.name]
			failed, unheld = failed+len(f.failed), unheld+len(f.unheld)
			b.ReportMetric(float64(testenv.Percentile(f.total, 50).Microseconds())/1000, p.name+"-p50-ms")
			b.ReportMetric(float64(testenv.Percentile(f.total, 99).Microseconds())/1000, p.name+"-p99-ms")
			b.ReportMetric(float64(testenv.Percentile(f.beyondReady, 50).Microseconds())/1000, p.name+"-beyond-ready-p50-ms")
			b.ReportMetric(float64(testenv.Percentile(f.beyondReady, 99).Microseconds())/1000, p.name+"-beyond-ready-p99-ms")
			b.ReportMetric(float64(slices.Max(append(f.total, 0)).Microseconds())/1000, p.name+"-max-ms")
			b.ReportMetric(float64(slices.Max(append(f.beyondReady, 0)).Microseconds())/1000, p.name+"-beyond-ready-max-ms")
		}
		b.ReportMetric(float64(failed), "failed")
		b.ReportMetric(float64(unheld), "unheld")
	}
}
