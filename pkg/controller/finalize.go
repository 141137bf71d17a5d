package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/directory"
	"github.com/elasti-dev/elasti/pkg/names"
	"github.com/elasti-dev/elasti/pkg/scaletarget"
	"github.com/elasti-dev/elasti/pkg/workloop"
)

// finalize restores serving before letting the ElastiService go: a target at
// zero is scaled back up, and the resolver slice stays until the target has a
// ready pod (or DeletionGrace passes), so the public Service is never left
// with no endpoints at all.
func (c *Controller) finalize(ctx context.Context, es *elastiv1alpha1.ElastiService) error {
	if !slices.Contains(es.Finalizers, elastiv1alpha1.Finalizer) {
		return nil
	}
	if !c.claims.managesService(es) {
		return c.removeFinalizer(ctx, es)
	}
	deadline := es.DeletionTimestamp.Add(c.cfg.DeletionGrace)
	// Within the grace only: if something keeps the target at zero (KEDA,
	// say), the finalizer must still go eventually. Nor in a namespace
	// being deleted: no pod can be made there to wait for, and its
	// Services go with it.
	wait := c.clock.Now().Before(deadline) && c.front.terminating.wait(es.Namespace) == 0
	step, unserved, err := c.restoreServing(ctx, es, wait)
	switch {
	case err != nil:
		return err
	case step == restoreScaled:
		// The target's update event brings us back with a fresh cache.
		return nil
	case step == restoreWaiting:
		klog.FromContext(ctx).V(2).Info("Keeping the resolver slices until the target has a ready pod", "services", unserved, "deadline", deadline)
		if !conditionIs(es, metav1.ConditionFalse, ReasonWaitingForTarget) {
			msg := fmt.Sprintf("Being deleted: waiting up to %s for a ready pod before the resolver stops fronting Service %s",
				c.cfg.DeletionGrace, strings.Join(quoted(unserved), ", "))
			if err := c.status.writeStatus(ctx, es, nil, "", metav1.ConditionFalse, ReasonWaitingForTarget, msg); err != nil {
				return err
			}
			c.recorder.Event(es, corev1.EventTypeNormal, ReasonWaitingForTarget, msg)
		}
		return workloop.RequeueAfter(min(deadline.Sub(c.clock.Now()), 5*time.Second))
	}
	return c.removeFinalizer(ctx, es)
}

// restoreStep is how far one pass of restoreServing got.
type restoreStep int

const (
	// restoreScaled: the target was at zero and has just been scaled up.
	restoreScaled restoreStep = iota
	// restoreWaiting: the resolver still fronts a Service whose target has
	// no ready pod yet, so its slice stays.
	restoreWaiting
	// restoreDone: the target serves on its own and the resolver slices and
	// private Services generated for es are gone.
	restoreDone
)

// restoreServing is one pass of handing es's Services back to the target's
// own pods, make before break: scale a target at zero up to
// minTargetReplicas, hand it back to KEDA, wait for a ready pod, and only
// then remove the resolver slices and the private Service. Both ways an
// ElastiService lets go go through it: its deletion (finalize) and an
// uninstall (Release). With wait false (a deletion past its grace) it
// neither scales nor waits: whatever happens, the generated objects go.
func (c *Controller) restoreServing(ctx context.Context, es *elastiv1alpha1.ElastiService, wait bool) (step restoreStep, unserved []string, err error) {
	logger := klog.FromContext(ctx)
	ref := scaletarget.RefFor(es)
	state, err := c.scaler.Get(ref)
	targetPresent := err == nil
	if err != nil && !scaletarget.IsNotFound(err) && !errors.Is(err, scaletarget.ErrUnsupportedKind) {
		return 0, nil, err
	}
	if wait {
		// The group first, so the target wakes to what it needs.
		if err := c.groups.restoreDependencies(ctx, es); err != nil {
			return 0, nil, err
		}
	}
	if targetPresent && state.Replicas == 0 && wait {
		replicas := scaletarget.GoalFor(c.scaler, ref, directory.EntryFor(es).MinTargetReplicas, es.Spec.Autoscaler).Replicas
		err := scaletarget.Wake(ctx, c.scaler, ref, replicas, es.Spec.Autoscaler)
		if !scaletarget.Woken(err) {
			return 0, nil, err
		}
		if err != nil {
			// Retried below, on the next pass.
			logger.Error(err, "Restored target; KEDA stays paused", "target", ref.String())
		}
		logger.V(2).Info("Restored target", "target", ref.String(), "replicas", replicas)
		c.recorder.Eventf(es, corev1.EventTypeNormal, ReasonTargetRestored,
			"Scaled %s %q to %d replicas before elasti stops fronting Service %q", ref.Kind, ref.Name, replicas, es.Spec.Service)
		return restoreScaled, nil, nil
	}

	// The idle poller may have paused KEDA at zero; a Service elasti lets
	// go of must be handed back to it.
	if err := scaletarget.ResumeKEDA(ctx, c.scaler, es.Namespace, es.Spec.Autoscaler); err != nil {
		return 0, nil, err
	}

	fronted := append([]string{es.Spec.Service}, c.oldFrontedServices(es)...)
	if unserved := c.front.frontedWithoutPods(es.Namespace, fronted); targetPresent && len(unserved) > 0 && wait {
		return restoreWaiting, unserved, nil
	}
	if err := c.front.deleteResolverSlice(ctx, es.Namespace, es.Spec.Service); err != nil {
		return 0, nil, err
	}
	if err := c.deleteOwned(ctx, es, "", names.ResolverSlice(es.Spec.Service)); err != nil { // the resolver slice was handled above
		return 0, nil, err
	}
	return restoreDone, nil, nil
}

func (c *Controller) removeFinalizer(ctx context.Context, es *elastiv1alpha1.ElastiService) error {
	// Release the Service before the object can vanish, so a waiting
	// ElastiService for the same Service can claim it as soon as it hears of
	// the deletion. If the patch fails, the queue retries the finalizer.
	c.directory.ReleaseAll(es.Key())
	c.front.releasePorts(ctx, es.Key())
	rest := slices.DeleteFunc(slices.Clone(es.Finalizers), func(f string) bool { return f == elastiv1alpha1.Finalizer })
	if _, err := c.patchFinalizers(ctx, es, rest); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	klog.FromContext(ctx).V(2).Info("Finalized")
	return nil
}

// patchFinalizers writes the finalizer list with the object's
// resourceVersion, so a concurrent change conflicts instead of being lost.
// A merge patch never sends the spec back, so server-side defaults stay.
func (c *Controller) patchFinalizers(ctx context.Context, es *elastiv1alpha1.ElastiService, finalizers []string) (*elastiv1alpha1.ElastiService, error) {
	if finalizers == nil {
		finalizers = []string{}
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"finalizers": finalizers, "resourceVersion": es.ResourceVersion},
	})
	if err != nil {
		return nil, err
	}
	updated, err := c.elastiClient.ElastiV1alpha1().ElastiServices(es.Namespace).Patch(ctx, es.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: AgentName})
	if err != nil {
		return nil, fmt.Errorf("patch finalizers: %w", err)
	}
	c.superseded.add(es.Key(), es.ResourceVersion)
	return updated, nil
}
