package v1alpha1

import "time"

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
