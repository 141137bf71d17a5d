package scaletarget

import (
	"errors"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/runtime/schema"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

// How elasti and a HorizontalPodAutoscaler (spec.autoscaler.type hpa) share
// a target. These are facts of the HPA controller of Kubernetes v1.36
// (pkg/controller/podautoscaler), which the design follows:
//
//   - A target at zero that the HPA did not scale there itself (its
//     ScaledToZero condition is not True, which only the HPA sets, and
//     only with the HPAScaleToZero gate) is left alone: the HPA reports
//     ScalingActive=False, reason ScalingDisabled, and never scales it up,
//     whatever its minReplicas. So elasti's sleep needs nothing from the
//     HPA, and elasti never writes it.
//   - A target above zero is held in [minReplicas, maxReplicas] at every
//     HPA pass, with or without metrics; between them it follows its
//     metrics, and with none available it leaves the count as it is.
//   - With the HPAScaleToZero gate (alpha and off by default in v1.36) and
//     an Object or External metric, minReplicas may be 0: the HPA then
//     scales the target to zero itself when its metrics say so, and back
//     up from zero when they say so.
//
// So elasti owns only the step from zero (the wake) and the step to zero
// (the sleep), and the HPA everything above zero:
//
//   - A wake scales to minTargetReplicas raised to the HPA's minReplicas
//     and capped at its maxReplicas, the count the HPA would set at its
//     next pass anyway: the pods the HPA's floor promises start at once,
//     not a sync period later, and no pod starts that the HPA would stop.
//   - A target with at least one replica counts as up: elasti never raises
//     a target the HPA has set above zero (to minTargetReplicas, say, when
//     the HPA has it lower), which the HPA would undo at its next pass.
//   - An HPA that does not exist, cannot be read, or scales another
//     workload is no HPA of this target: elasti then wakes as without one.
//
// The HPA is read from an informer cache, in the ElastiService's own
// namespace only, so one tenant's HPA never shapes another's wake.

// HPAReader reads HorizontalPodAutoscalers, from a cache.
type HPAReader interface {
	HPA(namespace, name string) (*autoscalingv2.HorizontalPodAutoscaler, error)
}

// HPAFit is how the HPA named in spec.autoscaler relates to the target.
type HPAFit string

// HPAFit values.
const (
	// HPANone: spec.autoscaler names no HPA.
	HPANone HPAFit = ""
	// HPAOwns: the named HPA exists and scales this target.
	HPAOwns HPAFit = "Owns"
	// HPANotFound: no HPA of that name in the ElastiService's namespace.
	HPANotFound HPAFit = "NotFound"
	// HPAOtherTarget: the named HPA scales another workload.
	HPAOtherTarget HPAFit = "OtherTarget"
	// HPAUnreadable: the HPA could not be read (no cache of HPAs).
	HPAUnreadable HPAFit = "Unreadable"
)

// WakeGoal is what a wake of one target aims at.
type WakeGoal struct {
	// Replicas is the count a wake scales the target to.
	Replicas int32
	// UpAt is the count from which the target needs no wake.
	UpAt int32
	// HPA is how spec.autoscaler's HPA relates to the target.
	HPA HPAFit
}

// GoalFor is the wake goal of ref, an ElastiService's target, with
// minTargetReplicas minTarget and spec.autoscaler autoscaler, reading the
// HPA through r (a Scaler reads its cache). Without an HPA that owns the
// target, the goal is minTarget, as it always was.
func GoalFor(r HPAReader, ref Ref, minTarget int32, autoscaler *elastiv1alpha1.AutoscalerSpec) WakeGoal {
	plain := WakeGoal{Replicas: minTarget, UpAt: minTarget}
	if autoscaler == nil || autoscaler.Type != elastiv1alpha1.AutoscalerTypeHPA {
		return plain
	}
	hpa, err := r.HPA(ref.Namespace, autoscaler.Name)
	if err != nil {
		plain.HPA = HPAUnreadable
		if IsNotFound(err) {
			plain.HPA = HPANotFound
		}
		return plain
	}
	return goalWithHPA(ref, minTarget, hpa)
}

// goalWithHPA is GoalFor once the named HPA is read.
func goalWithHPA(ref Ref, minTarget int32, hpa *autoscalingv2.HorizontalPodAutoscaler) WakeGoal {
	if !HPAScales(hpa, ref) {
		return WakeGoal{Replicas: minTarget, UpAt: minTarget, HPA: HPAOtherTarget}
	}
	floor := int32(1) // the HPA's own default for an unset minReplicas
	if hpa.Spec.MinReplicas != nil {
		floor = *hpa.Spec.MinReplicas
	}
	replicas := max(minTarget, floor)
	if hpa.Spec.MaxReplicas >= 1 && replicas > hpa.Spec.MaxReplicas {
		replicas = hpa.Spec.MaxReplicas
	}
	return WakeGoal{Replicas: replicas, UpAt: 1, HPA: HPAOwns}
}

// HPAScales reports whether hpa scales ref: same namespace, name, kind and
// API group (a Deployment of apps, not of some CRD that reuses the kind).
func HPAScales(hpa *autoscalingv2.HorizontalPodAutoscaler, ref Ref) bool {
	if hpa.Namespace != ref.Namespace {
		return false
	}
	t := elastiv1alpha1.ScaleTargetRef{APIVersion: hpa.Spec.ScaleTargetRef.APIVersion, Kind: hpa.Spec.ScaleTargetRef.Kind, Name: hpa.Spec.ScaleTargetRef.Name}.Canonical()
	if t.Kind != ref.Kind || t.Name != ref.Name {
		return false
	}
	gv, err := schema.ParseGroupVersion(t.APIVersion)
	if err != nil {
		return false
	}
	return gv.Group == groupOf(ref.Kind)
}

func groupOf(kind string) string {
	if kind == elastiv1alpha1.KindRollout {
		return RolloutGVR.Group
	}
	return "apps"
}

// errHPAsNotWatched is HPA's answer for a Scaler made without an HPA cache.
var errHPAsNotWatched = errors.New("HorizontalPodAutoscalers are not watched")

// HPA reads a HorizontalPodAutoscaler from the cache; a missing one is a
// NotFound API error.
func (s *Scaler) HPA(namespace, name string) (*autoscalingv2.HorizontalPodAutoscaler, error) {
	if s.hpas == nil {
		return nil, errHPAsNotWatched
	}
	return s.hpas.HorizontalPodAutoscalers(namespace).Get(name)
}

// CacheHPA is what the operator's cache keeps of an HPA: identity, the
// target reference and the replica bounds, all GoalFor reads. Metrics,
// behavior and status (rewritten at every HPA pass) are dropped.
func CacheHPA(h *autoscalingv2.HorizontalPodAutoscaler) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: Identity(h.ObjectMeta),
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: h.Spec.ScaleTargetRef,
			MinReplicas:    h.Spec.MinReplicas,
			MaxReplicas:    h.Spec.MaxReplicas,
		},
	}
}
