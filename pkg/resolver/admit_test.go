package resolver

import (
	"net/netip"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestAdmissionBoundsPerServiceThenGlobally(t *testing.T) {
	queued := prometheus.NewGauge(prometheus.GaugeOpts{Name: "queued"})
	a := newAdmission(2, 3, nil, queued)
	web, api := ServiceRef{"shop", "web"}, ServiceRef{"shop", "api"}
	client := netip.MustParseAddr("10.244.0.7")
	r1, _ := a.admit(web, client)
	_, _ = a.admit(web, client)
	if _, refused := a.admit(web, client); refused.scope != ScopeService {
		t.Fatalf("third slot for one service: overflow %q, want %q", refused.scope, ScopeService)
	}
	if _, refused := a.admit(api, client); refused.scope != "" {
		t.Fatalf("another service within the global bound was refused (%q)", refused.scope)
	}
	if _, refused := a.admit(api, client); refused.scope != ScopeGlobal {
		t.Fatalf("past the global bound: overflow %q, want %q", refused.scope, ScopeGlobal)
	}
	r1()
	r1() // releasing twice frees one slot only
	if got := a.admitted(web); got != 1 {
		t.Fatalf("web holds %d slots after one release, want 1", got)
	}
	if _, refused := a.admit(api, client); refused.scope != "" {
		t.Fatalf("a released slot was not reusable (%q)", refused.scope)
	}
	if _, refused := a.admit(web, client); refused.scope != ScopeGlobal {
		t.Fatalf("global bound not enforced after reuse: %q", refused.scope)
	}
	if got := testutil.ToFloat64(queued); got != 3 {
		t.Fatalf("queued gauge = %v, want the 3 slots taken", got)
	}
}
