package v1alpha1

import (
	"slices"
	"time"
)

// Asleep reports whether the status says the target sleeps: the operator
// last observed it at zero replicas and recorded when that sleep began.
// Both the operator's status bookkeeping and its metrics ask this, so a
// sleep means the same to both. Status that predates lastScaledDownTime
// (an operator without it, or KubeElasti) is never asleep.
func (s *ElastiServiceStatus) Asleep() bool {
	return s.LastScaledDownTime != nil && s.Replicas() == 0
}

// Replicas is TargetReplicas, or 0 while none has been observed.
func (s *ElastiServiceStatus) Replicas() int32 {
	if s.TargetReplicas == nil {
		return 0
	}
	return *s.TargetReplicas
}

// AsleepFor is the total time the target spent at zero as of now: the
// ended sleeps (timeAsleep) and, while it sleeps, the current one so far.
func (s *ElastiServiceStatus) AsleepFor(now time.Time) time.Duration {
	var total time.Duration
	if s.TimeAsleep != nil {
		total = s.TimeAsleep.Duration
	}
	if s.Asleep() {
		total += max(0, now.Sub(s.LastScaledDownTime.Time))
	}
	return total
}

// ColdStartUnderWay reports whether a wake was counted and its cold start
// not yet measured: the woken target has had no Ready pod since (a wake
// clears lastColdStart).
func (s *ElastiServiceStatus) ColdStartUnderWay() bool {
	return s.Wakes > 0 && s.LastColdStart == nil && s.LastScaledUpTime != nil && s.LastScaledDownTime != nil
}

// WakeServedAt is when the latest recorded wake's first pod was Ready:
// lastScaledUpTime plus lastColdStart. False while that cold start is
// under way, and for status that has no measured cold start.
func (s *ElastiServiceStatus) WakeServedAt() (time.Time, bool) {
	if s.LastScaledUpTime == nil || s.LastColdStart == nil {
		return time.Time{}, false
	}
	return s.LastScaledUpTime.Add(s.LastColdStart.Duration), true
}

// MedianColdStart is the cold-start p50 of status.recentColdStarts: the
// middle one, or the mean of the two middle ones; false for none. kubectl
// elasti status shows it, and the resolver sets Retry-After from it for a
// client past a Service's hold bounds.
func (s *ElastiServiceStatus) MedianColdStart() (time.Duration, bool) {
	ds := s.RecentColdStarts
	if len(ds) == 0 {
		return 0, false
	}
	sorted := make([]time.Duration, len(ds))
	for i, d := range ds {
		sorted[i] = d.Duration
	}
	slices.Sort(sorted)
	mid := len(sorted) / 2
	if len(sorted)%2 == 1 {
		return sorted[mid], true
	}
	return sorted[mid-1] + (sorted[mid]-sorted[mid-1])/2, true
}

// Waking reports whether the status says a wake is under way: the target
// sleeps as far as the operator has written, and was scaled up from zero
// since (lastScaledUpTime, which the wake records), with no Ready pod yet
// (the first Ready pod ends the sleep in status).
func (s *ElastiServiceStatus) Waking() bool {
	return s.Asleep() && s.LastScaledUpTime != nil && s.LastScaledUpTime.After(s.LastScaledDownTime.Time)
}
