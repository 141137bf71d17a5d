package apiserver

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/controller"
	"github.com/elasti-dev/elasti/test/localcluster"
	"github.com/elasti-dev/elasti/test/localcluster/clustertest"
	"github.com/elasti-dev/elasti/test/testenv"
)

const (
	fleetSize = 30
	// killAfter and killSpread place the kill after the first write of a
	// switch: killAfter plus up to killSpread, while the switch is under way.
	killAfter  = 100 * time.Millisecond
	killSpread = 200 * time.Millisecond
	// holdConverged is how long a converged fleet must stay so.
	holdConverged = 2 * time.Second
	// exitGrace is how long after the apiserver is back an operator may
	// still exit because of the outage: one that failed to renew its lease
	// is already on its way out.
	exitGrace = testenv.LeaseDuration
	// readTimeout bounds each read of the test's own, so none hangs on an
	// apiserver that is going away.
	readTimeout = 5 * time.Second
	// outageHold keeps the apiserver down a little longer than a local
	// restart takes (3 to 10 s here); a real one takes longer still. The
	// cluster's controllers' watches back off meanwhile as they do there,
	// and stay behind for tens of seconds after it is back: that is what
	// showed the operator trusting stale ready endpoints.
	outageHold = 5 * time.Second
	// clusterStuck is how long the test waits for the cluster's own
	// controllers to catch up after a restart before it restarts
	// kube-controller-manager. Its informers back off up to 30 s (with
	// jitter, more) before they list again, and its EndpointSlice
	// controller retries a Service whose syncs failed meanwhile after 1 s,
	// 2 s, 4 s, ... up to 1000 s ("EndpointSlice informer cache is out of
	// date"): a Service's slice was seen two minutes behind its pods, and
	// once more than four.
	clusterStuck = 90 * time.Second
	// clusterCatchUp bounds the cluster's catch-up after that restart.
	clusterCatchUp = 2 * time.Minute
	// operatorLag bounds the operator's own convergence once the cluster
	// has caught up: the live pod check looks again every 2 s.
	operatorLag = 10 * time.Second
	// proxyTimeout bounds the convergence to proxy after a restart, which
	// needs nothing of the cluster but the scale writes: the operator's
	// replacement takes the lease and fronts every Service.
	proxyTimeout = 60 * time.Second
	// gracefulExit bounds an apiserver's graceful stop: it closes its
	// watches within 2 s (--shutdown-watch-termination-grace-period) and is
	// killed only after 10 s.
	gracefulExit = 8 * time.Second
)

// The apiserver is SIGKILLed in the middle of a fleet-wide scale-down that
// the operator makes by itself (the triggers go idle), and again in the
// middle of a fleet-wide wake, and started again each time after about
// 10 s (outageHold), long enough for the cluster's own controllers to fall
// behind as they do after a real apiserver restart. The operator
// runs as a process with a short lease under a supervisor that restarts it
// whenever it exits. Every ElastiService converges, with exactly one
// resolver slice per proxied Service and none per served one, and no
// Service is ever seen without a ready endpoint: the watcher tolerates no
// darkness; it only cannot look while the apiserver is down.
func TestAPIServerRestartDuringFleetSwitchConverges(t *testing.T) {
	b := newBed(t, fleetSize)
	dark := b.e.WatchDark(b.names...)
	b.restartDuring("scale-down", b.sleepFleet, elastiv1alpha1.ModeProxy)
	b.restartDuring("wake", b.wakeFleet, elastiv1alpha1.ModeServe)
	b.checkExits()
	samples, darkServices := dark.Stats()
	t.Logf("%d Services, 2 apiserver restarts, %d operator exits; %d dark-Service samples (%d more could not be taken while the apiserver was down), %d Services ever dark",
		len(b.names), len(b.sup.exited()), samples, dark.Unreadable(), darkServices)
}

// A graceful restart (SIGTERM) keeps the apiserver's port, certificates,
// tokens and etcd: the kubeconfigs written at the start still work, and
// what was stored before is there after.
func TestAPIServerGracefulRestartKeepsClientsAndData(t *testing.T) {
	e := testenv.New(t)
	c := clustertest.Get(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "before", Namespace: e.NS}, Data: map[string]string{"k": "v"}}
	created, err := e.Kube.CoreV1().ConfigMaps(e.NS).Create(e.Ctx(), cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := c.StopAPIServer(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	if err := c.StartAPIServer(e.Ctx()); err != nil {
		t.Fatal(err)
	}
	took := stopped.Sub(start)
	t.Logf("SIGTERM: the apiserver exited in %s and was ready %s after the start",
		took.Round(time.Millisecond), time.Since(stopped).Round(time.Millisecond))
	if took > gracefulExit {
		t.Errorf("the apiserver took %s to stop after SIGTERM; a graceful stop takes under %s, so it was killed", took, gracefulExit)
	}
	got, err := e.Kube.CoreV1().ConfigMaps(e.NS).Get(e.Ctx(), "before", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("read after the restart through the old kubeconfig: %v", err)
	}
	if got.UID != created.UID || got.Data["k"] != "v" {
		t.Errorf("after the restart: uid %s data %v; before: uid %s data %v", got.UID, got.Data, created.UID, created.Data)
	}
	if _, err := c.Kubectl(e.Ctx(), "get", "configmap", "-n", e.NS, "before"); err != nil {
		t.Errorf("kubectl after the restart: %v", err)
	}
}

// bed is a fleet of ElastiServices behind a supervised operator process.
type bed struct {
	t       *testing.T
	e       *testenv.Env
	cluster *localcluster.Cluster
	prom    *testenv.FakePrometheus
	sup     *supervisor
	names   []string
	awake   map[string]int32 // each target's replicas when served
	outages []outage
}

// outage is when the apiserver was killed and when it was ready again.
type outage struct{ kill, back time.Time }

// newBed makes n busy ElastiServices whose targets have one or two ready
// pods, behind an operator process that polls their triggers often, and
// waits until every one serves.
func newBed(t *testing.T, n int) *bed {
	b := &bed{t: t, e: testenv.New(t), cluster: clustertest.Get(t), prom: testenv.NewFakePrometheus(t), awake: map[string]int32{}}
	b.prom.Set("5", "1", testenv.PrometheusHealthy)
	b.e.Resolver(2)
	for i := range n {
		name := fmt.Sprintf("app-%d", i)
		replicas := int32(1 + i%2)
		b.names, b.awake[name] = append(b.names, name), replicas
		b.e.App(name, replicas)
		b.e.ElastiServiceWith(name, name, elastiv1alpha1.KindDeployment, name, func(es *elastiv1alpha1.ElastiService) {
			es.Spec.MinTargetReplicas = replicas
			es.Spec.CooldownPeriod = 1
			es.Spec.Triggers = testenv.IdleTrigger("1")
		})
	}
	b.sup = supervise(t, b.e, "--polling-interval=250ms", "--prometheus-server-address="+b.prom.URL)
	b.e.Eventually("the first leader", func() (bool, string) { return b.sup.leader().Ready(), "not ready" })
	b.e.Eventually("every Service served by its pods", b.converged(elastiv1alpha1.ModeServe))
	return b
}

// restartDuring starts act, kills the apiserver a little after act's first
// write, starts it again, and waits until the fleet is in mode and stays
// there.
func (b *bed) restartDuring(what string, act func(stop <-chan struct{}), mode string) {
	b.t.Helper()
	stop := make(chan struct{})
	var acting sync.WaitGroup
	defer func() { close(stop); acting.Wait() }()
	before := b.observeTargets()
	acting.Go(func() { act(stop) })
	first := b.awaitFirstWrite(what, before)
	// Counted before the wait, not after it: under the switch's load a List
	// can take longer than the whole delay.
	inMode, err := b.inMode(mode)
	if err != nil {
		b.t.Fatal(err)
	}
	time.Sleep(time.Until(first.Add(killAfter + rand.N(killSpread))))

	kill := time.Now()
	if err := b.cluster.StopAPIServer(syscall.SIGKILL); err != nil {
		b.t.Fatal(err)
	}
	stopped := time.Now()
	time.Sleep(outageHold)
	if err := b.cluster.StartAPIServer(b.e.Ctx()); err != nil {
		b.t.Fatal(err)
	}
	back := time.Now()
	b.outages = append(b.outages, outage{kill: kill, back: back})
	if inMode == len(b.names) {
		b.t.Errorf("%s: the switch was over before the kill, %s after its first write; kill sooner", what, kill.Sub(first).Round(time.Millisecond))
	}

	// When every target has its final size, the operator's own writes are
	// done; the rest is the cluster's (pods, their EndpointSlices) and the
	// operator's reaction to it.
	scaled, caughtUp := b.awaitConverged(what, mode)
	converged := time.Now()
	b.holds(what, mode, holdConverged)
	b.t.Logf("%s: apiserver killed %s after the first write, %d of %d ElastiServices in %s just before; down %s (exited in %s, held down %s, /readyz %s after the start); "+
		"after it was back, every target sized in %s,%s and every Service converged in %s; %d operator exits so far",
		what, kill.Sub(first).Round(time.Millisecond), inMode, len(b.names), mode, back.Sub(kill).Round(time.Millisecond),
		stopped.Sub(kill).Round(time.Millisecond), outageHold, back.Sub(stopped.Add(outageHold)).Round(time.Millisecond),
		max(scaled.Sub(back), 0).Round(time.Millisecond), clusterClause(mode, back, caughtUp),
		converged.Sub(back).Round(time.Millisecond), len(b.sup.exited()))
}

// clusterClause says when the cluster caught up, where serving waited for it.
func clusterClause(mode string, back, caughtUp time.Time) string {
	switch {
	case mode != elastiv1alpha1.ModeServe:
		return ""
	case caughtUp.IsZero():
		return " the cluster was not seen caught up,"
	default:
		return fmt.Sprintf(" the cluster listed a live pod of every target in %s,", caughtUp.Sub(back).Round(time.Millisecond))
	}
}

// awaitConverged waits until every Service is settled in mode, and
// returns when every target had its size and when the cluster's
// EndpointSlices had caught up with the pods.
//
// Serve needs the cluster: until kube-controller-manager's EndpointSlice
// controller lists the woken pods, the Service's slice names only the pods
// of the last scale-down, which are gone, and the operator rightly keeps
// the resolver in front; until the ReplicaSet controller has acted on the
// latest scale, the pods of the last scale-down may still be there, ready,
// but about to go, and the operator rightly does not trust them either.
// After a restart that can take minutes, which is the cluster's time, not
// the operator's: the operator is held to operatorLag after it, and a
// kube-controller-manager still behind after clusterStuck is restarted.
// Proxy needs nothing of the cluster but the scale.
func (b *bed) awaitConverged(what, mode string) (scaled, caughtUp time.Time) {
	b.t.Helper()
	var last observation
	var lateBy time.Duration
	timeout := proxyTimeout
	if mode == elastiv1alpha1.ModeServe {
		timeout = clusterStuck + clusterCatchUp + operatorLag
	}
	start, kcmRestarted := time.Now(), false
	err := wait.PollUntilContextTimeout(b.e.Ctx(), 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		last = b.observe()
		now := time.Now()
		if mode == elastiv1alpha1.ModeServe && caughtUp.IsZero() && !kcmRestarted && now.Sub(start) > clusterStuck {
			kcmRestarted = true
			b.t.Logf("%s: the cluster had not caught up %s after the restart (%v); restarting kube-controller-manager", what, clusterStuck, last.behind(b))
			if err := b.cluster.RestartControllerManager(ctx); err != nil {
				return false, fmt.Errorf("restart kube-controller-manager: %w", err)
			}
		}
		if scaled.IsZero() && last.sized(b, mode) == len(b.names) {
			scaled = now
		}
		if caughtUp.IsZero() && mode == elastiv1alpha1.ModeServe && last.caughtUp(b) {
			caughtUp = now
		}
		if ok, _ := b.settled(last, mode); ok {
			return true, nil
		}
		if !caughtUp.IsZero() && now.Sub(caughtUp) > operatorLag {
			lateBy = now.Sub(caughtUp)
			return false, errors.New("operator behind the cluster")
		}
		return false, nil
	})
	if err == nil {
		if caughtUp.IsZero() && mode == elastiv1alpha1.ModeServe {
			// The reads of one observation are not one snapshot: a pod can
			// become ready between them.
			b.t.Logf("%s: converged before the cluster was seen caught up (%v)", what, last.behind(b))
		}
		return scaled, caughtUp
	}
	_, seen := b.settled(last, mode)
	switch {
	case lateBy > 0:
		b.t.Fatalf("%s: the cluster caught up, but the operator had not converged %s later: %s\n%s",
			what, lateBy.Round(time.Millisecond), seen, b.describe(last.unsettled(b, mode)))
	case caughtUp.IsZero() && mode == elastiv1alpha1.ModeServe:
		b.t.Fatalf("%s: the cluster's EndpointSlices had not caught up with the pods %s after the restart (%v)\n%s",
			what, timeout, last.err, b.describe(last.behind(b)))
	default:
		b.t.Fatalf("%s: not converged after the restart: %v; %s\n%s", what, err, seen, b.describe(last.unsettled(b, mode)))
	}
	return scaled, caughtUp
}

// awaitFirstWrite waits until a target's replicas or a resolver slice
// differ from before, the first write of a scale-down (the resolver slice,
// made before the scale) or of a wake (the scale), and returns when it saw
// it.
func (b *bed) awaitFirstWrite(what string, before observation) time.Time {
	b.t.Helper()
	deadline := time.Now().Add(testenv.WaitTimeout)
	for time.Now().Before(deadline) {
		now := b.observeTargets()
		for name := range b.awake {
			if now.replicas[name] != before.replicas[name] || now.fronted[name] != before.fronted[name] {
				return time.Now()
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.t.Fatalf("%s: no write within %s", what, testenv.WaitTimeout)
	return time.Time{}
}

// holds fails the test unless the fleet stays in mode for d.
func (b *bed) holds(what, mode string, d time.Duration) {
	b.t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if ok, obs := b.converged(mode)(); !ok {
			b.t.Fatalf("%s: the fleet converged to %s, then left it: %s", what, mode, obs)
		}
	}
}

// sleepFleet makes every trigger idle; the operator's poller does the rest,
// resolver slice first, then the scale to zero.
func (b *bed) sleepFleet(<-chan struct{}) { b.prom.Set("0", "1", testenv.PrometheusHealthy) }

// wakeFleet makes the fleet busy and asks the running operator to wake
// every Service, as resolvers holding a request for each would: each keeps
// asking until its Service is woken or stop closes, through the outage and
// operator restarts.
func (b *bed) wakeFleet(stop <-chan struct{}) {
	b.prom.Set("5", "1", testenv.PrometheusHealthy)
	testenv.WakeEvery(stop, func() string { return b.sup.leader().Scale }, b.e.NS, b.names)
}

// checkExits fails the test for an operator exit that was not clean (a
// crash, a signal, or an exit code without the error it exited on) or
// that the apiserver's outages do not explain.
func (b *bed) checkExits() {
	b.t.Helper()
	for _, ex := range b.sup.exited() {
		code := ex.state.ExitCode()
		when := "outside every outage"
		explained := false
		for i, o := range b.outages {
			if !ex.at.Before(o.kill) && !ex.at.After(o.back.Add(exitGrace)) {
				when, explained = fmt.Sprintf("%s into outage %d", ex.at.Sub(o.kill).Round(time.Millisecond), i+1), true
			}
		}
		b.t.Logf("%s exited %s with code %d: %s", ex.name, when, code, ex.reason)
		clean := ex.crash == "" && (code == 0 || code == 1 && ex.reason != "")
		if !clean {
			b.t.Errorf("%s did not exit cleanly: %s; code %d; %s", ex.name, ex.state, code, ex.crash)
		}
		if !explained {
			b.t.Errorf("%s exited %s", ex.name, when)
		}
	}
	if !b.sup.leader().Ready() {
		b.t.Errorf("the running operator %s is not the ready leader at the end", b.sup.leader().Name)
	}
}

// observation is one read of the fleet: each ElastiService's mode and
// whether it is Ready, each target's replicas, and how many resolver slices
// front each Service. Every ElastiService, target and Service shares its
// name here.
type observation struct {
	err      error
	mode     map[string]string
	ready    map[string]bool
	replicas map[string]int32
	fronted  map[string]int
	// readyPods and listed are, per Service, the UIDs of its target's
	// ready pods and of the pods its own (kube-controller-manager's)
	// EndpointSlices list as serving.
	readyPods, listed map[string]sets.Set[string]
	// rsBehind names the targets with a ReplicaSet whose controller has
	// not yet acted on its latest spec.
	rsBehind sets.Set[string]
}

// observe reads the fleet; a failed read (the apiserver down) is recorded
// in err, not fatal.
func (b *bed) observe() observation {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(b.e.Ctx()), readTimeout)
	defer cancel()
	o := b.observeTargets()
	if o.err != nil {
		return o
	}
	list, err := b.e.Elasti.ElastiV1alpha1().ElastiServices(b.e.NS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return observation{err: err}
	}
	o.mode, o.ready = map[string]string{}, map[string]bool{}
	for _, es := range list.Items {
		o.mode[es.Name] = es.Status.Mode
		o.ready[es.Name] = meta.IsStatusConditionTrue(es.Status.Conditions, elastiv1alpha1.ConditionReady)
	}
	if o.readyPods, o.listed, err = b.observeEndpoints(ctx); err != nil {
		return observation{err: err}
	}
	rss, err := b.e.Kube.AppsV1().ReplicaSets(b.e.NS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return observation{err: err}
	}
	o.rsBehind = sets.New[string]()
	for _, rs := range rss.Items {
		if rs.Status.ObservedGeneration < rs.Generation {
			o.rsBehind.Insert(rs.Labels["app"])
		}
	}
	return o
}

// observeEndpoints reads, per Service, the UIDs of its target's ready pods
// and of the pods the cluster's EndpointSlices for it list as serving.
func (b *bed) observeEndpoints(ctx context.Context) (readyPods, listed map[string]sets.Set[string], _ error) {
	pods, err := b.e.Kube.CoreV1().Pods(b.e.NS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	readyPods, listed = map[string]sets.Set[string]{}, map[string]sets.Set[string]{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && testenv.PodReady(&p) {
			insert(readyPods, p.Labels["app"], string(p.UID))
		}
	}
	slices, err := b.e.Kube.DiscoveryV1().EndpointSlices(b.e.NS).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelManagedBy + "=endpointslice-controller.k8s.io",
	})
	if err != nil {
		return nil, nil, err
	}
	for _, s := range slices.Items {
		for _, ep := range s.Endpoints {
			if ep.TargetRef != nil && (ep.Conditions.Serving == nil || *ep.Conditions.Serving) {
				insert(listed, s.Labels[discoveryv1.LabelServiceName], string(ep.TargetRef.UID))
			}
		}
	}
	return readyPods, listed, nil
}

func insert(m map[string]sets.Set[string], key, value string) {
	if m[key] == nil {
		m[key] = sets.New[string]()
	}
	m[key].Insert(value)
}

// observeTargets reads the targets' replicas and the resolver slices, where
// a switch's first write shows.
func (b *bed) observeTargets() observation {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(b.e.Ctx()), readTimeout)
	defer cancel()
	o := observation{replicas: map[string]int32{}, fronted: map[string]int{}}
	deployments, err := b.e.Kube.AppsV1().Deployments(b.e.NS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return observation{err: err}
	}
	for _, d := range deployments.Items {
		if d.Spec.Replicas != nil {
			o.replicas[d.Name] = *d.Spec.Replicas
		}
	}
	slices, err := b.e.Kube.DiscoveryV1().EndpointSlices(b.e.NS).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelManagedBy + "=" + controller.ManagedByValue,
	})
	if err != nil {
		return observation{err: err}
	}
	for _, s := range slices.Items {
		o.fronted[s.Labels[discoveryv1.LabelServiceName]]++
	}
	return o
}

// inMode counts the ElastiServices Ready in mode: the last step of each
// Service's switch.
func (b *bed) inMode(mode string) (int, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(b.e.Ctx()), readTimeout)
	defer cancel()
	list, err := b.e.Elasti.ElastiV1alpha1().ElastiServices(b.e.NS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, es := range list.Items {
		if es.Status.Mode == mode && meta.IsStatusConditionTrue(es.Status.Conditions, elastiv1alpha1.ConditionReady) {
			n++
		}
	}
	return n, nil
}

// count is how many Services are settled in mode: the ElastiService Ready
// in mode, the target at zero (proxy) or at its size (serve), and exactly
// one resolver slice (proxy) or none (serve). It also describes the first
// one that is not.
func (o observation) count(b *bed, mode string) (int, string) {
	if o.err != nil {
		return 0, o.err.Error()
	}
	n, first := 0, ""
	for _, name := range b.names {
		if o.isSettled(b, name, mode) {
			n++
		} else if first == "" {
			first = fmt.Sprintf("%s: mode %q, Ready %v, replicas %d, resolver slices %d",
				name, o.mode[name], o.ready[name], o.replicas[name], o.fronted[name])
		}
	}
	return n, first
}

func (o observation) isSettled(b *bed, name, mode string) bool {
	replicas, fronted := b.want(name, mode)
	return o.err == nil && o.mode[name] == mode && o.ready[name] && o.replicas[name] == replicas && o.fronted[name] == fronted
}

// caughtUp reports whether the cluster has caught up with every woken
// target as far as serving it needs: its ReplicaSets' controller has acted
// on their latest spec, and its Service's EndpointSlices list one of its
// ready pods as serving.
func (o observation) caughtUp(b *bed) bool {
	return o.err == nil && len(o.behind(b)) == 0
}

// behind lists the Services the cluster has not caught up with.
func (o observation) behind(b *bed) []string {
	var out []string
	for _, name := range b.names {
		if o.err != nil || o.rsBehind.Has(name) || o.readyPods[name].Intersection(o.listed[name]).Len() == 0 {
			out = append(out, name)
		}
	}
	return out
}

// unsettled lists the Services not settled in mode in o.
func (o observation) unsettled(b *bed, mode string) []string {
	var out []string
	for _, name := range b.names {
		if !o.isSettled(b, name, mode) {
			out = append(out, name)
		}
	}
	return out
}

// sized counts the targets that have their size in mode: zero (proxy) or
// awake (serve).
func (o observation) sized(b *bed, mode string) int {
	n := 0
	for _, name := range b.names {
		if replicas, _ := b.want(name, mode); o.err == nil && o.replicas[name] == replicas {
			n++
		}
	}
	return n
}

// want is what Service name settled in mode has: its target's replicas and
// how many resolver slices front it.
func (b *bed) want(name, mode string) (replicas int32, fronted int) {
	if mode == elastiv1alpha1.ModeProxy {
		return 0, 1
	}
	return b.awake[name], 0
}

// settled reports whether every Service is settled in mode in o.
func (b *bed) settled(o observation, mode string) (bool, string) {
	n, first := o.count(b, mode)
	return n == len(b.names), fmt.Sprintf("%d of %d in %s; %s", n, len(b.names), mode, first)
}

// converged reports whether every Service is settled in mode.
func (b *bed) converged(mode string) func() (bool, string) {
	return func() (bool, string) { return b.settled(b.observe(), mode) }
}

// describe says, for the first few of names, what the cluster holds and
// what every operator logged about them.
func (b *bed) describe(names []string) string {
	var out strings.Builder
	for i, name := range names {
		if i == 3 {
			fmt.Fprintf(&out, "(%d more)\n", len(names)-i)
			break
		}
		fmt.Fprintf(&out, "--- %s ---\n%s", name, b.e.DescribeDeployment(b.e.Ctx(), name))
		out.WriteString(b.sup.logsAbout(b.e.NS+"/"+name, 30))
		out.WriteString(linesAbout(filepath.Join(b.cluster.Dir, "kube-controller-manager.log"), b.e.NS+"/"+name, 20))
	}
	return out.String()
}
