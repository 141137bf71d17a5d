package v1alpha1

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func durations(ds ...time.Duration) []metav1.Duration {
	out := make([]metav1.Duration, len(ds))
	for i, d := range ds {
		out[i] = metav1.Duration{Duration: d}
	}
	return out
}

func TestMedianColdStart(t *testing.T) {
	for _, c := range []struct {
		in   []metav1.Duration
		want time.Duration
		ok   bool
	}{
		{nil, 0, false},
		{durations(3 * time.Second), 3 * time.Second, true},
		{durations(9*time.Second, time.Second, 2*time.Second), 2 * time.Second, true},
		{durations(4*time.Second, time.Second, 2*time.Second, 30*time.Second), 3 * time.Second, true},
	} {
		st := ElastiServiceStatus{RecentColdStarts: c.in}
		if got, ok := st.MedianColdStart(); got != c.want || ok != c.ok {
			t.Errorf("MedianColdStart(%v) = %v, %v; want %v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}
