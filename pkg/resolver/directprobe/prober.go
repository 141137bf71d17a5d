package directprobe

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	utilcache "k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/klog/v2"

	"github.com/elasti-dev/elasti/pkg/podcheck"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
)

// A held request is forwarded as soon as a pod the wake
// started passes its own readiness checks, run by the resolver itself the
// way the kubelet runs them (podcheck.go), instead of after the kubelet's
// next readiness check, which can come a whole periodSeconds after the app
// is ready. Knative's activator probes a revision's pods for the same
// reason.
//
// The resolver, not the operator, reads the probes: it takes the pod an
// unready endpoint names from the pod view (clusterview.PodView), or GETs it when
// the view does not have it, only while a request is held for the
// Service, once per pod and address. The operator could read the pod
// template instead, but the template is not the pod: admission webhooks
// (a service mesh's injector among them) add containers and rewrite
// probes, and the pod's status.podIP is what proves an endpoint's address
// belongs to the pod (the tenant check below).

const (
	// directProbeInterval is the cadence of the direct checks of one pod.
	// The target is a held request answered at most 50 ms after the
	// app's first successful readiness answer (p99): 25 ms leaves half of
	// that for the check and the forward. A check of an app not yet
	// listening is a refused connect, microseconds on the node.
	directProbeInterval = 25 * time.Millisecond
	// maxProbedPods bounds the pods probed at once in all: at 40 checks a
	// second each, 64 pods are at most about 2,600 checks a second, a small
	// share of a resolver's two cores. A pod past it is not probed; its
	// requests wait for the kubelet's Ready, as without direct probing.
	maxProbedPods = 64
	// maxProbedPodsPerService bounds the pods probed at once for one
	// Service, so one Service of many replicas cannot take every probe:
	// the first pod to pass releases all its held requests.
	maxProbedPodsPerService = 4
	// maxProbedPodsPerNamespace is one namespace's share of maxProbedPods,
	// so the Services of one namespace cannot take every probe.
	maxProbedPodsPerNamespace = maxProbedPods / 4
	// maxPodPlans bounds the pods whose probes the resolver remembers
	// (by UID), so a pod is read once while its Service wakes.
	maxPodPlans = 256
	// podPlanTTL is how long a pod's checks are remembered unused.
	podPlanTTL = 30 * time.Minute
	// podRereadInitial and podRereadMax pace the reads of a pod whose
	// probe has initialDelaySeconds while its container is not shown
	// running (podcheck.ErrNotStarted): the kubelet publishes the start at
	// its next pod sync, within a second or so on a real node; the pause
	// doubles up to the max, so 64 such pods cost at most 64 GETs every 2 s.
	podRereadInitial = 100 * time.Millisecond
	podRereadMax     = 2 * time.Second
	// maxLeadFollow bounds how long a pod that passed is watched for its
	// Ready endpoint, to measure the lead (Report.lead): beyond the
	// longest periodSeconds anyone sets. At most maxProbedPods are
	// watched at once.
	maxLeadFollow = 5 * time.Minute
)

// Reasons a pod is left to the kubelet's Ready besides podcheck's (label
// values of elasti_resolver_direct_probe_fallbacks_total).
const (
	FallbackPodUnreadable = "pod_unreadable"
	FallbackBound         = "bound"
)

// FallbackReasons are every reason a pod is left to the kubelet's Ready:
// podcheck's and the two above.
var FallbackReasons = append(slices.Clone(podcheck.FallbackReasons), FallbackPodUnreadable, FallbackBound)

// Report is where direct probing reports: fellBack when a pod is
// left to the kubelet's Ready (a Fallback reason), lead with how long
// before its endpoint turned Ready a pod passed its direct check.
type Report struct {
	FellBack func(reason string)
	Lead     func(time.Duration)
}

// Prober runs the direct checks. A Service has an entry only while a
// hold waits on it (join), and each entry probes at most
// maxProbedPodsPerService of the pods its slices list unready, all
// entries together at most maxProbedPods: nothing here grows with what
// clients send.
type Prober struct {
	eps clusterview.EndpointSource
	// view, when not nil, gives the pods of the Services held, so a pod
	// it has is not read (viewPod).
	view     clusterview.PodView
	pods     clusterview.PodGetter
	checker  *podcheck.Checker
	interval time.Duration
	report   Report
	logger   klog.Logger
	ctx      context.Context
	wg       sync.WaitGroup
	b        *clusterview.Broadcaster[clusterview.ServiceRef]

	mu       sync.Mutex
	services map[clusterview.ServiceRef]*probedService
	// running counts the probes that hold a slot, in all and by
	// namespace (entries only while positive).
	running     int
	inNamespace map[string]int
	// following counts the pods that passed whose Ready is awaited
	// (followReady), at most maxProbedPods.
	following int
	// plans are the pods' checks by podAt (planOrErr), the least recently
	// used dropped past maxPodPlans. A pod's probes cannot change, so an
	// entry is good for its pod's life; podPlanTTL only frees memory.
	plans *utilcache.LRUExpireCache
	// readLimits paces the pod reads of each namespace's probes.
	readLimits clusterview.NamespaceLimits
}

type probedService struct {
	refs int
	pods map[podAt]*probeTarget
	// overBound holds the listed pods not probed for a bound, so each is
	// counted once, not on every look.
	overBound map[podAt]bool
}

// podAtOf is the pod ep names at ep's address.
func podAtOf(ep clusterview.UnreadyEndpoint) podAt { return podAt{uid: ep.UID, pod: ep.Pod, ip: ep.IP} }

// probeTarget is one pod being probed. It stays in its Service's entry
// while the pod is listed, so a pod is started once per hold; its slot is
// freed as soon as its probe ends (it passed, or fell back to the
// kubelet's Ready), or it is stopped.
type probeTarget struct {
	ep     clusterview.UnreadyEndpoint
	cancel context.CancelFunc
	// passed is set when every container's check passed, slot while the
	// probe holds one of the bounds' places; both under the prober's lock.
	passed bool
	slot   bool
	// answers is what the pod answered its checks so far, copied from
	// the probe's state after each round, under the prober's lock.
	answers podcheck.Answers
}

func NewProber(ctx context.Context, eps clusterview.EndpointSource, view clusterview.PodView, pods clusterview.PodGetter, report Report, logger klog.Logger) *Prober {
	return &Prober{eps: eps, view: view, pods: pods, checker: podcheck.NewChecker(), interval: directProbeInterval, report: report,
		logger: logger.WithName("podprobe"), ctx: ctx, b: clusterview.NewBroadcaster[clusterview.ServiceRef](),
		services: map[clusterview.ServiceRef]*probedService{}, inNamespace: map[string]int{},
		plans: utilcache.NewLRUExpireCache(maxPodPlans), readLimits: clusterview.NewNamespaceLimits()}
}

// join says a hold waits on svc; the returned func says it no longer
// does. Probing of svc's pods stops with the last.
func (p *Prober) Join(svc clusterview.ServiceRef) func() {
	p.mu.Lock()
	defer p.mu.Unlock()
	ps := p.services[svc]
	if ps == nil {
		ps = &probedService{pods: map[podAt]*probeTarget{}, overBound: map[podAt]bool{}}
		p.services[svc] = ps
	}
	ps.refs++
	return sync.OnceFunc(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if ps.refs--; ps.refs == 0 {
			for at := range ps.pods {
				p.stopLocked(svc, ps, at)
			}
			delete(p.services, svc)
		}
	})
}

func (p *Prober) stopLocked(svc clusterview.ServiceRef, ps *probedService, at podAt) {
	t := ps.pods[at]
	t.cancel()
	p.freeLocked(svc, t)
	delete(ps.pods, at)
}

// freeLocked gives t's slot back, once.
func (p *Prober) freeLocked(svc clusterview.ServiceRef, t *probeTarget) {
	if !t.slot {
		return
	}
	t.slot = false
	p.running--
	if p.inNamespace[svc.Namespace]--; p.inNamespace[svc.Namespace] <= 0 {
		delete(p.inNamespace, svc.Namespace)
	}
}

// watch returns a channel closed when a pod of svc passes.
func (p *Prober) Watch(svc clusterview.ServiceRef) (<-chan struct{}, func()) {
	return p.b.Watch(svc)
}

// passed returns, as "ip:port", the endpoints of eps whose pod passed its
// direct check. It starts probing those of eps not probed yet, within the
// bounds, and stops probing pods of svc no longer in eps: listed Ready now
// (the slices take over), or gone. svc must be joined.
func (p *Prober) Passed(svc clusterview.ServiceRef, eps []clusterview.UnreadyEndpoint) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	ps := p.services[svc]
	if ps == nil {
		return nil
	}
	var addrs []string
	listed := make(map[podAt]bool, len(eps))
	for _, ep := range eps {
		at := podAtOf(ep)
		listed[at] = true
		t := ps.pods[at]
		if t != nil && t.ep != ep {
			// The same pod at the same address on another port: start over.
			p.stopLocked(svc, ps, at)
			t = nil
		}
		if t == nil {
			if len(ps.pods) >= maxProbedPodsPerService || p.running >= maxProbedPods || p.inNamespace[svc.Namespace] >= maxProbedPodsPerNamespace {
				if !ps.overBound[at] {
					ps.overBound[at] = true
					p.report.FellBack(FallbackBound)
				}
				continue
			}
			delete(ps.overBound, at)
			t = p.startLocked(svc, ps, ep)
		}
		if t.passed {
			addrs = append(addrs, net.JoinHostPort(ep.IP, strconv.Itoa(int(ep.Port))))
		}
	}
	for at := range ps.pods {
		if !listed[at] {
			p.stopLocked(svc, ps, at)
		}
	}
	for at := range ps.overBound {
		if !listed[at] {
			delete(ps.overBound, at)
		}
	}
	slices.Sort(addrs)
	return slices.Compact(addrs)
}

func (p *Prober) startLocked(svc clusterview.ServiceRef, ps *probedService, ep clusterview.UnreadyEndpoint) *probeTarget {
	ctx, cancel := context.WithCancel(p.ctx)
	t := &probeTarget{ep: ep, cancel: cancel, slot: true}
	ps.pods[podAtOf(ep)] = t
	p.running++
	p.inNamespace[svc.Namespace]++
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.probe(ctx, svc, t)
		p.mu.Lock()
		p.freeLocked(svc, t)
		p.mu.Unlock()
	}()
	return t
}

// probe reads t's pod, then checks it every interval until it passes or
// ctx ends. A pod it cannot check the kubelet's way is left alone: its
// requests wait for the slice's Ready.
func (p *Prober) probe(ctx context.Context, svc clusterview.ServiceRef, t *probeTarget) {
	logger := p.logger.WithValues("service", svc.KRef(), "pod", klog.KRef(svc.Namespace, t.ep.Pod))
	plan, err := p.plan(ctx, svc, t.ep)
	for pause := podRereadInitial; readAgain(err); pause = p.nextPause(svc, t.ep, pause) {
		logger.V(4).Info("Reading the pod again", "err", err, "after", pause)
		timer := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		plan, err = p.plan(ctx, svc, t.ep)
	}
	var re *podReadError
	if errors.As(err, &re) {
		err = &podcheck.FallbackError{Reason: FallbackPodUnreadable, Detail: re.Error()}
	}
	if err != nil {
		var fe *podcheck.FallbackError
		if errors.As(err, &fe) {
			p.report.FellBack(fe.Reason)
		}
		logger.V(2).Info("Not probing the pod directly; waiting for its Ready endpoint", "err", err)
		return
	}
	// When a slow cold start's evidence needs it: when the resolver first
	// had the pod's address, against when the kubelet published it.
	logger.V(4).Info("Probing the pod directly", "ip", t.ep.IP, "port", t.ep.Port)
	st := plan.NewState()
	tick := time.NewTicker(p.interval)
	defer tick.Stop()
	for {
		passed := p.checker.CheckPod(ctx, plan, st)
		p.mu.Lock()
		t.answers = st.Answers()
		t.passed = passed
		p.mu.Unlock()
		if passed {
			logger.V(2).Info("Pod passed its readiness checks, probed directly")
			p.b.Broadcast(svc)
			p.followReady(svc, t.ep, time.Now())
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Answers returns what the pods probed for svc answered their checks so
// far: the tally of the one checked most, none when no pod is probed.
func (p *Prober) Answers(svc clusterview.ServiceRef) podcheck.Answers {
	p.mu.Lock()
	defer p.mu.Unlock()
	var best podcheck.Answers
	most := 0
	if ps := p.services[svc]; ps != nil {
		for _, t := range ps.pods {
			n := 0
			for _, c := range t.answers.List() {
				n += c.Count
			}
			if n > most {
				best, most = t.answers, n
			}
		}
	}
	return best
}

// probing returns the pods probed now, in all.
func (p *Prober) Probing() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.running
}

// close waits for the probes, which end with the holder's context.
func (p *Prober) Close() { p.wg.Wait() }
