package traffic

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/elasti-dev/elasti/test/localcluster/realnet"
)

// The flapping run (issue #22): a client alternates busy and quiet spells
// around the cooldown for flapRun, web's only idle signal is its request
// rate on the bed's real Prometheus, and every scale to zero and every
// wake is set against the spells. TestTrafficAloneDrivesTheLifecycle
// (prometheus_test.go) is its short version in make test: one wake, then
// three cooldowns of traffic without a scale-down.
const (
	flapRun      = 10 * time.Minute
	flapCooldown = 20 * time.Second
	// flapWindow is the trigger's rate() window; flapThreshold its
	// threshold in requests a second, a quarter of a busy spell's rate.
	flapWindow    = 20 * time.Second
	flapThreshold = "0.5"
	// flapInterval paces a busy spell's requests: two a second.
	flapInterval = 500 * time.Millisecond
)

// The spells, in turn until flapRun is over, ending busy. Busy spells are
// longer than the cooldown, so a wake's cooldown ends while the traffic
// goes on: the moment the new pod's series must already carry it. Quiet
// spells are short (below half the window, when the window still holds at
// least half a busy spell's rate: web must stay up), long (a whole window
// and the polls after it: web must go to zero), or around the cooldown and
// the window, where either is right.
var (
	flapBusy  = []time.Duration{40 * time.Second, 30 * time.Second, 50 * time.Second}
	flapQuiet = []time.Duration{5 * time.Second, 60 * time.Second, 10 * time.Second, 20 * time.Second, 45 * time.Second,
		30 * time.Second, 8 * time.Second, 50 * time.Second, 25 * time.Second, 15 * time.Second}
)

const (
	flapShortQuiet = flapWindow / 2
	flapLongQuiet  = 45 * time.Second
)

// spell is a stretch of the run: busy from its first request's start to
// its last answer, or quiet between two busy ones.
type spell struct {
	busy       bool
	start, end time.Time
	requests   int
	failed     []string
	// downs and wakes are web's scale-downs and scale-ups from zero
	// within the spell.
	downs, wakes []time.Time
}

func (s spell) kind() string {
	switch d := s.end.Sub(s.start); {
	case s.busy:
		return "busy"
	case d < flapShortQuiet:
		return "short quiet"
	case d >= flapLongQuiet:
		return "long quiet"
	default:
		return "quiet around the cooldown"
	}
}

// flapFigures sum a flapping run up.
type flapFigures struct {
	spells                         []spell
	downs, wakes, requests, failed int
	// flaps are scale-downs in a busy spell after a wake in it: the
	// property. late are scale-downs a whole window into a busy spell, when
	// the rate is the spell's own; early ones (the trigger still reading
	// the quiet before) are allowed and counted in downsInBusy.
	flaps, late, downsInBusy int
	// expected is the range of scale-downs the spells call for: one per
	// long quiet spell, and maybe one per quiet spell around the cooldown.
	expectedMin, expectedMax int
	violations               []string
}

// BenchmarkFlapping runs the flapping run and reports its counts: spells,
// scale-downs and wakes against the range the spells call for, flaps (a
// wake followed by a scale-down while traffic continues), and failed
// requests. It fails on a flap, a failed request, a scale-down in a short
// quiet spell, a long quiet spell without one, or a late one. Run it with
// `make bench` (ten minutes).
func BenchmarkFlapping(b *testing.B) {
	for range b.N {
		f := runFlapping(b)
		b.ReportMetric(float64(len(f.spells)), "spells")
		b.ReportMetric(float64(f.downs), "scale-downs")
		b.ReportMetric(float64(f.wakes), "wakes")
		b.ReportMetric(float64(f.expectedMin), "expected-min")
		b.ReportMetric(float64(f.expectedMax), "expected-max")
		b.ReportMetric(float64(f.flaps), "flaps")
		b.ReportMetric(float64(f.downsInBusy), "downs-early-in-busy")
		b.ReportMetric(float64(f.requests), "requests")
		b.ReportMetric(float64(f.failed), "failed")
	}
}

func runFlapping(tb testing.TB) flapFigures {
	tb.Helper()
	query := func(ns string) string { return appRate(ns, flapWindow.String()) }
	s := newPrometheusScenario(tb, int32(flapCooldown/time.Second), one(query, flapThreshold))
	changes := watchScale(tb, s)

	var spells []spell
	start := time.Now()
	for i := 0; ; i++ {
		busy := s.pacedSpell(flapBusy[i%len(flapBusy)])
		if n := len(spells); n > 0 {
			spells = append(spells, spell{start: spells[n-1].end, end: busy.start})
		}
		spells = append(spells, busy)
		if time.Since(start) >= flapRun {
			break
		}
		time.Sleep(flapQuiet[i%len(flapQuiet)])
	}
	// The last busy spell's scale events may still be on their way.
	time.Sleep(2 * time.Second)
	f := countFlaps(spells, changes.list())
	tb.Log(f.String())
	for _, v := range f.violations {
		tb.Error(v)
	}
	return f
}

// countFlaps sets web's scale changes against the spells.
func countFlaps(spells []spell, changes []scaleChange) flapFigures {
	var f flapFigures
	for _, c := range changes {
		i := -1
		for j, sp := range spells {
			if !c.at.Before(sp.start) && c.at.Before(sp.end) {
				i = j
				break
			}
		}
		down, wake := c.to == 0 && c.from > 0, c.from == 0 && c.to > 0
		switch {
		case down:
			f.downs++
		case wake:
			f.wakes++
		default:
			continue
		}
		if i < 0 {
			f.violations = append(f.violations, fmt.Sprintf("scaled %d → %d at %s, outside the run's spells", c.from, c.to, c.at.Format("15:04:05.000")))
			continue
		}
		sp := &spells[i]
		if down {
			sp.downs = append(sp.downs, c.at)
		} else {
			sp.wakes = append(sp.wakes, c.at)
		}
	}
	for i, sp := range spells {
		f.requests += sp.requests
		f.failed += len(sp.failed)
		for _, fl := range sp.failed {
			f.violations = append(f.violations, fmt.Sprintf("spell %d: a request failed: %s", i, fl))
		}
		kind := sp.kind()
		switch kind {
		case "busy":
			for _, d := range sp.downs {
				into := d.Sub(sp.start)
				switch {
				case len(sp.wakes) > 0 && sp.wakes[0].Before(d):
					f.flaps++
					f.violations = append(f.violations, fmt.Sprintf("spell %d: woken at %s, then scaled to zero %s into the spell while its traffic went on",
						i, sp.wakes[0].Format("15:04:05.000"), into.Round(time.Millisecond)))
				case into >= flapWindow:
					f.late++
					f.violations = append(f.violations, fmt.Sprintf("spell %d: scaled to zero %s into a busy spell, a whole rate window in", i, into.Round(time.Millisecond)))
				default:
					f.downsInBusy++
				}
			}
		case "short quiet":
			if len(sp.downs) > 0 {
				f.violations = append(f.violations, fmt.Sprintf("spell %d: scaled to zero in a quiet spell of %s, shorter than half the rate window", i, sp.end.Sub(sp.start).Round(time.Second)))
			}
		case "long quiet":
			f.expectedMin++
			f.expectedMax++
			if len(sp.downs) != 1 {
				f.violations = append(f.violations, fmt.Sprintf("spell %d: %d scale-downs in a quiet spell of %s, want 1", i, len(sp.downs), sp.end.Sub(sp.start).Round(time.Second)))
			}
		default:
			f.expectedMax++
		}
		if !sp.busy && len(sp.wakes) > 0 {
			f.violations = append(f.violations, fmt.Sprintf("spell %d: woken with no traffic", i))
		}
	}
	if f.wakes != f.downs {
		f.violations = append(f.violations, fmt.Sprintf("%d scale-downs but %d wakes: the run ends busy, so every sleep is woken once", f.downs, f.wakes))
	}
	if f.downs < f.expectedMin || f.downs > f.expectedMax {
		f.violations = append(f.violations, fmt.Sprintf("%d scale-downs; the spells call for %d to %d", f.downs, f.expectedMin, f.expectedMax))
	}
	f.spells = spells
	return f
}

func (f flapFigures) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d spells, %d requests (%d failed); %d scale-downs and %d wakes, the spells call for %d to %d scale-downs; %d flaps, %d scale-downs early in a busy spell\n",
		len(f.spells), f.requests, f.failed, f.downs, f.wakes, f.expectedMin, f.expectedMax, f.flaps, f.downsInBusy)
	for i, sp := range f.spells {
		fmt.Fprintf(&b, "%3d %-26s %5s  downs %d wakes %d", i, sp.kind(), sp.end.Sub(sp.start).Round(time.Second), len(sp.downs), len(sp.wakes))
		for _, d := range sp.downs {
			fmt.Fprintf(&b, "  down +%s", d.Sub(sp.start).Round(100*time.Millisecond))
		}
		for _, w := range sp.wakes {
			fmt.Fprintf(&b, "  wake +%s", w.Sub(sp.start).Round(100*time.Millisecond))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// pacedSpell is a busy spell of length d: web by short name every
// flapInterval, one request after another, from the scenario's client pod.
func (s *scenario) pacedSpell(d time.Duration) spell {
	s.t.Helper()
	var answers []coldAnswer
	call := pacedCall{URL: "http://" + app + "/flap", Interval: flapInterval, For: d, Timeout: wakeTimeout}
	if err := s.client.Run(s.ctx, pacedProgram, call, d+wakeTimeout+5*time.Second, &answers); err != nil {
		s.t.Fatal(err)
	}
	if len(answers) == 0 {
		s.t.Fatal("a busy spell sent no request")
	}
	sp := spell{busy: true, start: answers[0].Sent, end: answers[len(answers)-1].Answered, requests: len(answers)}
	for _, a := range answers {
		if a.Err != "" || a.Status != http.StatusOK {
			sp.failed = append(sp.failed, fmt.Sprintf("at %s: %d %s %q", a.Sent.Format("15:04:05.000"), a.Status, a.Err, a.Body))
		}
	}
	return sp
}

// pacedProgram is a client-pod program (realnet.Program): GETs of one URL,
// one every Interval (or as soon as the one before is answered) for For,
// each bounded by Timeout, reporting each as the cold-starts program does.
const pacedProgram = "paced"

func init() { realnet.RegisterProgram(pacedProgram, runPaced) }

type pacedCall struct {
	URL      string        `json:"url"`
	Interval time.Duration `json:"interval"`
	For      time.Duration `json:"for"`
	Timeout  time.Duration `json:"timeout"`
}

func runPaced(ctx context.Context, arg json.RawMessage) (any, error) {
	var c pacedCall
	if err := json.Unmarshal(arg, &c); err != nil {
		return nil, err
	}
	// A connection per request, as many clients make them: each goes
	// where kube-proxy sends new connections now.
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}, Timeout: c.Timeout}
	var out []coldAnswer
	end := time.Now().Add(c.For)
	for next := time.Now(); next.Before(end) && ctx.Err() == nil; next = next.Add(c.Interval) {
		time.Sleep(time.Until(next))
		a := coldAnswer{Sent: time.Now()}
		resp, err := client.Get(c.URL)
		if err == nil {
			b, rerr := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
			resp.Body.Close()
			a.Status, a.Body, err = resp.StatusCode, string(b), rerr
		}
		if err != nil {
			a.Err = err.Error()
		}
		a.Answered = time.Now()
		out = append(out, a)
	}
	return out, nil
}

// scaleChange is a change of web's Deployment's replicas.
type scaleChange struct {
	at       time.Time
	from, to int32
}

// scaleLog records web's scale changes, seen through a watch.
type scaleLog struct {
	mu      sync.Mutex
	changes []scaleChange
}

func (l *scaleLog) list() []scaleChange {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]scaleChange(nil), l.changes...)
}

// watchScale records every change of web's replicas until tb ends.
func watchScale(tb testing.TB, s *scenario) *scaleLog {
	tb.Helper()
	l := &scaleLog{}
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactoryWithOptions(s.e.Kube, 0, informers.WithNamespace(s.e.NS))
	informer := factory.Apps().V1().Deployments().Informer()
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			o, n := oldObj.(*appsv1.Deployment), newObj.(*appsv1.Deployment)
			if n.Name != app || o.Spec.Replicas == nil || n.Spec.Replicas == nil || *o.Spec.Replicas == *n.Spec.Replicas {
				return
			}
			l.mu.Lock()
			defer l.mu.Unlock()
			l.changes = append(l.changes, scaleChange{at: time.Now(), from: *o.Spec.Replicas, to: *n.Spec.Replicas})
		},
	}); err != nil {
		tb.Fatal(err)
	}
	factory.Start(ctx.Done())
	tb.Cleanup(func() { cancel(); factory.Shutdown() })
	if !cache.WaitForCacheSync(tb.Context().Done(), informer.HasSynced) {
		tb.Fatal("the Deployment watch did not sync")
	}
	return l
}
