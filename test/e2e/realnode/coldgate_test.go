package realnode

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/elasti-dev/elasti/hack/sampleapp/answer"
	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/resolver"
	"github.com/elasti-dev/elasti/pkg/resolver/identify"
	"github.com/elasti-dev/elasti/test/e2e/e2ebed"
	"github.com/elasti-dev/elasti/test/localcluster/realnet"
	"github.com/elasti-dev/elasti/test/localcluster/realnode"
	"github.com/elasti-dev/elasti/test/testenv"
)

// The cold-start gate on the real node (issue #33): sample apps that start
// as real apps do (hack/sampleapp: they listen some time after their
// process starts, and may answer 503 on their readiness path for a while
// after), as real containers, woken by a client's request on each path a
// client takes, and every answer checked: 200, from a pod that started
// after the round began, through the resolver (its cold-start header), and
// no request of any client reached that pod before its own readiness path
// first answered 200 (the app counts them). Beside the cold start (the
// client's request to its answer) it measures the time beyond the app's
// first readiness 200: from that 200 to the held request's arrival, both
// on the app's clock.
//
// One Service per cell (listen delay × periodSeconds × path) sleeps and
// wakes together in each round; a round is one cold start per cell, so a
// round starts len(cells) containers at once on the real node. Each
// variant of the resolver (its args: direct probing of woken pods on, the
// default, or off) runs every round, one variant after the other, in the
// same run.

var (
	coldStartCount = flag.Int("coldstart-count", 10,
		"BenchmarkColdStartGateOnTheRealNode: cold starts per cell (variant × listen delay × periodSeconds × path)")
	coldStartVariants = flag.String("coldstart-variants", "on,off",
		"BenchmarkColdStartGateOnTheRealNode: the resolver variants to run, of on (direct probing, the default), off (--probe-pods=false), baseline (-coldstart-baseline's tree) and cpu1 (direct probing with a CPU request of one core)")
	oneAtATimeListen = flag.String("coldstart-one-listen", "300ms,2s",
		"BenchmarkColdStartOneAtATimeOnTheRealNode: the apps' listen delays")
	oneAtATimePeriods = flag.String("coldstart-one-periods", "10",
		"BenchmarkColdStartOneAtATimeOnTheRealNode: the readiness probes' periodSeconds (10 is the default, left unset)")
	oneAtATimeInitialDelays = flag.String("coldstart-one-initial-delays", "0",
		"BenchmarkColdStartOneAtATimeOnTheRealNode: the readiness probes' initialDelaySeconds")
	coldStartBaseline = flag.String("coldstart-baseline", "",
		"the real-node benchmarks' variant baseline: a checkout of another tree whose resolver runs, with direct probing on, beside this tree's (variant on), so a change is measured against its parent in one run")
	coldStartInterleave = flag.Bool("coldstart-interleave", false,
		"the real-node benchmarks: run the variants by turns, one round of each, instead of all of one variant's rounds before the next; slower (the resolver rolls out between every two rounds) but fairer to a side-by-side comparison, which a machine's drift then cannot favour")
	coldStartResults = flag.String("coldstart-results", "",
		"the real-node gates' benchmarks: a file to write each cell's cold starts to, as JSON (test/benchplot draws them); of several benchmarks in one run, the last one's")
	coldStartResolverV = flag.Int("coldstart-resolver-v", 2,
		"the real-node gates' resolver -v: at 2 it logs the wakes it asks for and why a pod is left to the kubelet; at 4 each hold, each look and each pod read, which a slow cold start's evidence then quotes")
)

// coldVariant is one way the resolver runs: args are appended to the
// resolver container's args once any probePodsFlag is taken out of them;
// baseline runs the resolver built from -coldstart-baseline's checkout
// instead of this tree's; cpu, when set, is the resolver container's CPU
// request in place of the manifests' (its cgroup's share of a busy node).
type coldVariant struct {
	name     string
	args     []string
	baseline bool
	cpu      string
}

// probePodsFlag is the resolver's flag that turns direct probing of woken
// pods off; the gate owns it in the resolver's args.
const probePodsFlag = "--probe-pods"

var coldVariants = []coldVariant{
	{name: "on"},
	{name: "off", args: []string{probePodsFlag + "=false"}},
	{name: "baseline", baseline: true},
	// The manifests' 100m is a cgroup share of 102 against the node's
	// other pods; a whole core's request is ten times that share.
	{name: "cpu1", cpu: "1"},
}

// coldPath is one way a client pod reaches a sleeping Service.
type coldPath struct {
	name, prefix string
	// ingress: the Service has an Ingress, and the request goes to
	// Traefik with its public host.
	ingress bool
}

var coldPaths = []coldPath{
	{name: "short-name", prefix: "name"},
	{name: "cluster-ip", prefix: "ip"},
	{name: "ingress", prefix: "ing", ingress: true},
}

// ingressAddr is Traefik's Service, by the name a pod resolves.
const ingressAddr = realnet.IngressService + "." + realnet.IngressNamespace

// coldCell is one sample app: how it starts, its probe period, the path
// its cold starts take.
type coldCell struct {
	listenDelay, notReadyFor time.Duration
	// period is the readiness probe's periodSeconds; 10 is the default,
	// which the pod spec then leaves unset.
	period int32
	// initialDelay is the readiness probe's initialDelaySeconds: no check
	// of the kubelet's or the resolver's may answer sooner after the
	// container's startedAt (checkInitialDelay).
	initialDelay int32
	path         coldPath
	svc          string
}

// coldOptions are one run of the gate.
type coldOptions struct {
	variants     []coldVariant
	listenDelays []time.Duration
	notReadyFor  time.Duration
	periods      []int32
	// initialDelays are the readiness probes' initialDelaySeconds, one
	// set of cells each; none is 0 only.
	initialDelays []int32
	count         int
	// oneAtATime wakes a round's cells one after the other, each alone on
	// the node, instead of all at once: the figure a user with one
	// sleeping app sees, where the containers' start does not hide the
	// kubelet's probe period.
	oneAtATime bool
	// faults, the soak's: a third into each variant's rounds a resolver
	// pod is deleted while the round's requests are held, and two thirds
	// in the apiserver is SIGKILLed and started again (e2ebed.FaultAt).
	faults bool
	// interleave runs one round of each variant by turns.
	interleave bool
}

// faultAt is the fault of round of count, if opts has faults.
func (o coldOptions) faultAt(round int) e2ebed.Fault {
	if !o.faults {
		return ""
	}
	return e2ebed.FaultAt(round, o.count)
}

// coldFigures are one cell's cold starts under one variant.
type coldFigures struct {
	total, beyond []time.Duration
	// faulted are the beyond figures of the fault rounds, which beyond
	// leaves out.
	faulted []time.Duration
	// beyondReachable are the beyond figures counted from the later of
	// the app's first readiness 200 and the moment its pod's address
	// reached the API (published): before that nobody off the node could
	// check or reach the pod, so what is beyond it is the resolver's and
	// the path's, not the kubelet's status manager's.
	beyondReachable []time.Duration
	// byResolver counts the good cold starts whose app got its first
	// readiness 200 from the resolver's direct check, not the kubelet's.
	byResolver int
	failed     []string
}

// resolverCPU is what the resolver pods cost in each round of a variant,
// from their cgroups (realnode.PodCPU): the CPU time they used, what its
// direct checks and holds cost the node that starts the apps, and how
// long their threads waited for a CPU, which a hold waits too.
type resolverCPU struct{ used, waited []time.Duration }

// coldKey names a cell under a variant.
type coldKey struct {
	variant string
	cell    int
}

type coldGate struct {
	tb         testing.TB
	b          *bed
	e          *testenv.Env
	opts       coldOptions
	cells      []coldCell
	clients    map[string]*realnet.Client // one per path
	clusterIPs map[string]string
	figures    map[coldKey]*coldFigures
	cpu        map[string]*resolverCPU // by variant
	published  *addressWatch
	// diagnosedSlow is set once the first slow cold start's diagnosis
	// (the elasti pods' last log lines, the kubelet's) is logged.
	diagnosedSlow bool
	// evidenced counts the slow cold starts whose evidence was logged.
	evidenced int
	// roundBegan is when the round under way began (wakeAll).
	roundBegan time.Time
}

// maxEvidenced bounds the slow cold starts whose evidence a run logs.
const maxEvidenced = 20

// coldGateTimeout bounds one cold start: the container's start, a probe
// period of 10 s and a loaded machine.
const coldGateTimeout = 2 * time.Minute

// runColdGate runs the gate: it makes every cell's app, then per variant
// sets the resolver's args and runs opts.count rounds. It fails tb for
// every cold start that failed a check, and returns the figures.
func runColdGate(tb testing.TB, opts coldOptions) *coldGate {
	tb.Helper()
	g := &coldGate{tb: tb, b: testBed(tb), e: testenv.New(tb), opts: opts,
		clients: map[string]*realnet.Client{}, clusterIPs: map[string]string{}, figures: map[coldKey]*coldFigures{},
		cpu: map[string]*resolverCPU{}}
	started := time.Now()
	g.published = watchAddresses(tb, g.e)
	g.makeApps()
	// Whatever the run set, the resolver leaves with the image and args
	// it came with, for the package's other tests.
	orig := g.resolverContainer()
	tb.Cleanup(func() {
		// The test's context is over by now.
		ctx, cancel := context.WithTimeout(context.Background(), readyTimeout+time.Minute)
		defer cancel()
		g.setResolver(ctx, orig)
	})
	// Which variant runs which round, in order: all of one variant's
	// rounds, then the next's; or one round of each by turns.
	type turn struct {
		v     coldVariant
		round int
	}
	var turns []turn
	for _, v := range opts.variants {
		for round := range opts.count {
			turns = append(turns, turn{v, round})
		}
	}
	if opts.interleave {
		slices.SortStableFunc(turns, func(a, b turn) int { return a.round - b.round })
	}
	for _, t := range turns {
		g.setResolver(tb.Context(), g.variantContainer(orig, t.v))
		g.sleepAll()
		fault := opts.faultAt(t.round)
		before := g.resolverCPU()
		g.wakeAll(t.v, t.round, fault)
		if used, waited, ok := g.resolverCPUSince(before); ok {
			c := g.cpu[t.v.name]
			if c == nil {
				c = &resolverCPU{}
				g.cpu[t.v.name] = c
			}
			c.used, c.waited = append(c.used, used), append(c.waited, waited)
		}
		if fault == e2ebed.FaultResolverDeleted {
			if err := g.b.net.WaitDeploymentReady(tb.Context(), elastiNamespace, resolverDeployment, readyTimeout); err != nil {
				tb.Fatalf("the resolver after its pod was deleted: %v%s", err, g.b.diagnose())
			}
		}
	}
	g.report(time.Since(started))
	return g
}

// resolverSpec is what the gate sets of the resolver's container.
type resolverSpec struct {
	image string
	args  []string
	// cpu is the container's CPU request ("100m").
	cpu string
}

// variantContainer is orig as v runs it: v's args, the gate's -v, and
// with baseline the image built from -coldstart-baseline's checkout.
func (g *coldGate) variantContainer(orig resolverSpec, v coldVariant) resolverSpec {
	spec := resolverSpec{image: orig.image, args: withArgs(orig.args, append(slices.Clone(v.args), fmt.Sprintf("-v=%d", *coldStartResolverV))),
		cpu: cmp.Or(v.cpu, orig.cpu)}
	if v.baseline {
		spec.image = g.b.baselineResolver(g.tb).Ref
	}
	return spec
}

// podCost is what a pod has cost the node so far (realnode.PodCPU).
type podCost struct{ used, waited time.Duration }

// resolverCPU is what each Ready resolver pod has cost so far, by UID;
// nil when a pod's cgroup cannot be read.
func (g *coldGate) resolverCPU() map[string]podCost {
	g.tb.Helper()
	out := map[string]podCost{}
	for _, p := range g.b.readyResolverPods(g.tb) {
		used, waited, err := realnode.PodCPU(p.UID)
		if err != nil {
			g.tb.Logf("resolver CPU: %v", err)
			return nil
		}
		out[string(p.UID)] = podCost{used, waited}
	}
	return out
}

// resolverCPUSince is what the resolver pods cost since before: the CPU
// time they used and how long their threads waited for a CPU, reported
// only when the same pods ran throughout (no fault replaced one).
func (g *coldGate) resolverCPUSince(before map[string]podCost) (used, waited time.Duration, ok bool) {
	after := g.resolverCPU()
	if before == nil || after == nil || len(after) != len(before) {
		return 0, 0, false
	}
	for uid, t := range after {
		b, ok := before[uid]
		if !ok {
			return 0, 0, false
		}
		used += t.used - b.used
		waited += t.waited - b.waited
	}
	return used, waited, true
}

// makeApps creates a Deployment of the sample app, its Service and its
// ElastiService per cell (and the Ingress on the ingress path), and waits
// until they all serve.
func (g *coldGate) makeApps() {
	g.tb.Helper()
	for _, p := range coldPaths {
		c, err := g.b.net.Client(g.tb.Context(), g.e.NS)
		if err != nil {
			g.tb.Fatal(err)
		}
		g.tb.Cleanup(c.Close)
		g.clients[p.name] = c
	}
	delays := g.opts.initialDelays
	if len(delays) == 0 {
		delays = []int32{0}
	}
	for _, d := range g.opts.listenDelays {
		for _, period := range g.opts.periods {
			for _, initialDelay := range delays {
				for _, p := range coldPaths {
					cell := coldCell{listenDelay: d, notReadyFor: g.opts.notReadyFor, period: period, initialDelay: initialDelay,
						path: p, svc: fmt.Sprintf("%s-l%d-p%d", p.prefix, d.Milliseconds(), period)}
					if initialDelay > 0 {
						cell.svc += fmt.Sprintf("-d%d", initialDelay)
					}
					g.cells = append(g.cells, cell)
					g.b.sampleApp(g.tb, g.e, cell.svc, 1, func(c *corev1.Container) {
						c.Env = append(c.Env,
							corev1.EnvVar{Name: "LISTEN_DELAY", Value: cell.listenDelay.String()},
							corev1.EnvVar{Name: "NOT_READY_FOR", Value: cell.notReadyFor.String()})
						c.ReadinessProbe.HTTPGet.Path = "/ready"
						c.ReadinessProbe.PeriodSeconds = cell.period
						c.ReadinessProbe.InitialDelaySeconds = cell.initialDelay
						if cell.period == 10 {
							c.ReadinessProbe.PeriodSeconds = 0 // the default
						}
					})
					g.e.ElastiServiceWith(cell.svc, cell.svc, elastiv1alpha1.KindDeployment, cell.svc, func(es *elastiv1alpha1.ElastiService) {
						es.Spec.MinTargetReplicas = 1
					})
					if p.ingress {
						ing := realnet.Ingress(g.e.NS, cell.svc, g.publicHost(cell.svc), cell.svc)
						if _, err := g.e.Kube.NetworkingV1().Ingresses(g.e.NS).Create(g.tb.Context(), ing, metav1.CreateOptions{}); err != nil {
							g.tb.Fatal(err)
						}
					}
				}
			}
		}
	}
	// All the containers start at once: each pod's start is bounded, not
	// only the operator's reaction to it.
	for _, cell := range g.cells {
		g.e.EventuallyWithin(cell.svc+"'s pod to be Ready", podTimeout, func() (bool, string) {
			names := readyPodNames(g.e, cell.svc)
			return len(names) == 1, fmt.Sprint(names)
		})
		g.waitServe(cell.svc)
		svc, err := g.e.Kube.CoreV1().Services(g.e.NS).Get(g.tb.Context(), cell.svc, metav1.GetOptions{})
		if err != nil {
			g.tb.Fatal(err)
		}
		g.clusterIPs[cell.svc] = svc.Spec.ClusterIP
	}
}

// waitServe waits until svc's ElastiService serves straight, within a
// pod's start bound (the operator follows eighteen apps at once on a
// loaded machine), and says what its pods were doing if it does not.
func (g *coldGate) waitServe(svc string) {
	g.tb.Helper()
	if !g.roundBegan.IsZero() {
		// Past the first round, a Service that does not serve again was
		// left so by the round before: say what happened to it since.
		defer func() {
			if g.tb.Failed() {
				g.tb.Logf("evidence of %s since the last round began:%s", svc, g.b.coldEvidence(g.tb, g.e.NS, svc, "", g.roundBegan))
			}
		}()
	}
	g.e.EventuallyWithin(svc+" to be in serve mode", podTimeout, func() (bool, string) {
		es := g.e.Get(svc)
		cond := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionReady)
		if es.Status.Mode == elastiv1alpha1.ModeServe && cond != nil && cond.Status == metav1.ConditionTrue {
			return true, ""
		}
		desc := testenv.Describe(es)
		if d, err := g.e.Kube.AppsV1().Deployments(g.e.NS).Get(g.tb.Context(), svc, metav1.GetOptions{}); err == nil && d.Spec.Replicas != nil {
			desc += fmt.Sprintf("; its Deployment has replicas %d, %d ready", *d.Spec.Replicas, d.Status.ReadyReplicas)
		}
		pods, err := g.e.Kube.CoreV1().Pods(g.e.NS).List(g.tb.Context(), metav1.ListOptions{LabelSelector: "app=" + svc})
		if err != nil {
			return false, desc + "; " + err.Error()
		}
		for _, p := range pods.Items {
			desc += "; " + realnet.DescribePod(&p)
		}
		return false, desc
	})
}

// publicHost is the host of svc's Ingress: its own per namespace, so a
// host an earlier run's namespace still claims is not shared.
func (g *coldGate) publicHost(svc string) string { return svc + "-" + g.e.NS + ".example.com" }

// request is what cell's client sends for a cold start.
func (g *coldGate) request(cell coldCell) realnet.Request {
	req := realnet.Request{URL: "http://" + cell.svc + "/", Timeout: coldGateTimeout}
	switch {
	case cell.path.ingress:
		req.URL, req.Host = "http://"+ingressAddr+"/", g.publicHost(cell.svc)
	case cell.path.name == "cluster-ip":
		req.URL = "http://" + g.clusterIPs[cell.svc] + "/"
	}
	return req
}

// resolverContainer is the resolver container's image and args now.
func (g *coldGate) resolverContainer() resolverSpec {
	g.tb.Helper()
	d, err := g.b.kube.AppsV1().Deployments(elastiNamespace).Get(g.tb.Context(), resolverDeployment, metav1.GetOptions{})
	if err != nil {
		g.tb.Fatal(err)
	}
	c := d.Spec.Template.Spec.Containers[0]
	return resolverSpec{image: c.Image, args: slices.Clone(c.Args), cpu: c.Resources.Requests.Cpu().String()}
}

// withArgs is orig without the flags the gate owns, then args.
func withArgs(orig, args []string) []string {
	kept := slices.DeleteFunc(slices.Clone(orig), func(a string) bool {
		return a == probePodsFlag || strings.HasPrefix(a, probePodsFlag+"=") || strings.HasPrefix(a, "-v=")
	})
	return append(kept, args...)
}

// setResolver rolls the resolver out with spec's image and args, when
// they differ, and waits until its pods are all of the new template and
// Ready.
func (g *coldGate) setResolver(ctx context.Context, spec resolverSpec) {
	g.tb.Helper()
	changed := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := g.b.kube.AppsV1().Deployments(elastiNamespace).Get(ctx, resolverDeployment, metav1.GetOptions{})
		if err != nil {
			return err
		}
		c := d.Spec.Template.Spec.Containers[0]
		cpu, err := resource.ParseQuantity(spec.cpu)
		if err != nil {
			return fmt.Errorf("the resolver's CPU request %q: %w", spec.cpu, err)
		}
		if c.Image == spec.image && slices.Equal(c.Args, spec.args) && c.Resources.Requests.Cpu().Cmp(cpu) == 0 {
			return nil
		}
		d = d.DeepCopy()
		d.Spec.Template.Spec.Containers[0].Image = spec.image
		d.Spec.Template.Spec.Containers[0].Args = spec.args
		if d.Spec.Template.Spec.Containers[0].Resources.Requests == nil {
			d.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{}
		}
		d.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = cpu
		changed = true
		_, err = g.b.kube.AppsV1().Deployments(elastiNamespace).Update(ctx, d, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		g.tb.Fatal(err)
	}
	if !changed {
		return
	}
	g.tb.Logf("resolver %s, args %q, CPU request %s: rolling out", spec.image, spec.args, spec.cpu)
	if err := g.b.net.WaitDeploymentReady(ctx, elastiNamespace, resolverDeployment, readyTimeout); err != nil {
		g.tb.Fatalf("the resolver %s with args %q: %v%s", spec.image, spec.args, err, g.b.diagnose())
	}
}

// sleepAll scales every cell's app to zero and waits until the resolver
// is in front of each on its path: proxy mode, no pod left, kube-proxy
// (and on the ingress path Traefik) following the resolver slice, and
// every Ready resolver pod listening on each Service's resolver port.
func (g *coldGate) sleepAll() {
	g.tb.Helper()
	for _, cell := range g.cells {
		g.waitServe(cell.svc)
		g.e.Scale(elastiv1alpha1.KindDeployment, cell.svc, 0)
	}
	for _, cell := range g.cells {
		g.e.WaitMode(cell.svc, elastiv1alpha1.ModeProxy)
		g.e.EventuallyWithin(cell.svc+"'s pods to be gone", podTimeout, func() (bool, string) {
			pods, err := g.e.Kube.CoreV1().Pods(g.e.NS).List(g.tb.Context(), metav1.ListOptions{LabelSelector: "app=" + cell.svc})
			return err == nil && len(pods.Items) == 0, fmt.Sprint(err)
		})
		if err := g.b.net.WaitKubeProxyFollows(g.tb.Context(), g.e.NS, cell.svc, testenv.WaitTimeout); err != nil {
			g.tb.Fatal(err)
		}
		if cell.path.ingress {
			if err := g.b.net.WaitIngressFollows(g.tb.Context(), g.clients[cell.path.name], g.e.NS, cell.svc, testenv.WaitTimeout); err != nil {
				g.tb.Fatal(err)
			}
		}
	}
	g.waitResolverListens()
}

// waitResolverListens waits until every Ready resolver pod's route table
// lists every cell's Service as listening: a pod the last rollout made
// learns them from the operator.
func (g *coldGate) waitResolverListens() {
	g.tb.Helper()
	c := g.clients[coldPaths[0].name]
	g.e.EventuallyWithin("the resolver pods to listen for every cell's Service", testenv.WaitTimeout, func() (bool, string) {
		pods := g.b.readyResolverPods(g.tb)
		if len(pods) == 0 {
			return false, "no Ready resolver pod"
		}
		for _, pod := range pods {
			resp, err := c.Do(g.tb.Context(), realnet.Request{URL: fmt.Sprintf("http://%s:%d/routes", pod.Status.PodIP, resolverPort), Timeout: 5 * time.Second})
			if err != nil {
				g.tb.Fatal(err)
			}
			var table []identify.RouteStatus
			if err := json.Unmarshal([]byte(resp.Body), &table); err != nil {
				return false, fmt.Sprintf("%s: %s", pod.Name, resp)
			}
			for _, cell := range g.cells {
				if !slices.ContainsFunc(table, func(r identify.RouteStatus) bool {
					return r.Namespace == g.e.NS && r.Service == cell.svc && r.Listening
				}) {
					return false, fmt.Sprintf("%s does not listen for %s", pod.Name, cell.svc)
				}
			}
		}
		return true, ""
	})
}

// wakeAll sends one request to every cell, at once or (oneAtATime) one
// after the other, each from its path's client, and checks and records
// every answer.
func (g *coldGate) wakeAll(v coldVariant, round int, fault e2ebed.Fault) {
	g.tb.Helper()
	began := time.Now()
	g.roundBegan = began
	var faulted sync.WaitGroup
	if fault != "" {
		faulted.Go(func() { e2ebed.Inject(g.tb.Context(), g.tb, g.b.kube, g.b.cluster, fault) })
	}
	defer faulted.Wait()
	type result struct {
		resp realnet.Response
		err  error
	}
	results := make([]result, len(g.cells))
	var wg sync.WaitGroup
	for i, cell := range g.cells {
		wake := func() {
			resp, err := g.clients[cell.path.name].Do(g.tb.Context(), g.request(cell))
			results[i] = result{resp, err}
		}
		if g.opts.oneAtATime {
			wake()
			continue
		}
		wg.Go(wake)
	}
	wg.Wait()
	for i, cell := range g.cells {
		k := coldKey{v.name, i}
		f := g.figures[k]
		if f == nil {
			f = &coldFigures{}
			g.figures[k] = f
		}
		r := results[i]
		if r.err != nil {
			g.tb.Fatal(r.err)
		}
		reply, why := checkColdStart(r.resp, began)
		if why == "" && cell.initialDelay > 0 {
			why = g.checkInitialDelay(cell, reply)
		}
		if why == "" && reply.FirstReadyBy == answer.CheckedByResolver && slices.Contains(v.args, probePodsFlag+"=false") {
			why = fmt.Sprintf("pod %s got its first readiness 200 from the resolver's direct check, with direct probing off", reply.ServedBy)
		}
		beyond := reply.BeyondReady()
		if why == "" && beyond > e2ebed.StallBeyondReady {
			why = fmt.Sprintf("a stall: the held request reached pod %s %s after its first readiness 200 (at most %s)", reply.ServedBy,
				beyond.Round(time.Millisecond), e2ebed.StallBeyondReady)
			g.logSlow(v, round, cell, r.resp, reply)
		}
		if why != "" {
			f.failed = append(f.failed, fmt.Sprintf("round %d %s: %s", round, cell.svc, why))
			// Now, while the audit log and the pods' logs hold it: a
			// later round may fail the run before report says so.
			g.tb.Logf("%s round %d %s failed: %s", v.name, round, cell.svc, why)
			if g.evidenced < maxEvidenced {
				g.evidenced++
				g.tb.Logf("evidence of %s round %d %s:%s", v.name, round, cell.svc, g.b.coldEvidence(g.tb, g.e.NS, cell.svc, reply.ServedBy, began))
			}
			continue
		}
		f.total = append(f.total, r.resp.Duration)
		if fault != "" {
			f.faulted = append(f.faulted, beyond)
		} else {
			f.beyond = append(f.beyond, beyond)
			if at, ok := g.published.at(reply.ServedBy); ok {
				reachable := time.UnixMicro(reply.FirstReady)
				if at.After(reachable) {
					reachable = at
				}
				f.beyondReachable = append(f.beyondReachable, max(0, time.UnixMicro(reply.Arrived).Sub(reachable)))
			}
		}
		if reply.FirstReadyBy == answer.CheckedByResolver {
			f.byResolver++
		}
		if beyond > e2ebed.SlowBeyondReady {
			g.logSlow(v, round, cell, r.resp, reply)
		}
	}
}

// logSlow says where a slow cold start's time went: the resolver's hold
// (its cold-start header) against the client's phases and the app's
// clock, and, for the first maxEvidenced, its evidence (coldEvidence);
// for the first of a run, the elasti pods' and the kubelet's last lines.
func (g *coldGate) logSlow(v coldVariant, round int, cell coldCell, resp realnet.Response, reply answer.Reply) {
	g.tb.Helper()
	g.tb.Logf("%s round %d %s: the held request reached pod %s %s after its first readiness 200; the resolver says it held it %s; the client: %s (%s); the pod listened %s and first answered 200 %s after it started, to the %s's check",
		v.name, round, cell.svc, reply.ServedBy, reply.BeyondReady().Round(time.Millisecond), resp.Header.Get(resolver.DefaultColdStartHeader),
		resp.Duration.Round(time.Millisecond), resp.Phases,
		reply.ListenedAfter().Round(time.Millisecond), reply.ReadyAfterStart().Round(time.Millisecond), reply.FirstReadyBy)
	if g.evidenced < maxEvidenced {
		// While the audit log and the pods' logs still hold it.
		g.evidenced++
		g.tb.Logf("evidence of %s round %d %s:%s", v.name, round, cell.svc, g.b.coldEvidence(g.tb, g.e.NS, cell.svc, reply.ServedBy, g.roundBegan))
	}
	if !g.diagnosedSlow {
		// While the logs still hold it: once per run, to bound the output.
		g.diagnosedSlow = true
		g.tb.Logf("diagnosis of the first slow cold start:%s", g.b.diagnose())
	}
}

// checkInitialDelay says what is wrong, or "", with the first readiness
// 200 of a pod whose probe has initialDelaySeconds: no check, the
// kubelet's or the resolver's, may answer sooner after the container's
// startedAt as the API shows it (cut down to the second, the copy the
// kubelet's prober reads too). The app's clock and the node's are one
// here.
func (g *coldGate) checkInitialDelay(cell coldCell, reply answer.Reply) string {
	pod, err := g.e.Kube.CoreV1().Pods(g.e.NS).Get(g.tb.Context(), reply.ServedBy, metav1.GetOptions{})
	if err != nil {
		return fmt.Sprintf("reading pod %s for its start: %v", reply.ServedBy, err)
	}
	var started time.Time
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Running != nil {
			started = cs.State.Running.StartedAt.Time
		}
	}
	if started.IsZero() {
		return fmt.Sprintf("pod %s answered but its status shows no running container", reply.ServedBy)
	}
	earliest := started.Add(time.Duration(cell.initialDelay) * time.Second)
	if firstReady := time.UnixMicro(reply.FirstReady); firstReady.Before(earliest) {
		return fmt.Sprintf("pod %s answered the %s's readiness check 200 %s after the startedAt its status shows (%s), before initialDelaySeconds %d allow",
			reply.ServedBy, reply.FirstReadyBy, firstReady.Sub(started).Round(time.Millisecond), started.Format(time.RFC3339), cell.initialDelay)
	}
	return ""
}

// checkColdStart reads a cold start's answer, the sample app's reply, and says
// what is wrong with it, or "".
func checkColdStart(resp realnet.Response, began time.Time) (answer.Reply, string) {
	var reply answer.Reply
	if resp.Err != "" || resp.Status != 200 {
		return reply, resp.String()
	}
	if resp.Header.Get(resolver.DefaultColdStartHeader) == "" {
		return reply, "answered without the resolver's " + resolver.DefaultColdStartHeader + " header, so not held by it: " + resp.String()
	}
	if err := json.Unmarshal([]byte(resp.Body), &reply); err != nil || reply.ServedBy == "" {
		return reply, fmt.Sprintf("not the sample app's answer (%v): %s", err, resp)
	}
	if reply.Started < began.UnixMicro() {
		return reply, fmt.Sprintf("answered by pod %s, started %s before the round began", reply.ServedBy,
			began.Sub(time.UnixMicro(reply.Started)).Round(time.Millisecond))
	}
	if reply.Early > 0 || reply.FirstReady == 0 || reply.Arrived < reply.FirstReady {
		return reply, fmt.Sprintf("%d requests reached pod %s before its readiness path first answered 200 (first 200 at %d µs, this request at %d µs)",
			reply.Early, reply.ServedBy, reply.FirstReady, reply.Arrived)
	}
	return reply, ""
}

// report logs the figures per variant and cell and fails tb for every
// failed cold start and every cell short of its count.
func (g *coldGate) report(took time.Duration) {
	g.tb.Helper()
	var b strings.Builder
	how := "at once"
	if g.opts.oneAtATime {
		how = "one at a time"
	}
	fmt.Fprintf(&b, "%d variants × %d cells, %d rounds of %d cold starts %s each, in %s:\n",
		len(g.opts.variants), len(g.cells), g.opts.count, len(g.cells), how, took.Round(time.Second))
	fmt.Fprintf(&b, "%-8s %6s %6s %5s %-10s %4s %6s %21s %10s %23s %23s %8s\n", "variant", "listen", "period", "delay", "path", "cold", "failed",
		"cold start p50 / p99", "mean", "beyond 1st 200 p50 / p99", "beyond reachable p50/p99", "1st 200 by resolver")
	for _, v := range g.opts.variants {
		for i, cell := range g.cells {
			f := g.figures[coldKey{v.name, i}]
			if f == nil {
				f = &coldFigures{}
			}
			fmt.Fprintf(&b, "%-8s %6s %5ds %4ds %-10s %4d %6d %9s / %-9s %10s %9s / %-9s %9s / %-9s %8d\n", v.name, cell.listenDelay, cell.period,
				cell.initialDelay, cell.path.name, len(f.total), len(f.failed), testenv.Millis(testenv.Percentile(f.total, 50)), testenv.Millis(testenv.Percentile(f.total, 99)),
				testenv.Millis(testenv.Mean(f.total)), testenv.Millis(testenv.Percentile(f.beyond, 50)), testenv.Millis(testenv.Percentile(f.beyond, 99)),
				testenv.Millis(testenv.Percentile(f.beyondReachable, 50)), testenv.Millis(testenv.Percentile(f.beyondReachable, 99)), f.byResolver)
		}
	}
	for _, v := range g.opts.variants {
		if c := g.cpu[v.name]; c != nil {
			fmt.Fprintf(&b, "%s, the resolver pods' CPU per round: p50 %s, mean %s, max %s; their threads waited for a CPU p50 %s, mean %s, max %s; over %d rounds\n", v.name,
				testenv.Millis(testenv.Percentile(c.used, 50)), testenv.Millis(testenv.Mean(c.used)), testenv.Millis(slices.Max(c.used)),
				testenv.Millis(testenv.Percentile(c.waited, 50)), testenv.Millis(testenv.Mean(c.waited)), testenv.Millis(slices.Max(c.waited)), len(c.used))
		}
	}
	if g.opts.faults {
		for _, v := range g.opts.variants {
			calm, faulted := g.beyondByWindow(v)
			fmt.Fprintf(&b, "%s, beyond the first 200: %d cold starts outside the fault rounds, p99 %s, max %s; %d in them, max %s\n", v.name,
				len(calm), testenv.Millis(testenv.Percentile(calm, 99)), testenv.Millis(slices.Max(append(calm, 0))),
				len(faulted), testenv.Millis(slices.Max(append(faulted, 0))))
		}
	}
	g.tb.Log(b.String())
	for _, v := range g.opts.variants {
		for i, cell := range g.cells {
			f := g.figures[coldKey{v.name, i}]
			if f == nil {
				f = &coldFigures{}
			}
			if len(f.failed) > 0 {
				g.tb.Errorf("%s %s: %d of %d cold starts failed; the first: %s", v.name, cell.svc, len(f.failed), g.opts.count,
					strings.Join(f.failed[:min(len(f.failed), 3)], " | "))
			}
			if n := len(f.total) + len(f.failed); n != g.opts.count {
				g.tb.Errorf("%s %s: %d cold starts, want %d", v.name, cell.svc, n, g.opts.count)
			}
		}
	}
	if g.tb.Failed() {
		g.tb.Logf("diagnosis:%s", g.b.diagnose())
	}
}

// beyondByWindow is every cell's time beyond the first 200 under v,
// outside the fault rounds and in them.
func (g *coldGate) beyondByWindow(v coldVariant) (calm, faulted []time.Duration) {
	for i := range g.cells {
		if f := g.figures[coldKey{v.name, i}]; f != nil {
			calm, faulted = append(calm, f.beyond...), append(faulted, f.faulted...)
		}
	}
	return calm, faulted
}

// perPath counts the cold starts each path took, all variants and cells.
func (g *coldGate) perPath() map[string]int {
	out := map[string]int{}
	for k, f := range g.figures {
		out[g.cells[k.cell].path.name] += len(f.total)
	}
	return out
}

// TestColdStartsOnTheRealNodeWaitForReadiness is the gate in make test,
// kept cheap (ten rounds of six containers): the resolver as installed,
// an app on each path that listens 300 ms after its start and answers 503
// on its readiness path for a second after that, probed every second,
// once with no initialDelaySeconds and once with 2 s, when it is ready
// before the delay is over. Twenty cold starts per path, not one failed,
// no request reached a pod before its own readiness path first answered
// 200, and no readiness check answered 200 before the delay
// (checkInitialDelay).
func TestColdStartsOnTheRealNodeWaitForReadiness(t *testing.T) {
	const count = 10
	g := runColdGate(t, coldOptions{
		variants:      []coldVariant{coldVariants[0]},
		listenDelays:  []time.Duration{300 * time.Millisecond},
		notReadyFor:   time.Second,
		periods:       []int32{1},
		initialDelays: []int32{0, 2},
		count:         count,
	})
	for _, p := range coldPaths {
		if n := g.perPath()[p.name]; n < 2*count {
			t.Errorf("%s: %d good cold starts, want %d", p.name, n, 2*count)
		}
	}
}

// BenchmarkColdStartGateOnTheRealNode is the gate's figures (make bench):
// direct probing on and off (-coldstart-variants), apps that listen 0,
// 300 ms and 2 s after their start, periodSeconds 1 and 10, each path, in
// one run, -coldstart-count cold starts per cell. It fails on any failed
// cold start and reports per variant the cold start's p50 for the app
// that listens after 300 ms under the default period, and the worst p99
// beyond the app's first readiness 200 over the cells; the log has every
// cell's p50 and p99 (docs/benchmarks.md, "Cold start on the real node").
func BenchmarkColdStartGateOnTheRealNode(bm *testing.B) { benchEveryCell(bm, false) }

// BenchmarkColdStartSoakOnTheRealNode is the cold-start soak on the real
// node (make bench, issue 39): the gate's cells, -coldstart-count rounds
// per -coldstart-variants variant, with a resolver pod deleted a third of
// the way into each variant's rounds and the apiserver SIGKILLed and
// started again two thirds in, each while the round's requests are held.
// It fails on any failed cold start and reports, beside the gate's
// figures, the worst time beyond the app's first readiness 200 in the
// fault rounds.
func BenchmarkColdStartSoakOnTheRealNode(bm *testing.B) {
	if *coldStartCount < 3 {
		bm.Fatalf("-coldstart-count %d: the soak's faults need at least 3 rounds", *coldStartCount)
	}
	benchEveryCell(bm, true)
}

// benchEveryCell runs the gate over every cell (apps that listen 0, 300
// ms and 2 s after their start, periodSeconds 1 and 10, each path),
// -coldstart-count rounds per -coldstart-variants variant, with the
// soak's faults or without, and reports its figures.
func benchEveryCell(bm *testing.B, faults bool) {
	variants := benchVariants(bm)
	for range bm.N {
		g := runColdGate(bm, coldOptions{
			variants:     variants,
			listenDelays: []time.Duration{0, 300 * time.Millisecond, 2 * time.Second},
			periods:      []int32{1, 10},
			count:        *coldStartCount,
			faults:       faults,
			interleave:   *coldStartInterleave,
		})
		g.reportMetrics(bm)
	}
}

// BenchmarkColdStartOneAtATimeOnTheRealNode is the 3× cell as a
// user with one sleeping app meets it: apps that listen 300 ms and 2 s
// after their start (-coldstart-one-listen), under the default 10 s
// period (-coldstart-one-periods), each path, woken one at a time so that
// nothing else starts on the node beside them; -coldstart-count cold
// starts per cell and -coldstart-variants side by side in one run.
func BenchmarkColdStartOneAtATimeOnTheRealNode(bm *testing.B) {
	variants := benchVariants(bm)
	var listen []time.Duration
	for _, v := range strings.Split(*oneAtATimeListen, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil || d < 0 || d > time.Minute {
			bm.Fatalf("-coldstart-one-listen: %q is not a delay from 0 to 1m", v)
		}
		listen = append(listen, d)
	}
	periods := secondsList(bm, "-coldstart-one-periods", *oneAtATimePeriods, "periodSeconds", 1)
	delays := secondsList(bm, "-coldstart-one-initial-delays", *oneAtATimeInitialDelays, "initialDelaySeconds", 0)
	for range bm.N {
		g := runColdGate(bm, coldOptions{
			variants:      variants,
			listenDelays:  listen,
			periods:       periods,
			initialDelays: delays,
			count:         *coldStartCount,
			oneAtATime:    true,
			interleave:    *coldStartInterleave,
		})
		g.reportMetrics(bm)
	}
}

// secondsList parses flag's comma-separated value, each a probe field
// (what) in whole seconds from least to 60.
func secondsList(bm *testing.B, flag, value, what string, least int) []int32 {
	var out []int32
	for _, v := range strings.Split(value, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < least || n > 60 {
			bm.Fatalf("%s: %q is not a %s from %d to 60", flag, v, what, least)
		}
		out = append(out, int32(n))
	}
	return out
}

// benchVariants are the variants -coldstart-variants names, and checks
// -coldstart-count.
func benchVariants(bm *testing.B) []coldVariant {
	var variants []coldVariant
	for _, name := range strings.Split(*coldStartVariants, ",") {
		i := slices.IndexFunc(coldVariants, func(v coldVariant) bool { return v.name == strings.TrimSpace(name) })
		if i < 0 {
			bm.Fatalf("-coldstart-variants: unknown variant %q (on, off, baseline, cpu1)", name)
		}
		if coldVariants[i].baseline && *coldStartBaseline == "" {
			bm.Fatal("-coldstart-variants: baseline needs -coldstart-baseline, the checkout to build it from")
		}
		variants = append(variants, coldVariants[i])
	}
	if *coldStartCount < 1 {
		bm.Fatalf("-coldstart-count %d: want at least 1", *coldStartCount)
	}
	return variants
}

// reportMetrics reports per variant the cold start's p50 for the app that
// listens after 300 ms under the default period without initialDelaySeconds
// (when the run has that cell), and the worst p99 beyond
// the app's first readiness 200 over the cells, and the cold starts per
// path.
func (g *coldGate) reportMetrics(bm *testing.B) {
	for _, v := range g.opts.variants {
		var worst, worstReachable time.Duration
		var cold []time.Duration
		for i, cell := range g.cells {
			f := g.figures[coldKey{v.name, i}]
			if f == nil {
				continue
			}
			worst = max(worst, testenv.Percentile(f.beyond, 99))
			worstReachable = max(worstReachable, testenv.Percentile(f.beyondReachable, 99))
			if cell.listenDelay == 300*time.Millisecond && cell.period == 10 && cell.initialDelay == 0 {
				cold = append(cold, f.total...)
			}
		}
		if len(cold) > 0 { // no such cell in this run: no figure, rather than a 0
			bm.ReportMetric(float64(testenv.Percentile(cold, 50).Microseconds())/1000, v.name+"-l300ms-p10-cold-p50-ms")
		}
		bm.ReportMetric(float64(worst.Microseconds())/1000, v.name+"-beyond-first-200-worst-p99-ms")
		bm.ReportMetric(float64(worstReachable.Microseconds())/1000, v.name+"-beyond-reachable-worst-p99-ms")
		if c := g.cpu[v.name]; c != nil {
			bm.ReportMetric(float64(testenv.Percentile(c.used, 50).Microseconds())/1000, v.name+"-resolver-cpu-per-round-p50-ms")
			bm.ReportMetric(float64(testenv.Percentile(c.waited, 50).Microseconds())/1000, v.name+"-resolver-cpu-wait-per-round-p50-ms")
		}
	}
	for path, n := range g.perPath() {
		bm.ReportMetric(float64(n), path+"-cold-starts")
	}
	g.reportPerPath(bm)
	if *coldStartResults != "" {
		if err := g.writeResults(bm.Name(), *coldStartResults); err != nil {
			bm.Errorf("-coldstart-results: %v", err)
		}
	}
	if g.opts.faults {
		for _, v := range g.opts.variants {
			_, faulted := g.beyondByWindow(v)
			bm.ReportMetric(float64(slices.Max(append(faulted, 0)).Microseconds())/1000, v.name+"-fault-rounds-beyond-first-200-max-ms")
		}
	}
}

// reportPerPath reports, per variant, path and app (its listen delay),
// over the cells without initialDelaySeconds, the cold start's and the
// time beyond the first readiness 200's p50, p99 and max: the figures
// docs/benchmarks.md's table shows, "on-short-name-l300ms-cold-p50-ms".
func (g *coldGate) reportPerPath(bm *testing.B) {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	type group struct {
		variant, path string
		listen        time.Duration
	}
	cold, beyond := map[group][]time.Duration{}, map[group][]time.Duration{}
	var order []group
	for _, v := range g.opts.variants {
		for i, cell := range g.cells {
			f := g.figures[coldKey{v.name, i}]
			if f == nil || cell.initialDelay != 0 {
				continue
			}
			k := group{v.name, cell.path.name, cell.listenDelay}
			if _, ok := cold[k]; !ok {
				order = append(order, k)
			}
			cold[k], beyond[k] = append(cold[k], f.total...), append(beyond[k], f.beyond...)
		}
	}
	for _, k := range order {
		for name, ds := range map[string][]time.Duration{"cold": cold[k], "beyond-first-200": beyond[k]} {
			if len(ds) == 0 {
				continue
			}
			prefix := fmt.Sprintf("%s-%s-l%s-%s", k.variant, k.path, k.listen, name)
			bm.ReportMetric(ms(testenv.Percentile(ds, 50)), prefix+"-p50-ms")
			bm.ReportMetric(ms(testenv.Percentile(ds, 99)), prefix+"-p99-ms")
			bm.ReportMetric(ms(slices.Max(ds)), prefix+"-max-ms")
		}
	}
}

// coldCellResults is one cell's cold starts in -coldstart-results.
type coldCellResults struct {
	Variant        string    `json:"variant"`
	Path           string    `json:"path"`
	ListenMs       int64     `json:"listenMs"`
	PeriodSeconds  int32     `json:"periodSeconds"`
	InitialDelay   int32     `json:"initialDelaySeconds,omitempty"`
	ColdMs         []float64 `json:"coldMs"`
	BeyondFirst200 []float64 `json:"beyondFirst200Ms"`
}

// writeResults writes every cell's cold starts to file, as JSON.
func (g *coldGate) writeResults(benchmark, file string) error {
	ms := func(ds []time.Duration) []float64 {
		out := make([]float64, len(ds))
		for i, d := range ds {
			out[i] = float64(d.Microseconds()) / 1000
		}
		return out
	}
	var cells []coldCellResults
	for _, v := range g.opts.variants {
		for i, cell := range g.cells {
			f := g.figures[coldKey{v.name, i}]
			if f == nil {
				continue
			}
			cells = append(cells, coldCellResults{Variant: v.name, Path: cell.path.name, ListenMs: cell.listenDelay.Milliseconds(),
				PeriodSeconds: cell.period, InitialDelay: cell.initialDelay, ColdMs: ms(f.total), BeyondFirst200: ms(f.beyond)})
		}
	}
	b, err := json.MarshalIndent(map[string]any{"benchmark": benchmark, "cells": cells}, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(file, append(b, '\n'), 0o644)
}
