package admission

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
)

// With the defaults (bursts of 100, then 10 a second) a client starts 100
// wakes at once, the 101st waits for the bucket to refill, another client
// is unaffected, and requests that join a wake under way cost nothing.
func TestAdmissionLimitsTheWakesEachSourceStarts(t *testing.T) {
	fake := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	a := New(queueLimits(1000, 10000), NewWakeLimiter(DefaultSourceWakeRate, DefaultSourceWakeBurst, DefaultSourceWakeTracked),
		fake, prometheus.NewGauge(prometheus.GaugeOpts{Name: "queued"}))
	noisy, quiet := netip.MustParseAddr("10.244.0.7"), netip.MustParseAddr("10.244.0.8")

	for i := range 100 {
		if _, refused := a.Admit(cold(i), 0, noisy, 0); refused.Scope != "" {
			t.Fatalf("wake %d of the burst refused (%q)", i+1, refused.Scope)
		}
	}
	_, refused := a.Admit(cold(100), 0, noisy, 0)
	if refused.Scope != ScopeSource || refused.RetryAfter <= 0 || refused.RetryAfter > 100*time.Millisecond {
		t.Fatalf("the 101st wake: %+v, want ScopeSource with a wait of at most 100ms (one wake at 10/s)", refused)
	}
	if a.Admitted(cold(100)) != 0 {
		t.Fatal("a refused wake took a slot")
	}
	// Joining wakes under way is free, however often.
	for range 500 {
		if _, refused := a.Admit(cold(3), 0, noisy, 0); refused.Scope != "" {
			t.Fatalf("a request for a Service already waking was refused (%q)", refused.Scope)
		}
	}
	if _, refused := a.Admit(cold(100), 0, quiet, 0); refused.Scope != "" {
		t.Fatalf("another client was refused (%q) because of the noisy one", refused.Scope)
	}
	if got := a.wakes.Sources(); got != 2 {
		t.Errorf("tracked sources = %v, want 2", got)
	}

	// One wake refills in 100ms; the next is refused again.
	fake.SetTime(fake.Now().Add(100 * time.Millisecond))
	if _, refused := a.Admit(cold(101), 0, noisy, 0); refused.Scope != "" {
		t.Fatalf("after 100ms the refilled wake was refused (%q)", refused.Scope)
	}
	if _, refused := a.Admit(cold(102), 0, noisy, 0); refused.Scope != ScopeSource {
		t.Fatalf("a second wake after one refilled: %q, want %q", refused.Scope, ScopeSource)
	}
}

// A Service whose held requests all left is cold again: its next request
// starts a new wake and pays for it.
func TestAWakeCostsAgainOnceNothingIsHeld(t *testing.T) {
	fake := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	a := New(queueLimits(1000, 10000), NewWakeLimiter(1, 2, 10),
		fake, prometheus.NewGauge(prometheus.GaugeOpts{Name: "q"}))
	client := netip.MustParseAddr("10.244.0.7")
	for i := range 2 {
		release, refused := a.Admit(cold(0), 0, client, 0)
		if refused.Scope != "" {
			t.Fatalf("wake %d refused (%q)", i+1, refused.Scope)
		}
		release()
	}
	if _, refused := a.Admit(cold(0), 0, client, 0); refused.Scope != ScopeSource {
		t.Fatalf("a third wake of an idle Service within the burst: %q, want %q", refused.Scope, ScopeSource)
	}
}

// Memory stays bounded: buckets that have refilled are forgotten, and no
// more than the cap are tracked.
func TestWakeLimiterForgetsIdleSourcesAndCapsThem(t *testing.T) {
	l := NewWakeLimiter(10, 100, 3) // refills completely in 10s
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	addr := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 244, 1, byte(i)}) }

	for i := range 10 {
		if _, ok := l.Take(addr(i), now); !ok {
			t.Fatalf("first wake of source %d refused", i)
		}
		if n := l.Sources(); n > 3 {
			t.Fatalf("%d sources tracked, cap 3", n)
		}
	}
	if got := l.Sources(); got != 3 {
		t.Errorf("tracked sources gauge = %v, want 3", got)
	}
	// Spend source 9's burst, then let 10s pass: its bucket is full again
	// and nobody needs remembering.
	for range 99 {
		l.Take(addr(9), now)
	}
	if _, ok := l.Take(addr(9), now); ok {
		t.Fatal("source 9 was not out of wakes")
	}
	now = now.Add(10 * time.Second)
	if _, ok := l.Take(addr(1), now); !ok {
		t.Fatal("a new source was refused")
	}
	if n := l.Sources(); n != 1 {
		t.Errorf("after every bucket refilled %d sources are tracked, want only the new one", n)
	}
	if _, ok := l.Take(addr(9), now); !ok {
		t.Error("source 9 was still out of wakes after its bucket refilled")
	}
}

func TestSourceOf(t *testing.T) {
	for remote, want := range map[string]string{
		"10.244.0.7:51234":           "10.244.0.7",
		"[::ffff:10.244.0.7]:51234":  "10.244.0.7",
		"[fd00::7]:51234":            "fd00::7",
		"@":                          "invalid IP",
		"not-an-address-at-all:1234": "invalid IP",
	} {
		if got := SourceOf(remote).String(); got != want {
			t.Errorf("SourceOf(%q) = %s, want %s", remote, got, want)
		}
	}
}

// A client that rotates its source address (an IPv6 range, or many pods)
// is tracked for at most SourceWakeTracked addresses.
func TestWakeLimiterBoundsRotatingSources(t *testing.T) {
	const maxSources = 1000
	l := NewWakeLimiter(DefaultSourceWakeRate, DefaultSourceWakeBurst, maxSources)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	prefix := netip.MustParseAddr("fd00::").As16()
	for i := range 100_000 {
		a := prefix
		a[12], a[13], a[14], a[15] = byte(i>>24), byte(i>>16), byte(i>>8), byte(i)
		if _, ok := l.Take(netip.AddrFrom16(a), now); !ok {
			t.Fatalf("the first wake of source %d was refused", i)
		}
	}
	if n := l.Sources(); n != maxSources {
		t.Fatalf("%d sources tracked, want the cap %d", n, maxSources)
	}
}

// cold is the i-th of many sleeping Services of namespace team.
func cold(i int) clusterview.ServiceRef {
	return clusterview.ServiceRef{Namespace: "team", Name: fmt.Sprintf("cold-%d", i)}
}
