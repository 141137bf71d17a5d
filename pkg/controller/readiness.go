package controller

import (
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/nsbudget"
	"github.com/elasti-dev/elasti/pkg/policy"
	"github.com/elasti-dev/elasti/pkg/scaletarget"
	"github.com/elasti-dev/elasti/pkg/validation"
)

// Reconcile's not-Ready exits are small checks (see pkg/policy): each
// reads only the facts reconcile gathered and returns nil to let it go on,
// or the reason and message the Ready condition is set False with. The
// plan (plan.go) meets them in this order, and the first one that fails
// sets the stage the sync stops at:
//
//  1. invalidSpec
//  2. overBudget (budget.go)
//  3. selectorChecks: serviceWithoutSelector, serviceSelectsOtherPods
//     (selector.go); leaveUnkeptService (unkept.go) decides whether the
//     resolver stays in front of a Service Kubernetes no longer keeps
//  4. serviceClaimedByAnother
//  5. serviceMissing
//  6. targetChecks: targetKindUnsupported, targetMissing
//  7. resolverUnavailable, in proxy mode only
var (
	selectorChecks = readinessChecks{serviceWithoutSelector, serviceSelectsOtherPods}
	targetChecks   = readinessChecks{targetKindUnsupported, targetMissing}
)

// facts are what the readiness checks decide on.
type facts struct {
	es *elastiv1alpha1.ElastiService
	// service is es's Service from the cache, nil with serviceErr when it
	// cannot be read.
	service    *corev1.Service
	serviceErr error
	// target is es's scale target; podLabels are its pod template's
	// labels, when targetErr is nil.
	target    scaletarget.Ref
	podLabels map[string]string
	targetErr error
	// claimant is the ElastiService that claims es's Service in the
	// directory; claimed says it is es.
	claimant types.NamespacedName
	claimed  bool
	// resolverPods counts the resolver's ready endpoints; the resolver
	// Service is resolverNamespace/resolverService.
	resolverPods                       int
	resolverNamespace, resolverService string

	// state is the target's, read with targetErr.
	state scaletarget.State
	// old names the Services of a move not yet let go of.
	old []string
	// slice is the Service's resolver slice, nil when there is none;
	// fenced is its fence at now.
	slice  *discoveryv1.EndpointSlice
	fenced fence
	now    time.Time
	// resolverEndpoints are the resolver's ready endpoints (resolverPods
	// counts them); perPort says they all serve per-port routing.
	resolverEndpoints []discoveryv1.Endpoint
	perPort           bool
	// overBudget says es is past its namespace's ElastiService budget,
	// whose limits are budgetLimits (pkg/nsbudget).
	overBudget   bool
	budgetLimits nsbudget.Limits
}

// notReady is a failed check: the Ready condition's reason and message,
// and what brings the key back.
type notReady struct {
	reason, message string
	then            notReadyFollowUp
}

// readinessCheck is one not-Ready exit: nil lets the sync go on.
type readinessCheck = func(f *facts) *notReady

// readinessChecks are evaluated in order; the first failed check wins.
type readinessChecks = policy.Chain[*facts, notReady]

// invalidSpec comes first, so nothing is written for an invalid spec and
// the directory keeps the last valid claim: a Service left in proxy mode
// still wakes.
func invalidSpec(f *facts) *notReady {
	if errs := validation.ValidateElastiService(f.es); len(errs) > 0 {
		return &notReady{ReasonInvalidSpec, validation.Message(errs), awaitChange}
	}
	return nil
}

// serviceClaimedByAnother: only one ElastiService may drive a Service's
// endpoints; this one waits until the claimant lets go, whose deletion
// re-enqueues it.
func serviceClaimedByAnother(f *facts) *notReady {
	if !f.claimed {
		return &notReady{ReasonServiceConflict,
			fmt.Sprintf("Service %q is already managed by ElastiService %q", f.es.Spec.Service, f.claimant.Name), awaitChange}
	}
	return nil
}

func serviceMissing(f *facts) *notReady {
	if apierrors.IsNotFound(f.serviceErr) {
		return &notReady{ReasonServiceNotFound,
			fmt.Sprintf("Service %q does not exist in namespace %q", f.es.Spec.Service, f.es.Namespace), retryWithBackoff}
	}
	return nil
}

func targetKindUnsupported(f *facts) *notReady {
	if errors.Is(f.targetErr, scaletarget.ErrUnsupportedKind) {
		return &notReady{ReasonUnsupportedTarget,
			fmt.Sprintf("scale target kind %q is not supported; use Deployment, StatefulSet or Rollout", f.es.Spec.ScaleTargetRef.Kind), awaitChange}
	}
	return nil
}

// targetMissing keeps routing as it is until the target exists: without
// one, switching modes would only strand traffic.
func targetMissing(f *facts) *notReady {
	if !scaletarget.IsNotFound(f.targetErr) {
		return nil
	}
	msg := fmt.Sprintf("scale target %s %q does not exist", f.target.Kind, f.target.Name)
	if errors.Is(f.targetErr, scaletarget.ErrRolloutsUnavailable) {
		msg = f.targetErr.Error()
	}
	return &notReady{ReasonTargetNotFound, msg, retryWithBackoff}
}

// resolverUnavailable: in proxy mode, requests are held by the resolver,
// and none of its pods is ready.
func resolverUnavailable(f *facts) *notReady {
	if f.resolverPods == 0 {
		return &notReady{ReasonResolverUnavailable,
			fmt.Sprintf("no ready pod behind resolver Service %s/%s; requests to %q cannot be held until one is ready",
				f.resolverNamespace, f.resolverService, f.es.Spec.Service), retryWithBackoff}
	}
	return nil
}
