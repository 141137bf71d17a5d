package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

// The sleep metrics say what scale-to-zero saved, across the fleet. They
// have no labels at all: a series per ElastiService (or per namespace,
// whose count users choose) would grow with the fleet, and the operator is
// tested with 10,000 ElastiServices. Per-service figures are in each
// ElastiService's status (timeAsleep, wakes, lastColdStart), where kubectl
// reads them; these totals are what a dashboard sums and alerts on.
//
// They are read from status at each scrape, not from the operator's own
// actions, so they count every sleep and wake whoever scaled the target,
// and a sleep that began before this operator started. Each ElastiService's
// totals in status only grow; the counters add what they grew by since the
// previous scrape. An ElastiService first seen adds nothing, so a restart or
// a new leader does not count old sleeps again, and one deleted takes
// nothing away.
const (
	asleepSecondsName   = "elasti_operator_asleep_seconds_total"
	savedPodSecondsName = "elasti_operator_saved_pod_seconds_total"
	wakesName           = "elasti_operator_wakes_total"
	asleepTargetsName   = "elasti_operator_asleep_targets"
	scaleUpToReadyName  = "elasti_operator_scale_up_to_ready_seconds"
)

// sleepTotals is a Collector over the ElastiServices' status.
type sleepTotals struct {
	list    func() ([]*elastiv1alpha1.ElastiService, error)
	leading func() bool
	clock   clock.PassiveClock

	asleepSeconds, savedPodSeconds, wakes, asleepTargets *prometheus.Desc
	// scaleUpToReady has buckets, so it is a real histogram, observed as
	// new cold starts appear in status.
	scaleUpToReady prometheus.Histogram

	mu sync.Mutex
	// seen is each ElastiService's totals at the previous scrape, by UID:
	// one deleted and created again under its name starts afresh.
	seen                                map[types.UID]seenSleep
	asleepTotal, savedTotal, wakesTotal float64
}

// seenSleep is one ElastiService's status as the previous scrape read it.
type seenSleep struct {
	asleep time.Duration
	wakes  int64
	// coldStartOf is the wake (status.wakes) whose cold start was last
	// observed.
	coldStartOf int64
	// replicas is the last replica count above zero seen: what the target
	// would have run had it not slept.
	replicas int32
}

// RegisterSleepTotals exports the fleet's time asleep, the pod-seconds it
// saved, its wakes, how many targets sleep now and the cold starts, read
// from list at each scrape. Only the leader reports them (leading): every
// replica watches the same status, and a sum over replicas would count each
// sleep once per replica.
func (m *Operator) RegisterSleepTotals(list func() ([]*elastiv1alpha1.ElastiService, error), leading func() bool) {
	m.Registry.MustRegister(newSleepTotals(list, leading, clock.RealClock{}))
}

func newSleepTotals(list func() ([]*elastiv1alpha1.ElastiService, error), leading func() bool, clk clock.PassiveClock) *sleepTotals {
	return &sleepTotals{
		list: list, leading: leading, clock: clk,
		asleepSeconds: prometheus.NewDesc(asleepSecondsName,
			"Seconds scale targets spent at zero replicas, summed over ElastiServices (from status.timeAsleep and the current sleeps).", nil, nil),
		savedPodSeconds: prometheus.NewDesc(savedPodSecondsName,
			"Pod-seconds not run while targets were at zero: each second asleep times the replicas the target ran before it slept, or minTargetReplicas if unknown.", nil, nil),
		wakes: prometheus.NewDesc(wakesName,
			"Scale-ups from zero, by anyone (from status.wakes).", nil, nil),
		asleepTargets: prometheus.NewDesc(asleepTargetsName,
			"ElastiServices whose target is at zero now.", nil, nil),
		scaleUpToReady: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    scaleUpToReadyName,
			Help:    "Cold starts as status.lastColdStart records them: from a scale-up from zero, by anyone, to the first Ready pod.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 14),
		}),
		seen: map[types.UID]seenSleep{},
	}
}

func (s *sleepTotals) Describe(ch chan<- *prometheus.Desc) {
	ch <- s.asleepSeconds
	ch <- s.savedPodSeconds
	ch <- s.wakes
	ch <- s.asleepTargets
	s.scaleUpToReady.Describe(ch)
}

func (s *sleepTotals) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.leading() {
		// Forget, so a later leadership does not count the time another
		// leader counted.
		clear(s.seen)
		return
	}
	all, err := s.list()
	if err != nil {
		return
	}
	s.advance(all, s.clock.Now())
	asleep := 0
	for _, es := range all {
		if es.Status.Asleep() {
			asleep++
		}
	}
	ch <- prometheus.MustNewConstMetric(s.asleepSeconds, prometheus.CounterValue, s.asleepTotal)
	ch <- prometheus.MustNewConstMetric(s.savedPodSeconds, prometheus.CounterValue, s.savedTotal)
	ch <- prometheus.MustNewConstMetric(s.wakes, prometheus.CounterValue, s.wakesTotal)
	ch <- prometheus.MustNewConstMetric(s.asleepTargets, prometheus.GaugeValue, float64(asleep))
	s.scaleUpToReady.Collect(ch)
}

// advance adds what each ElastiService's status grew by since the last
// scrape, under s.mu.
func (s *sleepTotals) advance(all []*elastiv1alpha1.ElastiService, now time.Time) {
	next := make(map[types.UID]seenSleep, len(all))
	for _, es := range all {
		st := &es.Status
		prev, known := s.seen[es.UID]
		cur := seenSleep{asleep: st.AsleepFor(now), wakes: st.Wakes, replicas: prev.replicas}
		if r := st.Replicas(); r > 0 {
			cur.replicas = r
		}
		if known {
			// A wake noticed late ends the sleep at the scale-up, before the
			// previous scrape's "so far": keep the high-water mark, never
			// count back.
			if d := cur.asleep - prev.asleep; d > 0 {
				s.asleepTotal += d.Seconds()
				s.savedTotal += d.Seconds() * float64(wouldHaveRun(es, prev.replicas))
			} else {
				cur.asleep = prev.asleep
			}
			if n := cur.wakes - prev.wakes; n > 0 {
				s.wakesTotal += float64(n)
			} else {
				cur.wakes = prev.wakes
			}
			cur.coldStartOf = prev.coldStartOf
			if st.LastColdStart != nil && st.Wakes > prev.coldStartOf {
				// Several wakes between scrapes show only the latest.
				s.scaleUpToReady.Observe(st.LastColdStart.Seconds())
				cur.coldStartOf = st.Wakes
			}
		} else {
			// Observe no old cold start, but one still under way (status
			// clears lastColdStart at each wake) when it ends.
			cur.coldStartOf = st.Wakes
			if st.LastColdStart == nil {
				cur.coldStartOf--
			}
		}
		next[es.UID] = cur
	}
	s.seen = next
}

// wouldHaveRun is how many pods es's target would have run while it slept:
// what it ran before, if this operator saw it, else minTargetReplicas.
func wouldHaveRun(es *elastiv1alpha1.ElastiService, before int32) int32 {
	if before > 0 {
		return before
	}
	if n := es.Spec.MinTargetReplicas; n > 0 {
		return n
	}
	return elastiv1alpha1.DefaultMinTargetReplicas
}
