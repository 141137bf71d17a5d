package idle

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/generated/clientset/versioned"
	"github.com/elasti-dev/elasti/pkg/scaletarget"
	"github.com/elasti-dev/elasti/pkg/triggers"
)

// maxConditionMessage bounds the condition's message: an error may quote
// Prometheus's answer, and status is read by every watcher.
const maxConditionMessage = 1024

// TriggersCondition is the TriggersEvaluated condition for one evaluation's
// outcome: False with the failure's bounded reason, or True.
func TriggersCondition(es *elastiv1alpha1.ElastiService, err error) metav1.Condition {
	c := metav1.Condition{
		Type:               elastiv1alpha1.ConditionTriggersEvaluated,
		Status:             metav1.ConditionTrue,
		Reason:             elastiv1alpha1.ReasonTriggersEvaluated,
		Message:            "The triggers were evaluated",
		ObservedGeneration: es.Generation,
	}
	if err != nil {
		c.Status = metav1.ConditionFalse
		c.Reason = string(triggers.ReasonOf(err))
		c.Message = "Not scaling to zero: " + err.Error()
		if len(c.Message) > maxConditionMessage {
			c.Message = c.Message[:maxConditionMessage-3] + "..."
		}
	}
	return c
}

// ConditionWriter records evaluations as the TriggersEvaluated condition
// (the operator's EvaluationReporter). It writes only when the condition's
// status, reason or generation changes, and a clean evaluation only clears
// a failure: a fleet whose triggers always work costs no status write per
// poll, and has no such condition at all.
type ConditionWriter struct {
	Client       versioned.Interface
	FieldManager string
	Clock        clock.PassiveClock
}

// Report writes the condition for err when it changed. A failed write
// (usually a conflict with the controller's own status write) is only
// logged: the next poll evaluates again and retries.
func (w ConditionWriter) Report(ctx context.Context, es *elastiv1alpha1.ElastiService, err error) {
	cond := TriggersCondition(es, err)
	old := meta.FindStatusCondition(es.Status.Conditions, cond.Type)
	if old == nil && err == nil {
		return
	}
	if old != nil && old.Status == cond.Status && old.Reason == cond.Reason && old.ObservedGeneration == cond.ObservedGeneration {
		return
	}
	now := time.Now()
	if w.Clock != nil {
		now = w.Clock.Now()
	}
	cond.LastTransitionTime = metav1.NewTime(now)
	updated := es.DeepCopy()
	meta.SetStatusCondition(&updated.Status.Conditions, cond)
	if _, uerr := w.Client.ElastiV1alpha1().ElastiServices(es.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{FieldManager: w.FieldManager}); uerr != nil {
		klog.FromContext(ctx).V(2).Info("Cannot record the triggers' condition; the next poll retries", "elastiService", klog.KObj(es), "err", uerr)
	}
}

// HPACondition is the HPAFound condition for fit; ok is false when es names
// no HPA (fit HPANone) and the condition must be absent.
func HPACondition(es *elastiv1alpha1.ElastiService, fit scaletarget.HPAFit) (c metav1.Condition, ok bool) {
	c = metav1.Condition{Type: elastiv1alpha1.ConditionHPAFound, Status: metav1.ConditionFalse, ObservedGeneration: es.Generation}
	name := ""
	if es.Spec.Autoscaler != nil {
		name = es.Spec.Autoscaler.Name
	}
	const plain = "; wakes scale to minTargetReplicas as without an HPA"
	switch fit {
	case scaletarget.HPANone:
		return c, false
	case scaletarget.HPAOwns:
		c.Status, c.Reason = metav1.ConditionTrue, elastiv1alpha1.ReasonHPAOwnsTarget
		c.Message = "HorizontalPodAutoscaler " + name + " scales the target: wakes stay within its minReplicas and maxReplicas, and above zero it decides the count"
	case scaletarget.HPANotFound:
		c.Reason = elastiv1alpha1.ReasonHPANotFound
		c.Message = "No HorizontalPodAutoscaler " + name + " in namespace " + es.Namespace + plain
	case scaletarget.HPAOtherTarget:
		c.Reason = elastiv1alpha1.ReasonHPAScalesAnotherTarget
		c.Message = "HorizontalPodAutoscaler " + name + " scales another workload than spec.scaleTargetRef" + plain
	default:
		c.Reason = elastiv1alpha1.ReasonHPAUnreadable
		c.Message = "HorizontalPodAutoscaler " + name + " cannot be read" + plain
	}
	return c, true
}

// ReportHPA writes the HPAFound condition for fit when it changed, and
// removes it once es names no HPA. Like Report, a failed write is only
// logged, and the next poll retries.
func (w ConditionWriter) ReportHPA(ctx context.Context, es *elastiv1alpha1.ElastiService, fit scaletarget.HPAFit) {
	cond, ok := HPACondition(es, fit)
	old := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionHPAFound)
	updated := es.DeepCopy()
	switch {
	case !ok && old == nil:
		return
	case !ok:
		meta.RemoveStatusCondition(&updated.Status.Conditions, elastiv1alpha1.ConditionHPAFound)
	case old != nil && old.Status == cond.Status && old.Reason == cond.Reason && old.ObservedGeneration == cond.ObservedGeneration:
		return
	default:
		now := time.Now()
		if w.Clock != nil {
			now = w.Clock.Now()
		}
		cond.LastTransitionTime = metav1.NewTime(now)
		meta.SetStatusCondition(&updated.Status.Conditions, cond)
	}
	if _, uerr := w.Client.ElastiV1alpha1().ElastiServices(es.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{FieldManager: w.FieldManager}); uerr != nil {
		klog.FromContext(ctx).V(2).Info("Cannot record the HPA condition; the next poll retries", "elastiService", klog.KObj(es), "err", uerr)
	}
}
