package testenv

import (
	"testing"
	"time"
)

func TestPercentileAndMean(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	// Nine fast cold starts and one that waited out a 10 s period: the
	// median hides the wait, the mean and p99 show it.
	cold := ms(900, 800, 850, 10400, 950, 820, 880, 910, 870, 860)
	for _, c := range []struct {
		name string
		got  time.Duration
		want time.Duration
	}{
		{"p50", Percentile(cold, 50), 870 * time.Millisecond},
		{"p99", Percentile(cold, 99), 10400 * time.Millisecond},
		{"p0", Percentile(cold, 0), 800 * time.Millisecond},
		{"mean", Mean(cold), 1824 * time.Millisecond},
		{"p50 of none", Percentile(nil, 50), 0},
		{"mean of none", Mean(nil), 0},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if Percentile(cold, 50); cold[0] != 900*time.Millisecond {
		t.Error("Percentile sorted its argument in place")
	}
}
