package v1alpha1

import (
	"strings"
	"testing"
	"time"
)

func TestParseHoldTimeout(t *testing.T) {
	for _, c := range []struct {
		in     string
		want   time.Duration
		ok, ex bool // ex: an error expected
	}{
		{"", 0, false, false},
		{"10m", 10 * time.Minute, true, false},
		{"1h", time.Hour, true, false},
		{"1h0m0.000000001s", 0, false, true},
		{"0s", 0, false, true},
		{"-1s", 0, false, true},
		{"10 minutes", 0, false, true},
		{"10M", 0, false, true},
		{strings.Repeat("0", MaxHoldTimeoutLength-2) + "1s", time.Second, true, false}, // at the length bound
		{strings.Repeat("0", MaxHoldTimeoutLength-1) + "1s", 0, false, true},           // one past it
	} {
		got, ok, err := ParseHoldTimeout(c.in)
		if got != c.want || ok != c.ok || (err != nil) != c.ex {
			t.Errorf("ParseHoldTimeout(%q) = %v, %v, %v; want %v, %v, error %v", c.in, got, ok, err, c.want, c.ok, c.ex)
		}
	}
}
