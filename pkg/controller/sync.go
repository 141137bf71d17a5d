package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/directory"
	"github.com/elasti-dev/elasti/pkg/names"
	"github.com/elasti-dev/elasti/pkg/scaletarget"
	"github.com/elasti-dev/elasti/pkg/validation"
	"github.com/elasti-dev/elasti/pkg/workloop"
)

// errWaiting marks a sync that cannot finish until something else changes
// (a missing Service, target or resolver). It backs off with the queue's
// rate limiter; the watch on the missing object usually heals it sooner.
type errWaiting struct{ reason, message string }

func (e *errWaiting) Error() string { return e.reason + ": " + e.message }

// IsWaiting reports whether err only says the ElastiService is waiting for
// something outside the operator (a Service, a target, a resolver pod): its
// condition already says so, and it is no failure worth reporting.
func IsWaiting(err error) bool {
	var w *errWaiting
	return errors.As(err, &w)
}

// syncElastiService converges one ElastiService. It is idempotent and keeps
// no state between calls beyond the directory, which it rebuilds, so an
// operator killed mid-sync converges on restart.
func (c *Controller) syncElastiService(ctx context.Context, key cache.ObjectName) error {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "elastiService", klog.KRef(key.Namespace, key.Name))
	ctx = klog.NewContext(ctx, logger)
	start := c.clock.Now()
	defer func() { logger.V(4).Info("Finished syncing", "duration", c.clock.Since(start)) }()

	es, err := c.elastiServices.ElastiServices(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		gone := types.NamespacedName{Namespace: key.Namespace, Name: key.Name}
		c.superseded.forget(key)
		c.handoffs.end(key, nil)
		c.drains.forget(key)
		c.directory.ReleaseAll(gone)
		c.releasePorts(ctx, gone)
		c.observer.ForgetElastiService(gone)
		c.replicas.Forget(gone)
		return nil
	}
	if err != nil {
		return err
	}
	if c.superseded.stale(key, es.ResourceVersion) {
		logger.V(4).Info("Cache is behind our own write; waiting for its event", "resourceVersion", es.ResourceVersion)
		return nil
	}
	if es.DeletionTimestamp != nil {
		return c.finalize(ctx, es)
	}
	if !slices.Contains(es.Finalizers, elastiv1alpha1.Finalizer) {
		if es, err = c.patchFinalizers(ctx, es, append(slices.Clone(es.Finalizers), elastiv1alpha1.Finalizer)); err != nil {
			return err
		}
	}
	return c.reconcile(ctx, es)
}

func (c *Controller) reconcile(ctx context.Context, es *elastiv1alpha1.ElastiService) error {
	// First, so nothing is written for an invalid spec and the directory
	// keeps the last valid claim: a Service left in proxy mode still wakes.
	if errs := validation.ValidateElastiService(es); len(errs) > 0 {
		return c.setNotReady(ctx, es, nil, "", ReasonInvalidSpec, validation.Message(errs), awaitChange)
	}
	// Before the claim too, and for the same reason: a Service that does
	// not route to the target's pods gets nothing (no claim, resolver
	// slice, private Service or scale), and one this ElastiService fronted
	// before keeps its slice, so it still reaches the resolver, until the
	// Service or target is fixed; their events bring the key back.
	if reason, msg := c.refuseSelector(es); reason != "" {
		// A poller waiting to scale the target down must not.
		c.handoffs.settle(cache.MetaObjectToName(es), errors.New(msg))
		return c.setNotReady(ctx, es, nil, "", reason, msg, awaitChange)
	}
	esKey := types.NamespacedName{Namespace: es.Namespace, Name: es.Name}
	old := c.leavingServices(es)
	holder, ok := c.claimServices(es, old)
	if !ok {
		// Only one ElastiService may drive a Service's endpoints. This one
		// waits until the holder lets go; its deletion re-enqueues us.
		c.releasePorts(ctx, esKey)
		return c.setNotReady(ctx, es, noPorts, "", ReasonServiceConflict,
			fmt.Sprintf("Service %q is already managed by ElastiService %q", es.Spec.Service, holder.Name), awaitChange)
	}
	leaving, err := c.leaveOldServices(ctx, es, old)
	if err != nil {
		return err
	}

	public, err := c.services.Services(es.Namespace).Get(es.Spec.Service)
	if apierrors.IsNotFound(err) {
		ports, err := c.portsWithoutService(ctx, es, leaving)
		if err != nil {
			return err
		}
		return c.setNotReady(ctx, es, ports, "", ReasonServiceNotFound,
			fmt.Sprintf("Service %q does not exist in namespace %q", es.Spec.Service, es.Namespace), retryWithBackoff)
	}
	if err != nil {
		return err
	}
	if err := c.mirrorPrivateService(ctx, es, public); err != nil {
		return err
	}
	ports := c.assignPorts(ctx, es, public, leaving)
	if err := c.frontOldServices(ctx, es, leaving, ports); err != nil {
		return err
	}

	ref := scaletarget.RefFor(es)
	state, err := c.scaler.Get(ref)
	if err != nil {
		switch {
		case errors.Is(err, scaletarget.ErrUnsupportedKind):
			return c.setNotReady(ctx, es, ports, "", ReasonUnsupportedTarget,
				fmt.Sprintf("scale target kind %q is not supported; use Deployment, StatefulSet or Rollout", es.Spec.ScaleTargetRef.Kind), awaitChange)
		case scaletarget.IsNotFound(err):
			// Without a target, switching modes would only strand traffic;
			// keep routing as it is until the target exists.
			msg := fmt.Sprintf("scale target %s %q does not exist", ref.Kind, ref.Name)
			if errors.Is(err, scaletarget.ErrRolloutsUnavailable) {
				msg = err.Error()
			}
			return c.setNotReady(ctx, es, ports, "", ReasonTargetNotFound, msg, retryWithBackoff)
		default:
			return err
		}
	}

	// Serve needs a pod that can take traffic now. Proxy starts as soon as
	// the target is scaled to zero, before the cluster has removed the
	// terminating pods' endpoints, so the resolver is in front before the
	// Service's last endpoint goes.
	now := c.clock.Now()
	slice, _ := c.slices.EndpointSlices(es.Namespace).Get(names.ResolverSlice(es.Spec.Service))
	fenced := fenceOf(slice, now)
	serving, err := c.canServe(ctx, es, es.Spec.Service, state.Replicas, slice, fenced)
	if err != nil {
		return err
	}
	if serving {
		return c.serve(ctx, es, public, ports)
	}

	return c.proxy(ctx, es, public, ports, state.Replicas, slice == nil, fenced, now)
}

// proxy puts the resolver in front of the Service: the target is at zero,
// or none of its pods serves yet (apart from fenced ones). fronting says
// that no resolver slice existed, so this sync is the one that fronts.
func (c *Controller) proxy(ctx context.Context, es *elastiv1alpha1.ElastiService, public *corev1.Service, ports *portStatus,
	replicas int32, fronting bool, fenced fence, now time.Time) error {
	var refence *fence // nil keeps the slice's fence as it is
	if replicas == 0 {
		// Whatever serves now is going away, however ready it looks.
		if more := fenced.with(c.servingKeys(es.Namespace, es.Spec.Service), now); len(more.keys) > len(fenced.keys) {
			refence, fenced = &more, more
		}
	}
	endpoints, perPort := c.resolverEndpoints()
	if err := c.ensureResolverSlice(ctx, es, public, endpoints, perPortRoutes(es, ports, public.Name, perPort), refence); err != nil {
		return err
	}
	// After the slice, so a slow Service create never keeps the resolver
	// away. Our resolver never needs it; KubeElasti's holds a request until
	// it exists.
	c.requestPrivateService(es)
	if replicas == 0 {
		// The scale-down, ours or anyone's, is done.
		c.handoffs.end(cache.MetaObjectToName(es), nil)
	} else if len(endpoints) > 0 {
		c.handoffs.settle(cache.MetaObjectToName(es), nil)
	}
	if len(endpoints) == 0 {
		return c.setNotReady(ctx, es, ports, elastiv1alpha1.ModeProxy, ReasonResolverUnavailable,
			fmt.Sprintf("no ready pod behind resolver Service %s/%s; requests to %q cannot be held until one is ready",
				c.cfg.ResolverNamespace, c.cfg.ResolverService, es.Spec.Service), retryWithBackoff)
	}
	if fronting && c.statusCanWait(es, ports) {
		// Traffic needed the slice, not the status. When another tool scales
		// many targets to zero at once, each Service's pods are on their way
		// out, and a status write here would halve how fast the rest get
		// their resolver: write it on a later pass, behind them. The new
		// slice's own event queues the key again once the cache has it;
		// the delay only guards against missing that. Either way the key
		// waits its turn, so under a large backlog the status can say
		// serve for minutes after traffic went to the resolver.
		c.observer.ObserveMode(types.NamespacedName{Namespace: es.Namespace, Name: es.Name}, elastiv1alpha1.ModeProxy)
		return workloop.RequeueAfter(statusFollowUp)
	}
	if err := c.writeStatus(ctx, es, ports, elastiv1alpha1.ModeProxy, metav1.ConditionTrue, ReasonReconciled,
		"The target has no ready pod; traffic goes to the resolver, which wakes the target on the first request"); err != nil {
		return err
	}
	if left := fenced.remaining(now); replicas > 0 && left > 0 {
		// Perhaps only fenced pods look ready: look again when the fence
		// lapses, in case they were never going away.
		return workloop.RequeueAfter(left)
	}
	return nil
}

// serve lets the target's ready pods take the Service's traffic alone,
// unless a scale-down is under way: then the resolver stays in front too.
func (c *Controller) serve(ctx context.Context, es *elastiv1alpha1.ElastiService, public *corev1.Service, ports *portStatus) error {
	handingOff, err := c.holdForHandoff(ctx, es, func() (frontResult, error) {
		endpoints, perPort := c.resolverEndpoints()
		if len(endpoints) == 0 {
			return frontNoResolver, nil
		}
		// Asked for here, not only in proxy, so it is on its way by the time
		// the scale-down lands. Only KubeElasti's resolver, which a pod
		// without per-port routing is, dials the private Service; ours
		// reads the public Service's own slices, so it needs no wait.
		published := c.requestPrivateService(es) && c.privateServicePublished(es)
		if !published && !perPort {
			return frontPending, nil
		}
		return frontDone, c.ensureResolverSlice(ctx, es, public, endpoints, perPortRoutes(es, ports, public.Name, perPort), nil)
	})
	if !handingOff {
		if err := c.deleteResolverSlice(ctx, es.Namespace, es.Spec.Service); err != nil {
			return err
		}
	}
	if err := c.writeStatus(ctx, es, ports, elastiv1alpha1.ModeServe, metav1.ConditionTrue, ReasonReconciled,
		"The target has a ready pod; traffic goes straight to it"); err != nil {
		return err
	}
	// The handoff's timeout, or its failure to front.
	return err
}

// statusFollowUp is when a sync that fronted without writing the status
// queues its key again, at the latest.
const statusFollowUp = time.Second

// statusCanWait reports whether other ElastiServices wait in the queue and
// es's status already holds the resolver ports it would be given: the
// resolver maps a port to its Service by that status, so new ports are
// never deferred.
func (c *Controller) statusCanWait(es *elastiv1alpha1.ElastiService, ports *portStatus) bool {
	if c.backlog() == 0 {
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
func (c *Controller) setNotReady(ctx context.Context, es *elastiv1alpha1.ElastiService, ports *portStatus, mode, reason, message string, then notReadyFollowUp) error {
	if (mode != "" && es.Status.Mode != mode) || !conditionIs(es, metav1.ConditionFalse, reason) {
		c.recorder.Event(es, corev1.EventTypeWarning, reason, message)
	}
	if err := c.writeStatus(ctx, es, ports, mode, metav1.ConditionFalse, reason, message); err != nil {
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
func (c *Controller) writeStatus(ctx context.Context, es *elastiv1alpha1.ElastiService, ports *portStatus, mode string, status metav1.ConditionStatus, reason, message string) error {
	next := es.Status.DeepCopy()
	if mode != "" {
		next.Mode = mode
	}
	next.ObservedGeneration = es.Generation
	if es.DeletionTimestamp == nil {
		c.observer.ObserveMode(types.NamespacedName{Namespace: es.Namespace, Name: es.Name}, next.Mode)
	}
	meta.SetStatusCondition(&next.Conditions, metav1.Condition{
		LastTransitionTime: metav1.NewTime(c.clock.Now()),
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
			cond.LastTransitionTime = metav1.NewTime(c.clock.Now())
			meta.SetStatusCondition(&next.Conditions, cond)
		}
	}
	if equality.Semantic.DeepEqual(&es.Status, next) {
		return nil
	}
	now := metav1.NewTime(c.clock.Now())
	next.LastReconciledTime = &now
	updated := es.DeepCopy()
	updated.Status = *next
	if _, err := c.elastiClient.ElastiV1alpha1().ElastiServices(es.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{FieldManager: AgentName}); err != nil {
		return fmt.Errorf("update status: %w", err)
	}
	c.superseded.add(cache.MetaObjectToName(es), es.ResourceVersion)
	if mode != "" && es.Status.Mode != mode {
		c.recordModeSwitch(ctx, es, mode)
	}
	return nil
}

func (c *Controller) recordModeSwitch(ctx context.Context, es *elastiv1alpha1.ElastiService, mode string) {
	klog.FromContext(ctx).V(2).Info("Switched mode", "from", es.Status.Mode, "to", mode)
	c.observer.ModeSwitched(types.NamespacedName{Namespace: es.Namespace, Name: es.Name}, mode, c.clock.Now())
	if es.Status.Mode == "" {
		// A first mode is an adoption, not a switch: no event, so starting
		// on a large fleet does not write one event per ElastiService.
		return
	}
	if mode == elastiv1alpha1.ModeProxy {
		c.recorder.Eventf(es, corev1.EventTypeNormal, ReasonSwitchedToProxy,
			"Target has no ready pod: Service %q now routes to the resolver", es.Spec.Service)
	} else {
		c.recorder.Eventf(es, corev1.EventTypeNormal, ReasonSwitchedToServe,
			"Target has a ready pod: Service %q routes straight to it", es.Spec.Service)
	}
}

func conditionIs(es *elastiv1alpha1.ElastiService, status metav1.ConditionStatus, reason string) bool {
	return hasCondition(es, elastiv1alpha1.ConditionReady, status, reason)
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
	c.superseded.add(cache.MetaObjectToName(es), es.ResourceVersion)
	return updated, nil
}

// frontedWithoutPods names the Services, es's own and the old ones of a
// move, that only the resolver serves: each has a resolver slice and no
// ready endpoint of its own. Removing the slice would leave it dark.
func (c *Controller) frontedWithoutPods(es *elastiv1alpha1.ElastiService) []string {
	var out []string
	for _, name := range append([]string{es.Spec.Service}, c.oldFrontedServices(es)...) {
		if !c.resolverSliceExists(es.Namespace, name) {
			continue
		}
		if _, err := c.services.Services(es.Namespace).Get(name); err != nil {
			continue
		}
		if !c.hasReadyEndpoints(es.Namespace, name, fence{}) {
			out = append(out, name)
		}
	}
	return out
}

func quoted(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = strconv.Quote(n)
	}
	return out
}

// finalize restores serving before letting the ElastiService go: a target at
// zero is scaled back up, and the resolver slice stays until the target has a
// ready pod (or DeletionGrace passes), so the public Service is never left
// with no endpoints at all.
func (c *Controller) finalize(ctx context.Context, es *elastiv1alpha1.ElastiService) error {
	if !slices.Contains(es.Finalizers, elastiv1alpha1.Finalizer) {
		return nil
	}
	logger := klog.FromContext(ctx)
	if !c.managesService(es) {
		return c.removeFinalizer(ctx, es)
	}
	ref := scaletarget.RefFor(es)
	state, err := c.scaler.Get(ref)
	targetPresent := err == nil
	if err != nil && !scaletarget.IsNotFound(err) && !errors.Is(err, scaletarget.ErrUnsupportedKind) {
		return err
	}
	deadline := es.DeletionTimestamp.Add(c.cfg.DeletionGrace)
	withinGrace := c.clock.Now().Before(deadline)
	// Within the grace only: if something keeps the target at zero (KEDA,
	// say), the finalizer must still go eventually.
	if targetPresent && state.Replicas == 0 && withinGrace {
		replicas := directory.EntryFor(es).MinTargetReplicas
		err := scaletarget.Wake(ctx, c.scaler, ref, replicas, es.Spec.Autoscaler)
		if !scaletarget.Woken(err) {
			return err
		}
		if err != nil {
			// Retried below, on the pass the target's update event brings.
			logger.Error(err, "Restored target before deletion; KEDA stays paused", "target", ref.String())
		}
		logger.V(2).Info("Restored target before deletion", "target", ref.String(), "replicas", replicas)
		c.recorder.Eventf(es, corev1.EventTypeNormal, ReasonTargetRestored,
			"Scaled %s %q to %d replicas before removing the ElastiService", ref.Kind, ref.Name, replicas)
		// The target's update event brings us back with a fresh cache.
		return nil
	}

	// The idle poller may have paused KEDA at zero; an ElastiService that
	// goes away must hand the target back to it.
	if err := scaletarget.ResumeKEDA(ctx, c.scaler, es.Namespace, es.Spec.Autoscaler); err != nil {
		return err
	}

	if unserved := c.frontedWithoutPods(es); targetPresent && len(unserved) > 0 && withinGrace {
		logger.V(2).Info("Keeping the resolver slices until the target has a ready pod", "services", unserved, "deadline", deadline)
		if !conditionIs(es, metav1.ConditionFalse, ReasonWaitingForTarget) {
			msg := fmt.Sprintf("Being deleted: waiting up to %s for a ready pod before the resolver stops fronting Service %s",
				c.cfg.DeletionGrace, strings.Join(quoted(unserved), ", "))
			if err := c.writeStatus(ctx, es, nil, "", metav1.ConditionFalse, ReasonWaitingForTarget, msg); err != nil {
				return err
			}
			c.recorder.Event(es, corev1.EventTypeNormal, ReasonWaitingForTarget, msg)
		}
		return workloop.RequeueAfter(min(deadline.Sub(c.clock.Now()), 5*time.Second))
	}
	if err := c.deleteResolverSlice(ctx, es.Namespace, es.Spec.Service); err != nil {
		return err
	}
	if err := c.deleteOwned(ctx, es, "", names.ResolverSlice(es.Spec.Service)); err != nil { // the resolver slice was handled above
		return err
	}
	return c.removeFinalizer(ctx, es)
}

func (c *Controller) removeFinalizer(ctx context.Context, es *elastiv1alpha1.ElastiService) error {
	// Release the Service before the object can vanish, so a waiting
	// ElastiService for the same Service can claim it as soon as it hears of
	// the deletion. If the patch fails, the queue retries the finalizer.
	c.directory.ReleaseAll(types.NamespacedName{Namespace: es.Namespace, Name: es.Name})
	c.releasePorts(ctx, owner(es))
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

// claim makes es hold its Service in the directory unless another live
// ElastiService should. Which one holds a contested Service is decided the
// same way on every replica and after every restart (see shouldHold), so a
// failover never hands the Service to the other claimant.
func (c *Controller) claim(es *elastiv1alpha1.ElastiService) (holder types.NamespacedName, ok bool) {
	svcKey := types.NamespacedName{Namespace: es.Namespace, Name: es.Spec.Service}
	entry := directory.EntryFor(es)
	if holder, ok = c.directory.Claim(svcKey, entry); ok {
		return holder, true
	}
	other, err := c.elastiServices.ElastiServices(holder.Namespace).Get(holder.Name)
	switch {
	case apierrors.IsNotFound(err) || (err == nil && other.Spec.Service != es.Spec.Service):
		// The holder was deleted or now names another Service, and its own
		// sync has not released this one yet: events for the two keys may be
		// handled in any order. Only this Service is released, so the
		// holder's new claim stands.
	case err == nil && c.shouldHold(es, other):
		// Tell the displaced holder, so it reports the conflict.
		c.enqueue(cache.ObjectName{Namespace: holder.Namespace, Name: holder.Name})
	default:
		return holder, false
	}
	c.directory.Release(svcKey, holder)
	return c.directory.Claim(svcKey, entry)
}

// shouldHold reports whether a rather than b should drive a Service both
// name: the one controlling the objects already generated for it, else the
// older, else the first by name.
func (c *Controller) shouldHold(a, b *elastiv1alpha1.ElastiService) bool {
	if ca, cb := c.controlsGenerated(a), c.controlsGenerated(b); ca != cb {
		return ca
	}
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

// controlsGenerated reports whether es is the controller of the private
// Service or resolver slice generated for its Service.
func (c *Controller) controlsGenerated(es *elastiv1alpha1.ElastiService) bool {
	if svc, err := c.services.Services(es.Namespace).Get(names.PrivateService(es.Spec.Service)); err == nil && metav1.IsControlledBy(svc, es) {
		return true
	}
	slice, err := c.slices.EndpointSlices(es.Namespace).Get(names.ResolverSlice(es.Spec.Service))
	return err == nil && metav1.IsControlledBy(slice, es)
}

// PrimeDirectory claims every ElastiService's Service from the cache, so a
// new leader can answer scale requests before its workers reach each one.
func (c *Controller) PrimeDirectory(ctx context.Context) {
	all, err := c.elastiServices.List(labels.Everything())
	if err != nil {
		klog.FromContext(ctx).Error(err, "Cannot list ElastiServices to prime the directory")
		return
	}
	for _, es := range all {
		if es.DeletionTimestamp == nil && es.Spec.Service != "" {
			c.claim(es)
		}
	}
	klog.FromContext(ctx).V(2).Info("Directory primed", "services", c.directory.Len())
}

// managesService reports whether es may change its Service's routing. An
// ElastiService that lost a ServiceConflict never did, so its deletion must
// not wake the holder's target or remove the holder's resolver slice.
func (c *Controller) managesService(es *elastiv1alpha1.ElastiService) bool {
	me := types.NamespacedName{Namespace: es.Namespace, Name: es.Name}
	if entry, ok := c.directory.Lookup(types.NamespacedName{Namespace: es.Namespace, Name: es.Spec.Service}); ok {
		return entry.ElastiService == me
	}
	// Nobody holds it in memory (e.g. just after a restart): the resolver
	// slice's owner is the one in charge.
	slice, err := c.slices.EndpointSlices(es.Namespace).Get(names.ResolverSlice(es.Spec.Service))
	return err != nil || len(slice.OwnerReferences) == 0 || hasOwnerRef(slice.OwnerReferences, es)
}

// Manages reports whether the controller drives es's Service now: es holds
// it in the directory and is Ready at its current generation. Only then is
// there a resolver to put in front of the Service and a wake path back, so
// the idle poller scales no other ElastiService's target.
func (c *Controller) Manages(es *elastiv1alpha1.ElastiService) bool {
	entry, ok := c.directory.Lookup(types.NamespacedName{Namespace: es.Namespace, Name: es.Spec.Service})
	ready := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionReady)
	return ok && entry.ElastiService == types.NamespacedName{Namespace: es.Namespace, Name: es.Name} &&
		ready != nil && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == es.Generation
}
