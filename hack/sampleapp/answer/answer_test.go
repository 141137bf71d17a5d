package answer

import (
	"testing"
	"time"
)

// Whose readiness check a User-Agent is: the kubelet's whatever its
// version, the resolver's, or anybody else's (case matters, as the
// senders spell it).
func TestCheckerOf(t *testing.T) {
	for ua, want := range map[string]string{
		"kube-probe/1.36": CheckedByKubelet, "kube-probe/1.9": CheckedByKubelet,
		"kube-probe/elasti": CheckedByResolver,
		"Kube-Probe/elasti": CheckedByOther, "curl/8.0": CheckedByOther, "": CheckedByOther,
	} {
		if got := CheckerOf(ua); got != want {
			t.Errorf("CheckerOf(%q) = %q, want %q", ua, got, want)
		}
	}
}

// The spans are the differences of the app's instants.
func TestSpans(t *testing.T) {
	r := Reply{Started: 1_000_000, Listening: 1_300_000, FirstReady: 1_350_000, Arrived: 1_351_500}
	for name, got := range map[string][2]time.Duration{
		"ListenedAfter":       {r.ListenedAfter(), 300 * time.Millisecond},
		"ReadyAfterStart":     {r.ReadyAfterStart(), 350 * time.Millisecond},
		"ReadyAfterListening": {r.ReadyAfterListening(), 50 * time.Millisecond},
		"BeyondReady":         {r.BeyondReady(), 1500 * time.Microsecond},
	} {
		if got[0] != got[1] {
			t.Errorf("%s = %s, want %s", name, got[0], got[1])
		}
	}
}
