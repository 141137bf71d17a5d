package v1alpha1

import "time"

// AnnotationSleepRequestedAt on an ElastiService asks the operator to scale
// its target to zero now, as if its triggers had been idle for the whole
// cooldown: `kubectl elasti sleep` writes it. Its value is an RFC 3339 time.
// The idle poller honours it only while it is newer than the target's last
// scale-up, so any later wake (a request, a person, `kubectl elasti wake`)
// ends it without anyone removing it, and a stale one never puts a woken
// target back to sleep. It goes through the poller's ordinary scale-down
// (the resolver in front first), inside the enabled period only.
const AnnotationSleepRequestedAt = "elasti.truefoundry.com/sleep-requested-at"

// SleepRequest returns the time of es's sleep request and whether it is
// pending: present, readable and newer than lastWake, the target's last
// scale-up from zero (zero if none is known).
func SleepRequest(es *ElastiService, lastWake time.Time) (at time.Time, pending bool) {
	v, ok := es.Annotations[AnnotationSleepRequestedAt]
	if !ok {
		return time.Time{}, false
	}
	at, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, false
	}
	return at, at.After(lastWake)
}
