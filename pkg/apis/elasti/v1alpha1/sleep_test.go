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

func TestWaking(t *testing.T) {
	now := time.Now()
	ts := func(ago time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(-ago)} }
	zero, one := int32(0), int32(1)
	for _, c := range []struct {
		name string
		s    ElastiServiceStatus
		want bool
	}{
		{"scaled up since the sleep began", ElastiServiceStatus{TargetReplicas: &zero, LastScaledDownTime: ts(time.Hour), LastScaledUpTime: ts(time.Minute)}, true},
		{"asleep, the last wake before the sleep", ElastiServiceStatus{TargetReplicas: &zero, LastScaledDownTime: ts(time.Hour), LastScaledUpTime: ts(2 * time.Hour)}, false},
		{"asleep, never woken", ElastiServiceStatus{TargetReplicas: &zero, LastScaledDownTime: ts(time.Hour)}, false},
		{"awake: a Ready pod ended the sleep", ElastiServiceStatus{TargetReplicas: &one, LastScaledDownTime: ts(time.Hour), LastScaledUpTime: ts(time.Minute)}, false},
		{"no sleep recorded", ElastiServiceStatus{LastScaledUpTime: ts(time.Minute)}, false},
	} {
		if got := c.s.Waking(); got != c.want {
			t.Errorf("%s: Waking() = %v, want %v", c.name, got, c.want)
		}
	}
}
