package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/wakestage"
)

// Event reasons for sleeps and wakes. Whoever scaled the target (the idle
// poller, a wake through the resolver, a person, KEDA), the operator sees
// it in the target's replicas and says so once, with the duration.
const (
	// ReasonSlept: the target went to zero; the message says how long it
	// had been awake.
	ReasonSlept = "Slept"
	// ReasonWoke: the first pod after a scale-up from zero is ready; the
	// message says how long the target slept and how long the cold start
	// took, and, for the pod the operator read before it took the resolver
	// away, how long it spent in each stage (package wakestage).
	ReasonWoke = "Woke"
)

// The sleep and wake bookkeeping in status (lastScaledDownTime, wakes,
// timeAsleep, lastScaledUpTime, lastColdStart, recentColdStarts,
// targetReplicas) is derived from status and the target's replicas; memory
// only makes its times precise. So a sleep or a cold start that spans an
// operator restart or a leader change is still counted, and counted once:
//
//   - A sleep is open while status.targetReplicas is 0 and
//     lastScaledDownTime is set (ElastiServiceStatus.Asleep). targetReplicas
//     is written only here, in the same write, so no other writer (the
//     wake's merge patch of lastScaledUpTime) can close or open one.
//   - A sleep ends when a sync sees replicas above zero and a Ready pod
//     serving: wakes and timeAsleep count it up to the scale-up
//     (lastScaledUpTime, which the wake records), and lastColdStart is the
//     time from that scale-up to now, in the same write. A scale-up
//     recorded under one operator and served under the next is measured
//     from the recorded lastScaledUpTime.
//
// It rides on the sync's own status write (writeStatus): a sleep coincides
// with the switch to proxy and a wake with the switch to serve, which
// write anyway. Only a change of the replicas of a target that is up (an
// HPA's) adds a write, one per change.

// targetObservation is what a sync saw of its ElastiService's target. It
// travels in the sync's context from reconcile to writeStatus, so the
// bookkeeping joins whichever status write the sync makes without every
// path between them passing it on.
type targetObservation struct {
	replicas int32
	// seenAtZero and wokenAt are this replica's memory (idle.Wakes) of when
	// the target was first seen at zero and last scaled up from zero, zero
	// if unknown. They only make the recorded times precise: status times
	// are whole seconds, and a sync may run a while after the change.
	seenAtZero, wokenAt time.Time
}

type targetObservationKey struct{}

// wakeMemory is what the controller's Replicas may also tell (idle.Wakes
// does); without it the bookkeeping uses the sync's own time.
type wakeMemory interface {
	LastWake(es types.NamespacedName) (time.Time, bool)
	SeenAtZero(es types.NamespacedName) (time.Time, bool)
}

// observeTarget returns ctx carrying what the sync saw of es's target,
// with what seen remembers of its sleeps and wakes.
func observeTarget(ctx context.Context, seen Replicas, es *elastiv1alpha1.ElastiService, replicas int32) context.Context {
	obs := targetObservation{replicas: replicas}
	if m, ok := seen.(wakeMemory); ok {
		obs.seenAtZero, _ = m.SeenAtZero(es.Key())
		obs.wokenAt, _ = m.LastWake(es.Key())
	}
	return context.WithValue(ctx, targetObservationKey{}, obs)
}

// statusEvent is a Normal event to record once the status that caused it
// is written, so a write that fails and is retried never records it twice.
type statusEvent struct{ reason, message string }

// trackSleepAndWake is writeStatus's hook: it advances next's sleep and
// wake bookkeeping when the sync observed the target, and returns the
// events to record after the write. A wake's event also says how long
// the pod that serves spent in each stage, when the sync read it.
func (w *statusWriter) trackSleepAndWake(ctx context.Context, next *elastiv1alpha1.ElastiServiceStatus) []statusEvent {
	obs, ok := ctx.Value(targetObservationKey{}).(targetObservation)
	if !ok {
		return nil
	}
	events := advanceSleepWake(next, obs, w.clock.Now())
	if pod, ok := ctx.Value(servingPodKey{}).(*corev1.Pod); ok && next.LastScaledUpTime != nil {
		if spans := wakestage.Spans(pod, next.LastScaledUpTime.Time); len(spans) > 0 {
			for i := range events {
				if events[i].reason == ReasonWoke {
					events[i].message += "; its stages: " + wakestage.SpansWords(spans)
				}
			}
		}
	}
	return events
}

type servingPodKey struct{}

// withServingPod returns ctx carrying pod, the pod the sync found to
// serve (canServe), for the wake's event; ctx itself when pod is nil.
func withServingPod(ctx context.Context, pod *corev1.Pod) context.Context {
	if pod == nil {
		return ctx
	}
	return context.WithValue(ctx, servingPodKey{}, pod)
}

func (w *statusWriter) recordSleepAndWake(es *elastiv1alpha1.ElastiService, events []statusEvent) {
	for _, ev := range events {
		w.recorder.Event(es, corev1.EventTypeNormal, ev.reason, ev.message)
	}
}

// advanceSleepWake updates next, the status about to be written, for the
// target observed as obs at now, and returns the events that go with the
// change. next.Mode is the mode being written: serve means a Ready pod
// takes the traffic.
func advanceSleepWake(next *elastiv1alpha1.ElastiServiceStatus, obs targetObservation, now time.Time) []statusEvent {
	var events []statusEvent
	wasAsleep := next.Asleep()
	serving := next.Mode == elastiv1alpha1.ModeServe
	if wasAsleep && obs.replicas > 0 && !serving {
		// Scaled up, no pod Ready yet: the wake is written with its first
		// Ready pod, in the switch to serve that writes anyway, so a
		// fleet-wide wake costs no status write more than before. A
		// scale-up that goes back to zero before any pod is Ready is no
		// wake: the sleep goes on.
		return nil
	}
	before := next.Replicas()
	next.TargetReplicas = &obs.replicas
	switch {
	case obs.replicas == 0 && !wasAsleep:
		at := now
		if t := obs.seenAtZero; !t.IsZero() && !t.After(now) {
			at = t
		}
		next.LastScaledDownTime = ptrTime(at)
		// Only a change seen from replicas above zero is a sleep worth an
		// event; the first observation of a target already at zero (a new
		// ElastiService, or status from before these fields) only starts
		// the count, as a first mode is an adoption and not a switch.
		if before > 0 {
			msg := "Target scaled to zero"
			if up := next.LastScaledUpTime; up != nil && up.Time.Before(at) {
				msg = fmt.Sprintf("Target scaled to zero after %s awake", roundDuration(at.Sub(up.Time)))
			}
			events = append(events, statusEvent{ReasonSlept, msg})
		}
	case obs.replicas > 0 && wasAsleep:
		down := next.LastScaledDownTime.Time
		at := wokeAt(next, obs, down, now)
		next.Wakes++
		var total time.Duration
		if next.TimeAsleep != nil {
			total = next.TimeAsleep.Duration
		}
		next.TimeAsleep = &metav1.Duration{Duration: total + max(0, at.Sub(down))}
		if up := next.LastScaledUpTime; up == nil || !up.After(down) {
			// The wake's own record (idle.Wakes) has not landed, or never
			// will (its writer died): the cold start needs its start.
			next.LastScaledUpTime = ptrTime(at)
		}
		next.LastColdStart = nil // measured below
	}
	if serving && obs.replicas > 0 && next.ColdStartUnderWay() {
		start := next.LastScaledUpTime.Time
		if w := obs.wokenAt; !w.Before(start) && w.Sub(start) < time.Second && !w.After(now) {
			start = w // the same wake, to the nanosecond
		}
		took := max(0, now.Sub(start))
		next.LastColdStart = &metav1.Duration{Duration: took}
		next.RecentColdStarts = appendColdStart(next.RecentColdStarts, took)
		slept := max(0, next.LastScaledUpTime.Sub(next.LastScaledDownTime.Time))
		events = append(events, statusEvent{ReasonWoke, fmt.Sprintf(
			"Target woke after %s asleep; its first pod was ready %s after the scale-up from zero (cold start)",
			roundDuration(slept), took.Round(time.Millisecond))})
	}
	return events
}

// wokeAt picks when a sleep that began at down ended: this replica's
// memory of the scale-up, else the scale-up recorded in status, else now,
// when the sync saw it.
func wokeAt(s *elastiv1alpha1.ElastiServiceStatus, obs targetObservation, down, now time.Time) time.Time {
	if w := obs.wokenAt; w.After(down) && !w.After(now) {
		return w
	}
	if up := s.LastScaledUpTime; up != nil && up.After(down) && !up.After(now) {
		return up.Time
	}
	return now
}

// appendColdStart keeps the latest MaxRecentColdStarts, oldest first, in a
// new slice (the old one may be shared with the cached object).
func appendColdStart(recent []metav1.Duration, d time.Duration) []metav1.Duration {
	keep := recent[max(0, len(recent)-(elastiv1alpha1.MaxRecentColdStarts-1)):]
	out := make([]metav1.Duration, 0, len(keep)+1)
	out = append(out, keep...)
	return append(out, metav1.Duration{Duration: d})
}

func ptrTime(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t)
	return &mt
}

// roundDuration shows a sleep or an awake time to the second, or to the
// millisecond below one.
func roundDuration(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Second)
}
