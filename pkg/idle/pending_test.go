package idle

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

// A group wake is under way while the latest wake known (in memory or in
// status) is later than the latest sleep known (the target seen going from
// above zero to zero in memory, or lastScaledDownTime), so a sleep just
// made, whose status is not written yet, is never taken for a wake, and a
// first look at a target already at zero is no sleep.
func TestPending(t *testing.T) {
	web := types.NamespacedName{Namespace: "shop", Name: "web"}
	at := func(s int) *metav1.Time { t := metav1.NewTime(now.Add(time.Duration(s) * time.Second)); return &t }
	for _, tc := range []struct {
		name string
		// steps, a second apart: "0" or "2" the target's replicas seen,
		// "wake" a wake recorded.
		steps    []string
		up, down *metav1.Time
		want     bool
	}{
		{"nothing known", nil, nil, nil, false},
		{"woken after it was seen at zero", []string{"0", "wake"}, nil, nil, true},
		{"first seen at zero just after the wake: no sleep seen", []string{"wake", "0"}, nil, nil, true},
		{"seen going to zero after the wake: the poller's sleep", []string{"2", "wake", "0"}, nil, nil, false},
		{"the poller's sleep, its status not written yet", []string{"2", "0"}, at(-10), at(-20), false},
		{"woken again after a sleep seen", []string{"2", "0", "wake"}, at(-10), at(-20), true},
		{"after a restart, status says woken after the sleep", []string{"0"}, at(-5), at(-20), true},
		{"status says asleep after the wake", nil, at(-20), at(-5), false},
		{"a wake in memory newer than the status sleep", []string{"wake"}, at(-20), at(-5), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			w := NewWakes(ctx, &statusWrites{}, time.Second)
			clock := clocktesting.NewFakePassiveClock(now)
			w.clock = clock
			replayWakeSteps(ctx, w, clock, web, tc.steps)
			w.Wait()
			st := &elastiv1alpha1.ElastiServiceStatus{LastScaledUpTime: tc.up, LastScaledDownTime: tc.down}
			if got := w.Pending(web, st); got != tc.want {
				t.Errorf("Pending = %v, want %v", got, tc.want)
			}
		})
	}
}
