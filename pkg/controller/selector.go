package controller

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/scaletarget"
	"github.com/elasti-dev/elasti/pkg/validation"
)

// rolloutsPodTemplateHashLabel is the label Argo Rollouts puts on a
// Rollout's pods, and adds to the selectors of the stable and canary
// Services it manages.
const rolloutsPodTemplateHashLabel = "rollouts-pod-template-hash"

// The selector checks (see readiness.go) refuse a Service that does not
// route to the target's pods. An ElastiService writes its Service's
// endpoints and scales its target, so a Service with no selector (its
// endpoints written by someone) or one selecting other pods would let
// whoever may create an ElastiService steer another workload's traffic to
// the resolver, or scale a workload to zero on a Service that never sees
// its traffic. A Service or target that is missing or cannot be read is
// left to the sync's own waits.

// serviceWithoutSelector refuses a Service whose endpoints Kubernetes does
// not keep: no selector, or type ExternalName (validation.FrontableService).
func serviceWithoutSelector(f *facts) *notReady {
	if f.service == nil {
		return nil
	}
	if reason, msg := validation.FrontableService(f.service); reason != "" {
		return &notReady{reason, msg, awaitChange}
	}
	return nil
}

func serviceSelectsOtherPods(f *facts) *notReady {
	if f.service == nil || f.targetErr != nil {
		return nil
	}
	if term, ok := unmatchedTerm(f.service, f.target, f.podLabels); ok {
		// One term, not the whole selector, keeps the message short
		// however many labels there are.
		return &notReady{ReasonServiceSelectsOtherPods, fmt.Sprintf(
			"Service %q selects %s, which the pod template of %s %q does not have; an ElastiService needs a Service that selects the pods of its scale target",
			f.service.Name, term, f.target.Kind, f.target.Name), awaitChange}
	}
	return nil
}

// unmatchedTerm returns, in key order, the first term of svc's selector
// that the pods of the target ref, whose pod template has podLabels, do
// not match; ok is false when the selector selects them. Labels the workload's own
// controller adds to each pod are not in the template, and real Services
// select on them (a StatefulSet's pod-name for one replica, Argo Rollouts'
// template hash on its stable Service), so a selector term on one of them
// is accepted; every other term must match the template.
func unmatchedTerm(svc *corev1.Service, ref scaletarget.Ref, podLabels map[string]string) (term string, ok bool) {
	for _, k := range slices.Sorted(maps.Keys(svc.Spec.Selector)) {
		v := svc.Spec.Selector[k]
		if got, found := podLabels[k]; found && got == v || !found && addedToPods(ref, k, v) {
			continue
		}
		return k + "=" + v, true
	}
	return "", false
}

// addedToPods reports whether the controller of ref's kind puts label k
// on its pods, with a value that may be v.
func addedToPods(ref scaletarget.Ref, k, v string) bool {
	switch ref.Kind {
	case elastiv1alpha1.KindDeployment:
		return k == appsv1.DefaultDeploymentUniqueLabelKey
	case elastiv1alpha1.KindStatefulSet:
		switch k {
		case appsv1.StatefulSetPodNameLabel:
			return strings.HasPrefix(v, ref.Name+"-")
		case appsv1.ControllerRevisionHashLabelKey, appsv1.PodIndexLabel:
			return true
		}
	case elastiv1alpha1.KindRollout:
		return k == rolloutsPodTemplateHashLabel
	}
	return false
}
