package e2e

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/controller"
	elastiinformers "github.com/elasti-dev/elasti/pkg/generated/informers/externalversions"
	"github.com/elasti-dev/elasti/pkg/operator"
	"github.com/elasti-dev/elasti/test/localcluster/clustertest"
	"github.com/elasti-dev/elasti/test/testenv"
)

// fleetPrefix starts the name of every fleet member.
const fleetPrefix = "app-"

var (
	fleetSize         = flag.Int("fleet-size", 1000, "ElastiServices in BenchmarkFleet, each with its own Deployment and Service")
	fleetPerNamespace = flag.Int("fleet-per-namespace", 100, "fleet members per namespace in BenchmarkFleet")
	fleetPhases       = flag.String("fleet-phases", "all", `BenchmarkFleet's phases: "all", or "foreign" to go from the restart straight to another tool's scale-down, skipping the operator's own scale-down and the wake (at N = 10,000 they take half an hour)`)
)

// fleetMember is one ElastiService of the fleet, with the Deployment and
// Service of the same name in its namespace.
type fleetMember struct{ ns, name string }

// key is how fleetWatch knows the member: "namespace/name".
func (m fleetMember) key() string { return m.ns + "/" + m.name }

// fleetWatch follows the fleet through the benchmark's own informers, so
// completion is seen the moment it happens rather than at the next poll.
type fleetWatch struct {
	// namespaces are the fleet's; the informers see all namespaces and keep
	// only these.
	namespaces map[string]bool
	mu         sync.Mutex
	// All three are keyed by fleetMember.key.
	modes   map[string]string // ElastiService → mode when Ready=True
	ready   map[string]bool   // Deployment → has a ready replica
	serving map[string]bool   // Service → its own slices list a ready endpoint
	fronted map[string]bool   // Service → the resolver slice lists a ready endpoint
	// frontedAt is when each Service was last seen fronted, from not.
	frontedAt map[string]time.Time
	// endpoints counts each Service's ready endpoints per slice, its own
	// and the resolver's: what kube-proxy routes to.
	endpoints map[string]map[string]int
	// Once armed, a Service whose slices list no ready endpoint after an
	// event is dark; dark collects them until the next darkSince.
	armed bool
	dark  map[string]bool
	// darkFrom holds when each Service now dark went dark; ended collects
	// the spells that ended since the last darkSince.
	darkFrom map[string]time.Time
	ended    []darkSpell
	changed  chan struct{}
	esSynced cache.InformerSynced
	dSynced  cache.InformerSynced
	// limit bounds every wait.
	limit time.Duration
}

func newFleetWatch(ctx context.Context, e *testenv.Env, namespaces []string) *fleetWatch {
	w := &fleetWatch{namespaces: map[string]bool{}, modes: map[string]string{}, ready: map[string]bool{}, serving: map[string]bool{}, fronted: map[string]bool{}, frontedAt: map[string]time.Time{},
		endpoints: map[string]map[string]int{}, dark: map[string]bool{}, darkFrom: map[string]time.Time{}, changed: make(chan struct{}, 1), limit: 10 * time.Minute}
	for _, ns := range namespaces {
		w.namespaces[ns] = true
	}
	ef := elastiinformers.NewSharedInformerFactory(e.Elasti, 0)
	kf := informers.NewSharedInformerFactory(e.Kube, 0)
	onES := func(obj any) {
		es, ok := obj.(*elastiv1alpha1.ElastiService)
		if !ok || !w.namespaces[es.Namespace] {
			return
		}
		mode := ""
		if c := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionReady); c != nil && c.Status == metav1.ConditionTrue {
			mode = es.Status.Mode
		}
		w.mu.Lock()
		w.modes[es.Namespace+"/"+es.Name] = mode
		w.mu.Unlock()
		w.notify()
	}
	onD := func(obj any) {
		d, ok := obj.(*appsv1.Deployment)
		if !ok || !w.namespaces[d.Namespace] {
			return
		}
		w.mu.Lock()
		w.ready[d.Namespace+"/"+d.Name] = d.Status.ReadyReplicas > 0
		w.mu.Unlock()
		w.notify()
	}
	// Every slice event updates the Service's ready endpoints; the
	// EndpointSlice controller's own slices (not the resolver's) also tell
	// when the cluster itself has taken a Service's endpoints away.
	onSlice := func(obj any, deleted bool) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		sl, ok := obj.(*discoveryv1.EndpointSlice)
		if !ok || !w.namespaces[sl.Namespace] {
			return
		}
		name := sl.Labels[discoveryv1.LabelServiceName]
		if !strings.HasPrefix(name, fleetPrefix) {
			return // a private Service
		}
		svc := sl.Namespace + "/" + name
		readyEP := 0
		for _, ep := range sl.Endpoints {
			if !deleted && (ep.Conditions.Ready == nil || *ep.Conditions.Ready) {
				readyEP++
			}
		}
		w.mu.Lock()
		switch sl.Labels[discoveryv1.LabelManagedBy] {
		case "endpointslice-controller.k8s.io":
			w.serving[svc] = readyEP > 0
		case controller.ManagedByValue:
			if readyEP > 0 && !w.fronted[svc] {
				w.frontedAt[svc] = time.Now()
			}
			w.fronted[svc] = readyEP > 0
		}
		if w.endpoints[svc] == nil {
			w.endpoints[svc] = map[string]int{}
		}
		w.endpoints[svc][sl.Name] = readyEP
		total := 0
		for _, n := range w.endpoints[svc] {
			total += n
		}
		switch from, wasDark := w.darkFrom[svc]; {
		case w.armed && total == 0 && !wasDark:
			w.dark[svc] = true
			w.darkFrom[svc] = time.Now()
		case total > 0 && wasDark:
			w.ended = append(w.ended, darkSpell{svc: svc, from: from, to: time.Now()})
			delete(w.darkFrom, svc)
		}
		w.mu.Unlock()
		w.notify()
	}
	sInf := kf.Discovery().V1().EndpointSlices().Informer()
	_, _ = sInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { onSlice(o, false) },
		UpdateFunc: func(_, o any) { onSlice(o, false) },
		DeleteFunc: func(o any) { onSlice(o, true) },
	})
	esInf := ef.Elasti().V1alpha1().ElastiServices().Informer()
	dInf := kf.Apps().V1().Deployments().Informer()
	_, _ = esInf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: onES, UpdateFunc: func(_, o any) { onES(o) }})
	_, _ = dInf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: onD, UpdateFunc: func(_, o any) { onD(o) }})
	w.esSynced, w.dSynced = esInf.HasSynced, dInf.HasSynced
	ef.Start(ctx.Done())
	kf.Start(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), w.esSynced, w.dSynced, sInf.HasSynced)
	return w
}

// darkSpells says how many Services were seen dark in a phase, and the
// longest time one of them stayed so: the bound on how long a Service
// goes without endpoints. worst are the longest spells, for a reader
// looking for the cause.
type darkSpells struct {
	services int
	longest  time.Duration
	worst    []darkSpell
}

// darkSpell is one time a Service was without a ready endpoint; ongoing
// ones end at the darkSince that reports them.
type darkSpell struct {
	svc      string
	from, to time.Time
}

func (s darkSpell) length() time.Duration { return s.to.Sub(s.from) }

// worstDarkSpells is how many spells a phase prints.
const worstDarkSpells = 5

func (d darkSpells) String() string {
	if d.services == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (longest %s)", d.services, d.longest.Round(time.Millisecond))
}

// darkSince arms the dark-Service check, if it was not, and returns the
// Services seen dark since the last call; one still dark counts its spell
// until now.
func (w *fleetWatch) darkSince() darkSpells {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.armed = true
	now := time.Now()
	spells := w.ended
	d := darkSpells{services: len(w.dark)}
	w.dark, w.ended = map[string]bool{}, nil
	for svc, from := range w.darkFrom {
		spells = append(spells, darkSpell{svc: svc, from: from, to: now})
		w.dark[svc] = true // and in the next phase, while it lasts
	}
	slices.SortFunc(spells, func(a, b darkSpell) int { return cmp.Compare(b.length(), a.length()) })
	d.worst = spells[:min(len(spells), worstDarkSpells)]
	if len(d.worst) > 0 {
		d.longest = d.worst[0].length()
	}
	return d
}

// printWorst lists a phase's longest dark spells; since, if given, says
// when each Service's scale-down was written, to tell how soon after it
// the cluster took the endpoints away and how late the resolver came.
func (d darkSpells) printWorst(phase string, since map[string]time.Time) {
	for _, s := range d.worst {
		at := s.from.Format("15:04:05.000")
		if t, ok := since[s.svc]; ok {
			at += fmt.Sprintf(", %s after its scale-down was written", s.from.Sub(t).Round(time.Millisecond))
		}
		fmt.Fprintf(os.Stderr, "  %s: %s dark from %s, for %s\n", phase, s.svc, at, s.length().Round(time.Millisecond))
	}
}

// frontedLag is the distribution of each Service's time from its
// scale-down's write to the resolver's slice fronting it.
func (w *fleetWatch) frontedLag(written map[string]time.Time) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var lags []time.Duration
	for svc, at := range written {
		if f, ok := w.frontedAt[svc]; ok && f.After(at) {
			lags = append(lags, f.Sub(at))
		}
	}
	if len(lags) == 0 {
		return "none seen"
	}
	slices.Sort(lags)
	q := func(p float64) time.Duration { return lags[int(p*float64(len(lags)-1))].Round(time.Millisecond) }
	return fmt.Sprintf("p50 %s, p90 %s, p99 %s, max %s (%d of %d)", q(0.5), q(0.9), q(0.99), q(1), len(lags), len(written))
}

func (w *fleetWatch) notify() {
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// servingCount is how many fleet Services still have a ready endpoint of
// their own.
func (w *fleetWatch) servingCount() int { return w.countTrue(w.serving) }

// frontedCount is how many fleet Services the resolver is in front of.
func (w *fleetWatch) frontedCount() int { return w.countTrue(w.fronted) }

func (w *fleetWatch) countTrue(m map[string]bool) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, v := range m {
		if v {
			n++
		}
	}
	return n
}

// downFigures are what a fleet-wide scale-down measured.
type downFigures struct {
	// fronted: every Service has the resolver in front; proxy: every
	// ElastiService says so in its status; clusterStop: the cluster has
	// taken every Service's own endpoints away. All from the scale-down's
	// start.
	fronted, proxy, clusterStop time.Duration
	dark                        darkSpells
}

// measureScaleDown waits for a fleet-wide scale-down that began at from
// to finish, and reports its figures and the Services seen dark.
func (w *fleetWatch) measureScaleDown(b *testing.B, n int, from time.Time) downFigures {
	b.Helper()
	down := w.waitAll(b,
		fleetWait{"every Service fronted by the resolver", func(map[string]int, int) bool { return w.frontedCount() == n }},
		fleetWait{"all in proxy", func(m map[string]int, _ int) bool { return m[elastiv1alpha1.ModeProxy] == n }},
		fleetWait{"the cluster removing the endpoints", func(map[string]int, int) bool { return w.servingCount() == 0 }})
	return downFigures{fronted: down[0].Sub(from), proxy: down[1].Sub(from), clusterStop: down[2].Sub(from), dark: w.darkSince()}
}

func (w *fleetWatch) counts() (mode map[string]int, ready int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	mode = map[string]int{}
	for _, m := range w.modes {
		mode[m]++
	}
	for _, r := range w.ready {
		if r {
			ready++
		}
	}
	return mode, ready
}

// waitUntil blocks until cond holds and returns when it first did, printing
// progress every 5 s so a long wait never looks hung; it gives up after
// limit. It may run in its own goroutine.
func (w *fleetWatch) waitUntil(what string, limit time.Duration, cond func(mode map[string]int, ready int) bool) (time.Time, error) {
	deadline := time.Now().Add(limit)
	lastLog := time.Now()
	for {
		mode, ready := w.counts()
		if cond(mode, ready) {
			return time.Now(), nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("%s: not done after %s (modes %v, ready deployments %d)", what, limit, mode, ready)
		}
		if time.Since(lastLog) > 5*time.Second {
			fmt.Fprintf(os.Stderr, "  … %s: modes %v, ready deployments %d\n", what, mode, ready)
			lastLog = time.Now()
		}
		select {
		case <-w.changed:
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitAll runs the waits concurrently, so each time is when its own
// condition first held, and prints each as it holds, so a run stopped later
// still has it. It fails the benchmark if any timed out, saying first how
// many Services were seen dark in the phase so far.
func (w *fleetWatch) waitAll(b *testing.B, waits ...fleetWait) []time.Time {
	b.Helper()
	start := time.Now()
	times := make([]time.Time, len(waits))
	errs := make([]error, len(waits))
	var wg sync.WaitGroup
	for i, fw := range waits {
		wg.Go(func() {
			times[i], errs[i] = w.waitUntil(fw.what, w.limit, fw.cond)
			if errs[i] == nil {
				progress("  %s: %s into the wait", fw.what, times[i].Sub(start).Round(time.Millisecond))
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatalf("%v; Services seen dark in this phase so far: %s", err, w.darkSince())
		}
	}
	return times
}

type fleetWait struct {
	what string
	cond func(mode map[string]int, ready int) bool
}

// procStats reads a process's resident memory (current and peak, bytes) and
// CPU seconds from /proc.
func procStats(pid int) (rss, peak int64, cpu float64, err error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, 0, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && (f[0] == "VmRSS:" || f[0] == "VmHWM:") {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			if f[0] == "VmRSS:" {
				rss = kb << 10
			} else {
				peak = kb << 10
			}
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, 0, err
	}
	// Fields after the command name (which may hold spaces) start at ")".
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return rss, peak, (utime + stime) / 100, nil // USER_HZ is 100 on Linux
}

// BenchmarkFleet runs the operator as a real process against a fleet of
// -fleet-size ElastiServices and reports the figures docs/benchmarks.md
// shows. Its one sub-benchmark is named after the size (and the phases
// when not all run), so each size's figures are a result of their own in
// docs/benchmarks/results.json: BenchmarkFleet/N=1000.
func BenchmarkFleet(b *testing.B) {
	name := fmt.Sprintf("N=%d", *fleetSize)
	if *fleetPhases != "all" {
		name += "," + *fleetPhases
	}
	b.Run(name, func(b *testing.B) {
		for range b.N {
			runFleet(b, *fleetSize)
		}
	})
}

func runFleet(b *testing.B, n int) {
	ownPhases := *fleetPhases == "all"
	if !ownPhases && *fleetPhases != "foreign" {
		b.Fatalf(`-fleet-phases=%q: want "all" or "foreign"`, *fleetPhases)
	}
	e := testenv.New(b)
	// Busy until the benchmark lets the fleet go idle.
	prom := testenv.NewFakePrometheus(b)
	prom.Set("5", "1", testenv.PrometheusHealthy)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Spread over namespaces, as fleets are: the cluster's own controllers
	// look up a pod's owners and Services among all of its namespace's, so
	// 10,000 in one namespace costs them quadratic time.
	perNS := max(1, *fleetPerNamespace)
	namespaces := make([]string, (n+perNS-1)/perNS)
	for k := range namespaces {
		namespaces[k] = clustertest.Namespace(b)
	}
	fmt.Fprintf(os.Stderr, "fleet: creating %d Deployments, Services and ElastiServices in %d namespaces\n", n, len(namespaces))
	e.ResolverService()
	e.ResolverPods(testenv.ResolverName, 2, true)
	fleet := make([]fleetMember, n)
	for i := range n {
		fleet[i] = fleetMember{ns: namespaces[i/perNS], name: fmt.Sprintf("%s%05d", fleetPrefix, i)}
	}
	if err := testenv.Parallel(n, 32, func(i int) error {
		return createFleetMember(ctx, e, fleet[i])
	}); err != nil {
		b.Fatal(err)
	}
	w := newFleetWatch(ctx, e, namespaces)
	// The cluster starts pods at roughly 10 to 30 a second here, and its
	// Deployment controller reports them ready later still; give every
	// wait room for that at any fleet size.
	w.limit = max(10*time.Minute, time.Duration(n)*200*time.Millisecond)
	setupStart := time.Now()
	w.waitAll(b, fleetWait{"the cluster starting every target's pod", func(_ map[string]int, ready int) bool { return ready == n }})
	fmt.Fprintf(os.Stderr, "fleet: every target has a ready pod (%s)\n", time.Since(setupStart).Round(time.Millisecond))

	watchesBefore := testenv.WatchCount(b)
	// All namespaces, as a cluster-wide install runs.
	op := startFleetOperator(e, "elasti-operator-fleet", prom)
	start := time.Now()
	reconciled := w.waitAll(b, fleetWait{"reconcile all", func(m map[string]int, _ int) bool { return m[elastiv1alpha1.ModeServe] == n }})
	reconcileAll := reconciled[0].Sub(start)
	watches := testenv.WatchCount(b) - watchesBefore
	ownWatches := testenv.OpenWatches(b, " elasti-operator")
	w.darkSince() // from here on, every Service has a ready pod
	progress("reconcile all: %s; watches %d", reconcileAll, ownWatches)

	// Restart over the converged fleet; the new operator runs the rest.
	firstRSS, firstPeak, _, err := procStats(op.Pid())
	if err != nil {
		b.Fatal(err)
	}
	r, op := restartFleet(b, e, w, op, n, prom)
	progress("restart: settled %s after the new process started, %d writes, RSS %d/%d MiB, %d watches, %s dark",
		r.converged, len(r.writes), r.rss>>20, r.peak>>20, r.watches, r.dark)
	r.dark.printWorst("restart", nil)

	var idle downFigures
	var clusterStart, toServe time.Duration
	var darkUp darkSpells
	if ownPhases {
		// The operator's own scale-down: every trigger goes idle and its
		// poller puts the resolver in front of each Service, then scales.
		idleStart := time.Now()
		stop := sampleFleetLoad(b, op, "idle scale-down")
		prom.Set("0", "1", testenv.PrometheusHealthy)
		idle = w.measureScaleDown(b, n, idleStart)
		stop()
		progress("idle scale-down by the operator: all fronted %s, all in proxy %s (the cluster's endpoints gone: %s); %s Services seen dark",
			idle.fronted, idle.proxy, idle.clusterStop, idle.dark)
		idle.dark.printWorst("idle scale-down", nil)

		// Busy again first, so the poller leaves the woken targets up.
		prom.Set("5", "1", testenv.PrometheusHealthy)
		wakeStart := time.Now()
		stop = sampleFleetLoad(b, op, "wake")
		wakeFleet(b, op, fleet)
		up := w.waitAll(b,
			fleetWait{"the cluster starting the pods again", func(_ map[string]int, ready int) bool { return ready == n }},
			fleetWait{"all in serve", func(m map[string]int, _ int) bool { return m[elastiv1alpha1.ModeServe] == n }})
		stop()
		clusterStart = up[0].Sub(wakeStart)
		toServe = up[1].Sub(wakeStart)
		darkUp = w.darkSince()
		progress("all in serve: %s (the cluster's pods: %s); %s Services seen dark", toServe, clusterStart, darkUp)
		darkUp.printWorst("wake", nil)
	}

	// Someone else scales every target to zero at once, as a script or
	// another autoscaler might: the operator can only follow.
	written := make([]time.Time, n) // each by its own worker, read after parallel
	stop := sampleFleetLoad(b, op, "foreign scale-down")
	if err := testenv.Parallel(n, 64, func(i int) error {
		_, err := e.Kube.AppsV1().Deployments(fleet[i].ns).Patch(ctx, fleet[i].name, types.MergePatchType, []byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{}, "scale")
		written[i] = time.Now()
		return err
	}); err != nil {
		b.Fatal(err)
	}
	foreign := w.measureScaleDown(b, n, slices.MaxFunc(written, time.Time.Compare))
	stop()
	progress("foreign scale-down: all fronted %s, all in proxy %s after the last write (the cluster's endpoints gone: %s); %s Services seen dark",
		foreign.fronted, foreign.proxy, foreign.clusterStop, foreign.dark)
	writtenAt := make(map[string]time.Time, n)
	for i, m := range fleet {
		writtenAt[m.key()] = written[i]
	}
	foreign.dark.printWorst("foreign scale-down", writtenAt)
	progress("foreign scale-down: each Service fronted after its own write: %s", w.frontedLag(writtenAt))

	rss, peak, cpu, err := procStats(op.Pid())
	if err != nil {
		b.Fatal(err)
	}
	progress("restarted operator at the end: RSS %d MiB, peak %d MiB, CPU %.1f s", rss>>20, peak>>20, cpu)
	b.StopTimer()

	b.ReportMetric(reconcileAll.Seconds(), "reconcile-all-s")
	if ownPhases {
		b.ReportMetric(idle.fronted.Seconds(), "idle-fronted-s")
		b.ReportMetric(idle.proxy.Seconds(), "idle-proxy-s")
		b.ReportMetric(idle.clusterStop.Seconds(), "idle-cluster-stop-s")
		b.ReportMetric(toServe.Seconds(), "all-serve-s")
		b.ReportMetric((toServe - clusterStart).Seconds(), "serve-beyond-pods-s")
	}
	b.ReportMetric(foreign.fronted.Seconds(), "foreign-fronted-s")
	b.ReportMetric(foreign.proxy.Seconds(), "foreign-proxy-s")
	b.ReportMetric(foreign.clusterStop.Seconds(), "foreign-cluster-stop-s")
	b.ReportMetric(r.converged.Seconds(), "restart-converge-s")
	b.ReportMetric(float64(len(r.writes)), "restart-writes")
	b.ReportMetric(float64(rss)/(1<<20), "rss-MiB")
	b.ReportMetric(float64(peak)/(1<<20), "peak-rss-MiB")
	b.ReportMetric(cpu, "cpu-s")
	b.ReportMetric(float64(ownWatches), "watches")
	// Restart, the operator's own scale-down and the wake: the promise.
	b.ReportMetric(float64(r.dark.services+idle.dark.services+darkUp.services), "dark-services")
	b.ReportMetric(max(r.dark.longest, idle.dark.longest, darkUp.longest).Seconds(), "longest-dark-s")
	// Someone else's scale-down: a bound, stated in the README.
	b.ReportMetric(float64(foreign.dark.services), "foreign-dark-services")
	b.ReportMetric(foreign.dark.longest.Seconds(), "foreign-longest-dark-s")
	b.ReportMetric(0, "ns/op")
	// The rows of phases -fleet-phases skipped say so, not 0.
	own := func(v any) string {
		if !ownPhases {
			return "not run"
		}
		if d, ok := v.(time.Duration); ok {
			return d.Round(time.Millisecond).String()
		}
		return fmt.Sprint(v)
	}
	fmt.Printf(`
Fleet of %d ElastiServices (operator as a process, local control plane)
| measure | value |
|---|---|
| reconcile all (operator start → all serve, Ready) | %s |
| idle scale-down by the operator's poller: every Service fronted / all in proxy, after the triggers went idle | %s / %s |
| the cluster's own time to remove those endpoints | %s |
| all in serve, after %d concurrent wake requests | %s |
| the cluster's own time to start those pods | %s |
| serve beyond the cluster's pod start | %s |
| scale-down by another tool: every Service fronted / all in proxy, after its last write | %s / %s |
| the cluster's own time to remove those endpoints | %s |
| first operator RSS after reconcile all / peak | %.0f MiB / %.0f MiB |
| restarted operator RSS at the end / peak (it ran both scale-downs and the wake) | %.0f MiB / %.0f MiB |
| restarted operator CPU | %.1f s |
| apiserver WATCH requests, after minus before the operator started | %d |
| watches the operator holds open (audit log, by user agent) | %d |
| Services seen dark: idle scale-down / wake / another tool's scale-down | %s / %s / %s |
| restart: new process start → every queue settled | %s |
| restart: writes by the new operator (audit log; Leases and Events not logged) | %d |
| restart: RSS after settling / peak | %.0f MiB / %.0f MiB |
| restart: watches the new operator holds open | %d |
| restart: Services seen dark | %s |
`, n, reconcileAll.Round(time.Millisecond), own(idle.fronted), own(idle.proxy), own(idle.clusterStop),
		n, own(toServe), own(clusterStart), own(toServe-clusterStart),
		foreign.fronted.Round(time.Millisecond), foreign.proxy.Round(time.Millisecond), foreign.clusterStop.Round(time.Millisecond),
		float64(firstRSS)/(1<<20), float64(firstPeak)/(1<<20), float64(rss)/(1<<20), float64(peak)/(1<<20), cpu, watches, ownWatches,
		own(idle.dark), own(darkUp), foreign.dark,
		r.converged.Round(time.Millisecond), len(r.writes), float64(r.rss)/(1<<20), float64(r.peak)/(1<<20), r.watches, r.dark)
	for _, wr := range r.writes[:min(len(r.writes), 20)] {
		fmt.Printf("  restart write: %s\n", wr)
	}
}

// fleetOperator is an operator process of the benchmark with its /metrics.
type fleetOperator struct {
	*testenv.OperatorProcess
	metrics string
}

// startFleetOperator runs an operator process named name over all
// namespaces, as a cluster-wide install runs, serving /metrics on loopback,
// with a steady lease (testenv.SteadyLease): the tests' 2 s renew deadline is shorter
// than the apiserver's answers under a fleet's load on this machine, and
// the operator would lose its lease in the middle of a measurement. Its
// triggers ask prom, at the operator's default polling interval.
func startFleetOperator(e *testenv.Env, name string, prom *testenv.FakePrometheus) fleetOperator {
	e.T.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.T.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	p := e.StartOperatorProcess(name, append(slices.Clone(testenv.SteadyLease), "--watch-namespace=", "--metrics-bind-address="+addr,
		"--prometheus-server-address="+prom.URL,
		// The product's default; testenv's own keeps the poller out of tests.
		"--polling-interval="+operator.DefaultOptions().PollingInterval.String())...)
	return fleetOperator{OperatorProcess: p, metrics: "http://" + addr + "/metrics"}
}

// settled scrapes the operator's /metrics: see testenv.QueuesSettled.
func (o fleetOperator) settled(n int) (bool, string) {
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(o.metrics)
	if err != nil {
		return false, err.Error()
	}
	defer resp.Body.Close()
	families, err := testenv.ScrapeFamilies(resp.Body)
	if err != nil {
		return false, err.Error()
	}
	return testenv.QueuesSettled(families, n)
}

// waitSettled polls o until every ElastiService has been synced and its
// queues are empty, and returns when it first saw that.
func (o fleetOperator) waitSettled(b *testing.B, n int, limit time.Duration) time.Time {
	b.Helper()
	deadline, lastLog := time.Now().Add(limit), time.Now()
	for {
		ok, seen := o.settled(n)
		if ok {
			return time.Now()
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s: queues not settled after %s: %s", o.Name, limit, seen)
		}
		if time.Since(lastLog) > 5*time.Second {
			fmt.Fprintf(os.Stderr, "  … %s settling: %s\n", o.Name, seen)
			lastLog = time.Now()
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// wakeFleet sends every Service's wake request at once, as resolvers would.
func wakeFleet(b *testing.B, op fleetOperator, fleet []fleetMember) {
	b.Helper()
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	var (
		failed atomic.Int64
		mu     sync.Mutex
		why    = map[string]int{} // status and body (or error), bounded by what the server says
	)
	// 32 at once, as a resolver pod sends them (its MaxConnsPerHost): the
	// operator's scale endpoint takes at most 64 connections of one client
	// address (pkg/command) and resets the rest, which a run of 256 at
	// once met after that bound came (933 of 1,000 reset).
	_ = testenv.Parallel(len(fleet), 32, func(i int) error {
		resp, err := client.Post(op.Scale, "application/json", strings.NewReader(testenv.WakeBody(fleet[i].name, fleet[i].ns)))
		reason := ""
		switch {
		case err != nil:
			reason = err.Error()
		case resp.StatusCode != http.StatusOK:
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
			reason = fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(body)))
		}
		if resp != nil {
			resp.Body.Close()
		}
		if reason != "" {
			failed.Add(1)
			mu.Lock()
			if len(why) < 10 || why[reason] > 0 {
				why[reason]++
			}
			mu.Unlock()
		}
		return nil
	})
	if failed.Load() > 0 {
		b.Fatalf("%d of %d wake requests failed: %v", failed.Load(), len(fleet), why)
	}
}

// restartFigures are what the restart phase measured.
type restartFigures struct {
	converged time.Duration
	writes    []string
	rss, peak int64
	watches   int
	dark      darkSpells
}

// restartFleet restarts the operator over the converged fleet as a rolling
// update would: once the old one has nothing left to do, SIGTERM (it
// releases its Lease), then a new process, which it returns. Converged
// means the new operator's queues have settled (testenv.QueuesSettled):
// every ElastiService synced since it started, nothing queued or in
// progress.
func restartFleet(b *testing.B, e *testenv.Env, w *fleetWatch, op fleetOperator, n int, prom *testenv.FakePrometheus) (restartFigures, fleetOperator) {
	b.Helper()
	op.waitSettled(b, n, w.limit)
	op.Signal(syscall.SIGTERM)
	select {
	case <-op.Done():
	case <-time.After(time.Minute):
		b.Fatal("the operator did not exit within a minute of SIGTERM")
	}
	const name = "elasti-operator-restart"
	start := time.Now()
	next := startFleetOperator(e, name, prom)
	var r restartFigures
	r.converged = next.waitSettled(b, n, w.limit).Sub(start)
	// A recheck or a lapsing fence queued with a delay would show here.
	time.Sleep(3 * time.Second)
	next.waitSettled(b, n, w.limit)
	r.dark = w.darkSince()
	var err error
	if r.rss, r.peak, _, err = procStats(next.Pid()); err != nil {
		b.Fatal(err)
	}
	// Where the new operator's time went, by its own log.
	if log, err := os.ReadFile(next.Log); err == nil {
		for _, line := range strings.Split(string(log), "\n") {
			if strings.Contains(line, "Starting\"") || strings.Contains(line, "Became leader") ||
				strings.Contains(line, "Starting workers") || strings.Contains(line, "Directory primed") {
				fmt.Fprintf(os.Stderr, "  restart (started %s): %s\n", start.Format("15:04:05.000"), line)
			}
		}
	}
	// The old operator's watches ended with it.
	r.watches = testenv.OpenWatches(b, " elasti-operator")
	r.writes = testenv.Writes(b, func(userAgent string) bool { return strings.HasPrefix(userAgent, name+"/") })
	return r, next
}

// progress prints a figure the moment it is measured, so a run stopped
// before the end still reports the phases it finished.
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "fleet: "+format+"\n", args...)
}

func createFleetMember(ctx context.Context, e *testenv.Env, m fleetMember) error {
	labels := map[string]string{"app": m.name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: m.name, Namespace: m.ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: testenv.PodTemplate(m.name),
		},
	}
	if _, err := e.Kube.AppsV1().Deployments(m.ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return err
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: m.name, Namespace: m.ns},
		Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
		},
	}
	if _, err := e.Kube.CoreV1().Services(m.ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return err
	}
	es := &elastiv1alpha1.ElastiService{
		ObjectMeta: metav1.ObjectMeta{Name: m.name, Namespace: m.ns},
		Spec: elastiv1alpha1.ElastiServiceSpec{
			Service:           m.name,
			ScaleTargetRef:    elastiv1alpha1.ScaleTargetRef{APIVersion: "apps/v1", Kind: "Deployment", Name: m.name},
			MinTargetReplicas: 1,
			// Idle as soon as the benchmark says so: it runs the operator's
			// own scale-down through these triggers.
			CooldownPeriod: 1,
			Triggers:       testenv.IdleTrigger("1"),
		},
	}
	_, err := e.Elasti.ElastiV1alpha1().ElastiServices(m.ns).Create(ctx, es, metav1.CreateOptions{})
	return err
}
