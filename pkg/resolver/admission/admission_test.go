package admission

import (
	"net/netip"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/utils/clock"

	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
)

// queueLimits bounds the queues per Service and in all, and nothing else.
func queueLimits(perService, global int) Limits {
	return Limits{PerService: perService, Global: global, PerSource: global, HeldBytes: 1 << 40, RequestBytes: 1 << 40, NamespaceShare: 100}
}

func TestAdmissionBoundsPerServiceThenGlobally(t *testing.T) {
	queued := prometheus.NewGauge(prometheus.GaugeOpts{Name: "queued"})
	a := New(queueLimits(2, 3), nil, clock.RealClock{}, queued)
	web, api := clusterview.ServiceRef{Namespace: "shop", Name: "web"}, clusterview.ServiceRef{Namespace: "shop", Name: "api"}
	client := netip.MustParseAddr("10.244.0.7")
	r1, _ := a.Admit(web, 0, client, 0)
	_, _ = a.Admit(web, 0, client, 0)
	if _, refused := a.Admit(web, 0, client, 0); refused.Scope != ScopeService {
		t.Fatalf("third slot for one service: overflow %q, want %q", refused.Scope, ScopeService)
	}
	if _, refused := a.Admit(api, 0, client, 0); refused.Scope != "" {
		t.Fatalf("another service within the global bound was refused (%q)", refused.Scope)
	}
	if _, refused := a.Admit(api, 0, client, 0); refused.Scope != ScopeGlobal {
		t.Fatalf("past the global bound: overflow %q, want %q", refused.Scope, ScopeGlobal)
	}
	r1()
	r1() // releasing twice frees one slot only
	if got := a.Admitted(web); got != 1 {
		t.Fatalf("web holds %d slots after one release, want 1", got)
	}
	if _, refused := a.Admit(api, 0, client, 0); refused.Scope != "" {
		t.Fatalf("a released slot was not reusable (%q)", refused.Scope)
	}
	if _, refused := a.Admit(web, 0, client, 0); refused.Scope != ScopeGlobal {
		t.Fatalf("global bound not enforced after reuse: %q", refused.Scope)
	}
	if got := testutil.ToFloat64(queued); got != 3 {
		t.Fatalf("queued gauge = %v, want the 3 slots taken", got)
	}
}

// A Service's own bound (spec.hold.maxRequests) replaces the per-Service
// one, below it or above it, for that Service alone; the global queue and
// the namespace's share bound it still.
func TestAdmissionTakesAServicesOwnBound(t *testing.T) {
	lim := queueLimits(3, 10)
	lim.NamespaceShare = 60 // 6 of the 10 for one namespace
	a := New(lim, nil, clock.RealClock{}, prometheus.NewGauge(prometheus.GaugeOpts{Name: "q"}))
	small, big, other := clusterview.ServiceRef{Namespace: "shop", Name: "small"},
		clusterview.ServiceRef{Namespace: "shop", Name: "big"}, clusterview.ServiceRef{Namespace: "shop", Name: "other"}
	client := netip.MustParseAddr("10.244.0.7")
	if _, refused := a.Admit(small, 1, client, 0); refused.Scope != "" {
		t.Fatalf("the first of a bound of 1 was refused (%q)", refused.Scope)
	}
	if _, refused := a.Admit(small, 1, client, 0); refused.Scope != ScopeService {
		t.Fatalf("one past a bound of 1: %q, want %q", refused.Scope, ScopeService)
	}
	for i := range 4 { // past the per-Service 3, within big's own 8
		if _, refused := a.Admit(big, 8, client, 0); refused.Scope != "" {
			t.Fatalf("request %d within big's own bound was refused (%q)", i+1, refused.Scope)
		}
	}
	// 5 of shop's 6 are taken: the namespace's share ends big's bound first.
	if _, refused := a.Admit(big, 8, client, 0); refused.Scope != "" {
		t.Fatalf("the namespace's sixth was refused (%q)", refused.Scope)
	}
	if _, refused := a.Admit(big, 8, client, 0); refused.Scope != ScopeNamespace {
		t.Fatalf("past the namespace's share: %q, want %q", refused.Scope, ScopeNamespace)
	}
	if got := a.Admitted(other); got != 0 {
		t.Fatalf("other holds %d", got)
	}
}

// One client joining a wake under way costs no wake, but it cannot take
// a Service's whole queue: past its share it is refused while another
// client still gets in, and its entry is gone once it holds nothing.
func TestAdmissionBoundsEachSource(t *testing.T) {
	a := New(Limits{PerService: 10, Global: 100, PerSource: 4, HeldBytes: 1 << 20, RequestBytes: 1 << 40, NamespaceShare: 100}, nil,
		clock.RealClock{}, prometheus.NewGauge(prometheus.GaugeOpts{Name: "q"}))
	web := clusterview.ServiceRef{Namespace: "shop", Name: "web"}
	noisy, quiet := netip.MustParseAddr("10.244.0.7"), netip.MustParseAddr("10.244.0.8")
	var releases []func()
	for i := range 4 {
		release, refused := a.Admit(web, 0, noisy, 0)
		if refused.Scope != "" {
			t.Fatalf("request %d of one client, within its share, refused (%q)", i+1, refused.Scope)
		}
		releases = append(releases, release)
	}
	if _, refused := a.Admit(web, 0, noisy, 0); refused.Scope != ScopeClient {
		t.Fatalf("past its share: %q, want %q", refused.Scope, ScopeClient)
	}
	// The share is per client, not per Service.
	if _, refused := a.Admit(clusterview.ServiceRef{Namespace: "shop", Name: "api"}, 0, noisy, 0); refused.Scope != ScopeClient {
		t.Fatalf("past its share, for another Service: %q, want %q", refused.Scope, ScopeClient)
	}
	if release, refused := a.Admit(web, 0, quiet, 0); refused.Scope != "" {
		t.Fatalf("another client was refused (%q)", refused.Scope)
	} else {
		release()
	}
	releases[0]()
	if _, refused := a.Admit(web, 0, noisy, 0); refused.Scope != "" {
		t.Fatalf("a released share was not reusable (%q)", refused.Scope)
	}
	for _, release := range releases {
		release()
	}
	if _, sources, _ := a.Usage(); sources != 1 {
		t.Fatalf("%d sources tracked, want 1: entries must go when a client holds nothing", sources)
	}
}

// Held bytes have one budget: a request that would pass it is refused
// whatever the queues say, and released bytes are reusable.
func TestAdmissionBoundsHeldBytes(t *testing.T) {
	a := New(Limits{PerService: 100, Global: 100, PerSource: 100, HeldBytes: 10 << 10, RequestBytes: 1 << 40, NamespaceShare: 100}, nil,
		clock.RealClock{}, prometheus.NewGauge(prometheus.GaugeOpts{Name: "q"}))
	web, client := clusterview.ServiceRef{Namespace: "shop", Name: "web"}, netip.MustParseAddr("10.244.0.7")
	r1, _ := a.Admit(web, 0, client, 6<<10)
	if _, refused := a.Admit(web, 0, client, 5<<10); refused.Scope != ScopeBytes {
		t.Fatalf("past the byte budget: %q, want %q", refused.Scope, ScopeBytes)
	}
	if _, refused := a.Admit(web, 0, client, 4<<10); refused.Scope != "" {
		t.Fatalf("within the byte budget: refused (%q)", refused.Scope)
	}
	r1()
	r1()
	if _, _, bytes := a.Usage(); bytes != 4<<10 {
		t.Fatalf("%d bytes charged after a double release, want %d", bytes, 4<<10)
	}
	if _, refused := a.Admit(web, 0, client, 6<<10); refused.Scope != "" {
		t.Fatalf("released bytes were not reusable (%q)", refused.Scope)
	}
}

// The request budget and a namespace's share of it, at the boundary and
// one past: a charge that fills either exactly is taken, one byte more is
// refused and takes nothing.
func TestAdversarialRequestBudgetBoundary(t *testing.T) {
	for _, c := range []struct {
		name  string
		share int
		scope string
	}{{"global", 100, ScopeRequests}, {"namespace", 50, ScopeNamespace}} {
		t.Run(c.name, func(t *testing.T) {
			const budget = 1 << 20
			a := New(Limits{PerService: 10, Global: 10, PerSource: 10, HeldBytes: 1 << 20,
				RequestBytes: budget, NamespaceShare: c.share}, nil, clock.RealClock{}, prometheus.NewGauge(prometheus.GaugeOpts{Name: "q"}))
			limit := int64(budget * c.share / 100)
			release, refused := a.Charge("team", limit)
			if refused.Scope != "" {
				t.Fatalf("a charge of exactly %d refused (%s)", limit, refused.Scope)
			}
			if _, refused := a.Charge("team", 1); refused.Scope != c.scope {
				t.Fatalf("one byte past: refusal %q, want %q", refused.Scope, c.scope)
			}
			if got, _ := a.RequestUsage(); got != limit {
				t.Fatalf("charged %d after a refusal, want %d", got, limit)
			}
			release()
			release() // a second call gives nothing back twice
			if got, namespaces := a.RequestUsage(); got != 0 || namespaces != 0 {
				t.Fatalf("after release: %d bytes, %d namespaces; want none", got, namespaces)
			}
		})
	}
}
