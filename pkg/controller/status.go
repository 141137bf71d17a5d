package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

// statusCanWait reports whether other ElastiServices wait in the queue and
// es's status already holds the resolver ports it would be given: the
// resolver maps a port to its Service by that status, so new ports are
// never deferred.
func (w *statusWriter) statusCanWait(es *elastiv1alpha1.ElastiService, ports *portStatus) bool {
	if w.queue.Len() == 0 {
		return false
	}
	return equality.Semantic.DeepEqual(ports.assigned, es.Status.ResolverPorts)
}

// notReadyFollowUp says what brings a not-Ready ElastiService back.
type notReadyFollowUp bool

const (
	// retryWithBackoff requeues the key with backoff: the cause may pass
	// without an event we watch.
	retryWithBackoff notReadyFollowUp = true
	// awaitChange waits for a change to the ElastiService or a watched
	// object; retrying could not help.
	awaitChange notReadyFollowUp = false
)

// setNotReady records why the ElastiService cannot be reconciled.
func (w *statusWriter) setNotReady(ctx context.Context, es *elastiv1alpha1.ElastiService, ports *portStatus, mode, reason, message string, then notReadyFollowUp) error {
	if (mode != "" && es.Status.Mode != mode) || !conditionIs(es, metav1.ConditionFalse, reason) {
		w.recorder.Event(es, corev1.EventTypeWarning, reason, message)
	}
	if err := w.writeStatus(ctx, es, ports, mode, metav1.ConditionFalse, reason, message); err != nil {
		return err
	}
	if then == retryWithBackoff {
		return &errWaiting{reason: reason, message: message}
	}
	return nil
}

// writeStatus updates status through the subresource, only when something
// changed: mode, Ready, and with ports the resolver ports and their
// condition, all in one write. An empty mode leaves the mode as it is, nil
// ports leave the resolver ports as they are.
func (w *statusWriter) writeStatus(ctx context.Context, es *elastiv1alpha1.ElastiService, ports *portStatus, mode string, status metav1.ConditionStatus, reason, message string) error {
	next := es.Status.DeepCopy()
	if mode != "" {
		next.Mode = mode
	}
	next.ObservedGeneration = es.Generation
	if es.DeletionTimestamp == nil {
		w.observer.ObserveMode(es.Key(), next.Mode)
	}
	meta.SetStatusCondition(&next.Conditions, metav1.Condition{
		LastTransitionTime: metav1.NewTime(w.clock.Now()),
		Type:               elastiv1alpha1.ConditionReady,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: es.Generation,
	})
	if ports != nil {
		next.ResolverPorts = ports.assigned
		if ports.condition == nil {
			meta.RemoveStatusCondition(&next.Conditions, elastiv1alpha1.ConditionResolverPortsAssigned)
		} else {
			cond := *ports.condition
			cond.Type = elastiv1alpha1.ConditionResolverPortsAssigned
			cond.ObservedGeneration = es.Generation
			cond.LastTransitionTime = metav1.NewTime(w.clock.Now())
			meta.SetStatusCondition(&next.Conditions, cond)
		}
	}
	w.setGroupCondition(ctx, es, next)
	events := w.trackSleepAndWake(ctx, next)
	if equality.Semantic.DeepEqual(&es.Status, next) {
		return nil
	}
	now := metav1.NewTime(w.clock.Now())
	next.LastReconciledTime = &now
	updated := es.DeepCopy()
	updated.Status = *next
	if _, err := w.elastiClient.ElastiV1alpha1().ElastiServices(es.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{FieldManager: AgentName}); err != nil {
		return fmt.Errorf("update status: %w", err)
	}
	w.superseded.add(es.Key(), es.ResourceVersion)
	if mode != "" && es.Status.Mode != mode {
		w.recordModeSwitch(ctx, es, mode)
	}
	w.recordSleepAndWake(es, events)
	return nil
}

func (w *statusWriter) recordModeSwitch(ctx context.Context, es *elastiv1alpha1.ElastiService, mode string) {
	klog.FromContext(ctx).V(2).Info("Switched mode", "from", es.Status.Mode, "to", mode)
	w.observer.ModeSwitched(es.Key(), mode, w.clock.Now())
	if es.Status.Mode == "" {
		// A first mode is an adoption, not a switch: no event, so starting
		// on a large fleet does not write one event per ElastiService.
		return
	}
	if mode == elastiv1alpha1.ModeProxy {
		w.recorder.Eventf(es, corev1.EventTypeNormal, ReasonSwitchedToProxy,
			"Target has no ready pod: Service %q now routes to the resolver", es.Spec.Service)
	} else {
		w.recorder.Eventf(es, corev1.EventTypeNormal, ReasonSwitchedToServe,
			"Target has a ready pod: Service %q routes straight to it", es.Spec.Service)
	}
}

func conditionIs(es *elastiv1alpha1.ElastiService, status metav1.ConditionStatus, reason string) bool {
	return hasCondition(es, elastiv1alpha1.ConditionReady, status, reason)
}

func hasCondition(es *elastiv1alpha1.ElastiService, condType string, status metav1.ConditionStatus, reason string) bool {
	cond := meta.FindStatusCondition(es.Status.Conditions, condType)
	return cond != nil && cond.Status == status && cond.Reason == reason
}
