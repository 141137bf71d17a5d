package idle

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/outcome"
	"github.com/elasti-dev/elasti/pkg/policy"
	"github.com/elasti-dev/elasti/pkg/scaletarget"
	"github.com/elasti-dev/elasti/pkg/schedule"
)

// An evaluation passes three chains of gates (see pkg/policy): each gate
// reads only the facts gathered so far and either lets the evaluation go
// on (nil) or ends it with a verdict; the first verdict wins. Between the
// chains the poller reads more facts (the target's replicas, the
// triggers' answer).
var (
	// admissionGates run on what the cache knows, before anything is
	// acted on.
	admissionGates = gates{deleting, notManaged, moving, invalidSchedule, targetMissing}
	// windowGates run once the target's replicas are known, before the
	// triggers are queried.
	windowGates = gates{outsideWindow, preWarming, alreadyZero, sleepRequested, justCreated, recentlyWoken, wakeUnserved}
	// triggerGates run on the triggers' answer; past them the target is
	// scaled to zero.
	triggerGates = gates{triggersFailed, notIdle}
)

// facts are what the gates decide on.
type facts struct {
	es *elastiv1alpha1.ElastiService
	// ref is es's scale target; minReplicas the least a wake scales it to
	// (directory.Entry.MinTargetReplicas).
	ref         scaletarget.Ref
	minReplicas int32
	// manages and moving are the Router's answers.
	manages, moving bool
	window          schedule.Window
	windowErr       error
	// targetErr is why the target could not be read; replicas is its
	// replicas when it could.
	targetErr error
	replicas  int32
	now       time.Time
	cooldown  time.Duration
	// lastWake is the latest scale-up from zero known (see Poller.lastWake).
	lastWake time.Time
	// waking: that wake has not served yet, its target has had no Ready
	// pod since; servedAt is when its first pod was Ready, once it has
	// (see wakeProgress). lastAsked is when a resolver last asked for a
	// wake of this target (idle.Wakes.Asked).
	waking    bool
	servedAt  time.Time
	lastAsked time.Time
	// preWarming: now is in the pre-warm lead before the window closes
	// at closes (schedule.Window.PreWarming).
	preWarming bool
	closes     time.Time
	// sleepRequested: a sleep request newer than lastWake is pending,
	// made at sleepRequestedAt (elastiv1alpha1.SleepRequest).
	sleepRequested   bool
	sleepRequestedAt time.Time
	// triggersErr is why the triggers could not be evaluated; idle is
	// their verdict when they could.
	triggersErr error
	idle        bool
}

// verdict ends an evaluation: what the poller does (Poller.act) and the
// outcome it reports.
type verdict struct {
	action  action
	outcome outcome.Idle
	// eventType, reason and message, when reason is set, are the event
	// that says why.
	eventType, reason, message string
}

// action is what a verdict has the poller do.
type action int

const (
	// conclude records the verdict's event, if any, and reports its
	// outcome; nothing is scaled.
	conclude action = iota
	// wakeOutsideWindow scales the target up first; the outcome stands
	// only if it is up.
	wakeOutsideWindow
	// preWarm and sleepNow hand the evaluation to Poller.preWarm and
	// Poller.sleepOnRequest, whose outcome it is.
	preWarm
	sleepNow
	// sleepDependencies lets the dependencies of a target found at zero
	// sleep, then concludes.
	sleepDependencies
)

// gate is one decision: nil lets the evaluation go on.
type gate = func(f *facts) *verdict

// gates are evaluated in order; the first verdict wins.
type gates = policy.Chain[*facts, verdict]

func deleting(f *facts) *verdict {
	if f.es.DeletionTimestamp != nil {
		return &verdict{outcome: outcome.IdleDeleting}
	}
	return nil
}

// notManaged leaves alone an ElastiService whose Service the controller
// does not drive: nothing could wake its target.
func notManaged(f *facts) *verdict {
	if !f.manages {
		return &verdict{outcome: outcome.IdleNotManaged}
	}
	return nil
}

// moving waits for a change of spec.service to finish: the move wakes the
// target, and would only wake it again.
func moving(f *facts) *verdict {
	if f.moving {
		return &verdict{outcome: outcome.IdleMoving}
	}
	return nil
}

func invalidSchedule(f *facts) *verdict {
	if f.windowErr != nil {
		return &verdict{outcome: outcome.IdleInvalidSchedule,
			eventType: corev1.EventTypeWarning, reason: ReasonInvalidSchedule, message: f.windowErr.Error()}
	}
	return nil
}

func targetMissing(f *facts) *verdict {
	if f.targetErr != nil {
		return &verdict{outcome: outcome.IdleTargetMissing}
	}
	return nil
}

// outsideWindow keeps the target up outside the enabled period, waking it
// if it is at zero.
func outsideWindow(f *facts) *verdict {
	if !f.window.Active(f.now) {
		if f.replicas == 0 {
			return &verdict{action: wakeOutsideWindow, outcome: outcome.IdleOutsideWindow}
		}
		return &verdict{outcome: outcome.IdleOutsideWindow}
	}
	return nil
}

// preWarming holds the target up in the lead before the window closes.
func preWarming(f *facts) *verdict {
	if f.preWarming {
		return &verdict{action: preWarm, outcome: outcome.IdlePreWarm}
	}
	return nil
}

// sleepRequested makes a target above zero idle now on a pending sleep
// request, whatever its triggers and cooldown say.
func sleepRequested(f *facts) *verdict {
	if f.sleepRequested {
		return &verdict{action: sleepNow, outcome: outcome.IdleScaledToZero}
	}
	return nil
}

func alreadyZero(f *facts) *verdict {
	if f.replicas == 0 {
		return &verdict{action: sleepDependencies, outcome: outcome.IdleAlreadyZero}
	}
	return nil
}

// justCreated gives a new ElastiService one cooldown before its first
// scale-down.
func justCreated(f *facts) *verdict {
	if f.now.Sub(f.es.CreationTimestamp.Time) < f.cooldown {
		return &verdict{outcome: outcome.IdleCooldown}
	}
	return nil
}

// heldAskGrace is how long after a resolver's last ask a wake that has
// not served is still taken as asked for. A resolver that holds a request
// asks again every --operator-retry-max (10 s by default); three of its
// asks fit, so a lost one or a leader change does not end the grace.
const heldAskGrace = 30 * time.Second

// wakeUnserved never undoes a wake before it has served: past the
// cooldown from the wake (recentlyWoken), a woken target that has had no
// Ready pod yet stays up for as long as a resolver still asks for it, that
// is, holds a request for it. A pod slower to be Ready than the cooldown
// (a model server loading its weights, or any pod on a loaded node) was
// otherwise scaled away under its own held requests, and every wake after
// it too. A wake that never serves and that nobody asks for any more is
// scaled down once the cooldown from the wake is over, as before.
func wakeUnserved(f *facts) *verdict {
	if f.waking && !f.lastAsked.IsZero() && f.now.Sub(f.lastAsked) < heldAskGrace {
		return &verdict{outcome: outcome.IdleWaking}
	}
	return nil
}

// recentlyWoken never undoes a scale-up from zero within its cooldown,
// counted from the wake's first Ready pod once it has one: a target woken
// slowly still serves for a whole cooldown before it may sleep.
func recentlyWoken(f *facts) *verdict {
	from := f.lastWake
	if f.servedAt.After(from) {
		from = f.servedAt
	}
	if !from.IsZero() && f.now.Sub(from) < f.cooldown {
		return &verdict{outcome: outcome.IdleCooldown}
	}
	return nil
}

// triggersFailed never scales down on triggers that could not be
// evaluated.
func triggersFailed(f *facts) *verdict {
	if f.triggersErr != nil {
		return &verdict{outcome: outcome.IdleTriggerError,
			eventType: corev1.EventTypeWarning, reason: ReasonTriggerError, message: fmt.Sprintf("Not scaling to zero: %v", f.triggersErr)}
	}
	return nil
}

func notIdle(f *facts) *verdict {
	if !f.idle {
		return &verdict{outcome: outcome.IdleBusy}
	}
	return nil
}
