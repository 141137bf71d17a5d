package resolver

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestAdmissionBoundsPerServiceThenGlobally(t *testing.T) {
	queued := prometheus.NewGauge(prometheus.GaugeOpts{Name: "queued"})
	a := newAdmission(2, 3, queued)
	web, api := ServiceRef{"shop", "web"}, ServiceRef{"shop", "api"}
	r1, _ := a.admit(web)
	_, _ = a.admit(web)
	if _, overflow := a.admit(web); overflow != ScopeService {
		t.Fatalf("third slot for one service: overflow %q, want %q", overflow, ScopeService)
	}
	if _, overflow := a.admit(api); overflow != "" {
		t.Fatalf("another service within the global bound was refused (%q)", overflow)
	}
	if _, overflow := a.admit(api); overflow != ScopeGlobal {
		t.Fatalf("past the global bound: overflow %q, want %q", overflow, ScopeGlobal)
	}
	r1()
	r1() // releasing twice frees one slot only
	if got := a.admitted(web); got != 1 {
		t.Fatalf("web holds %d slots after one release, want 1", got)
	}
	if _, overflow := a.admit(api); overflow != "" {
		t.Fatalf("a released slot was not reusable (%q)", overflow)
	}
	if _, overflow := a.admit(web); overflow != ScopeGlobal {
		t.Fatalf("global bound not enforced after reuse: %q", overflow)
	}
	if got := testutil.ToFloat64(queued); got != 3 {
		t.Fatalf("queued gauge = %v, want the 3 slots taken", got)
	}
}
