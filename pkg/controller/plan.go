package controller

import (
	"context"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/workloop"
)

// A sync's decisions are pure functions of its facts (readiness.go): no
// client, no Controller. reconcile gathers the facts, plans, and applies.

// stage is how far a sync goes. Each stage takes the steps of the ones
// before it; a plan that stops at a stage writes its not-Ready status
// after them.
type stage int

const (
	// stageAdmit: the spec is invalid or the Service does not route to
	// the target's pods. Nothing is claimed or written but status.
	stageAdmit stage = iota
	// stageClaim: the Service is claimed (by another ElastiService, when
	// the plan stops here, and es's resolver ports are let go of).
	stageClaim
	// stageLeave: the old Services of a move are taken a step further;
	// a plan stops here while the Service cannot be read.
	stageLeave
	// stageFront: the private Service is mirrored, resolver ports
	// assigned, old Services fronted; a plan stops here while the target
	// cannot be scaled.
	stageFront
	// stageRoute: the Service is routed to the target or the resolver.
	stageRoute
)

// syncPlan is what a sync does.
type syncPlan struct {
	stage stage
	// stop, when set, is why Ready goes False once the steps up to stage
	// are taken.
	stop *notReady
	// err ends the sync after the steps up to stage, with no status
	// write: a cache read failed for a reason the caches may mend.
	err error
	// settleHandoff tells a poller waiting to scale the target down that
	// it must not.
	settleHandoff bool
}

// ports is the resolver ports status records when the plan stops before
// they are assigned: as they are (nil) before the claim, none once
// another ElastiService claims the Service.
func (p syncPlan) ports() *portStatus {
	if p.stage == stageClaim {
		return noPorts
	}
	return nil
}

// planAdmission decides on the facts known before the claim: an invalid
// spec, then a namespace past its ElastiService budget, then a Service
// that does not route to the target's pods (checks
// 1 and 2 of readiness.go), stop the sync; otherwise it goes on to the
// claim and plan.
func planAdmission(f *facts) syncPlan {
	if v := invalidSpec(f); v != nil {
		return syncPlan{stage: stageAdmit, stop: v}
	}
	if v := overBudget(f); v != nil {
		return syncPlan{stage: stageAdmit, stop: v}
	}
	if v := selectorChecks.First(f); v != nil {
		return syncPlan{stage: stageAdmit, stop: v, settleHandoff: true}
	}
	return syncPlan{stage: stageRoute}
}

// plan decides on the facts with the claim known (checks 3 to 5 of
// readiness.go).
func plan(f *facts) syncPlan {
	if v := serviceClaimedByAnother(f); v != nil {
		return syncPlan{stage: stageClaim, stop: v}
	}
	if v := serviceMissing(f); v != nil {
		return syncPlan{stage: stageLeave, stop: v}
	}
	if f.serviceErr != nil {
		return syncPlan{stage: stageLeave, err: f.serviceErr}
	}
	if v := targetChecks.First(f); v != nil {
		return syncPlan{stage: stageFront, stop: v}
	}
	if f.targetErr != nil {
		return syncPlan{stage: stageFront, err: f.targetErr}
	}
	return syncPlan{stage: stageRoute}
}

// Ready messages.
const (
	readyServe = "The target has a ready pod; traffic goes straight to it"
	readyProxy = "The target has no ready pod; traffic goes to the resolver, which wakes the target on the first request"
)

// syncResult is what a sync writes to status, in one write
// (statusWriter.record).
type syncResult struct {
	// ports are the resolver ports to record; nil leaves them as they are.
	ports *portStatus
	// mode is the mode to record; empty leaves it as it is.
	mode string
	// notReady, when set, is why Ready is False; else ready is the
	// message of Ready True.
	notReady *notReady
	ready    string
	// canWait: the resolver was just put in front, so the status write
	// may wait behind other keys (statusWriter.statusCanWait).
	canWait bool
	// after is returned once the status is written: a requeue, or a
	// handoff's failure.
	after error
	// ctx carries what the sync observed of the target and its group,
	// for the status write; groupErr is a failed group step, returned
	// after the routing.
	ctx      context.Context
	groupErr error
}

// planProxy is the status of a sync that put the resolver in front: Ready
// unless no resolver pod can hold requests (check 6 of readiness.go).
// fenced is the slice's fence as the sync left it.
func planProxy(f *facts, ports *portStatus, fenced fence) syncResult {
	r := syncResult{ports: ports, mode: elastiv1alpha1.ModeProxy}
	if v := resolverUnavailable(f); v != nil {
		r.notReady = v
		return r
	}
	// Only the sync that fronts (no resolver slice was there) may defer.
	r.canWait, r.ready = f.slice == nil, readyProxy
	if left := fenced.remaining(f.now); f.state.Replicas > 0 && left > 0 {
		// Perhaps only fenced pods look ready: look again when the fence
		// lapses, in case they were never going away.
		r.after = workloop.RequeueAfter(left)
	}
	return r
}
