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
