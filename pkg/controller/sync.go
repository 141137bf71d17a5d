package controller

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/names"
	"github.com/elasti-dev/elasti/pkg/outcome"
	"github.com/elasti-dev/elasti/pkg/scaletarget"
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

// syncOutcome classifies a sync's error for the metrics.
func syncOutcome(err error) outcome.Sync {
	var requeue workloop.RequeueAfter
	switch {
	case IsWaiting(err):
		return outcome.SyncWaiting
	case errors.As(err, &requeue):
		return outcome.SyncRequeued
	case err != nil:
		return outcome.SyncError
	}
	return outcome.SyncSuccess
}

// syncElastiService converges one ElastiService. It is idempotent and keeps
// no state between calls beyond the directory, which it rebuilds, so an
// operator killed mid-sync converges on restart.
func (c *Controller) syncElastiService(ctx context.Context, key types.NamespacedName) error {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "elastiService", klog.KRef(key.Namespace, key.Name))
	ctx = klog.NewContext(ctx, logger)
	start := c.clock.Now()
	defer func() { logger.V(4).Info("Finished syncing", "duration", c.clock.Since(start)) }()

	es, err := c.elastiServices.ElastiServices(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		c.superseded.forget(key)
		c.handoffs.end(key, nil)
		c.drains.forget(key)
		c.directory.ReleaseAll(key)
		c.releasePorts(ctx, key)
		c.observer.ForgetElastiService(key)
		c.replicas.Forget(key)
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
	// The not-Ready exits are checks on facts (readiness.go).
	f := &facts{es: es, target: scaletarget.RefFor(es)}
	if v := invalidSpec(f); v != nil {
		return c.setNotReady(ctx, es, nil, "", v.reason, v.message, v.then)
	}
	if v := c.overBudget(es); v != nil {
		return c.setNotReady(ctx, es, nil, "", v.reason, v.message, v.then)
	}
	// Before the claim too, and for the same reason: a Service that does
	// not route to the target's pods gets nothing (no claim, resolver
	// slice, private Service or scale), and one this ElastiService fronted
	// before keeps its slice, so it still reaches the resolver, until the
	// Service or target is fixed; their events bring the key back.
	f.service, f.serviceErr = c.services.Services(es.Namespace).Get(es.Spec.Service)
	if f.serviceErr == nil {
		state, err := c.scaler.Get(f.target)
		f.podLabels, f.targetErr = state.PodLabels, err
	}
	if v := selectorChecks.First(f); v != nil {
		// A poller waiting to scale the target down must not.
		c.handoffs.settle(es.Key(), errors.New(v.message))
		if err := c.leaveUnkeptService(ctx, es, f.service, v); err != nil {
			return err
		}
		return c.setNotReady(ctx, es, nil, "", v.reason, v.message, v.then)
	}
	esKey := es.Key()
	old := c.leavingServices(es)
	f.claimant, f.claimed = c.claimServices(es, old)
	if v := serviceClaimedByAnother(f); v != nil {
		c.releasePorts(ctx, esKey)
		return c.setNotReady(ctx, es, noPorts, "", v.reason, v.message, v.then)
	}
	leaving, err := c.leaveOldServices(ctx, es, old)
	if err != nil {
		return err
	}

	f.service, f.serviceErr = c.services.Services(es.Namespace).Get(es.Spec.Service)
	if v := serviceMissing(f); v != nil {
		ports, err := c.portsWithoutService(ctx, es, leaving)
		if err != nil {
			return err
		}
		return c.setNotReady(ctx, es, ports, "", v.reason, v.message, v.then)
	}
	if f.serviceErr != nil {
		return f.serviceErr
	}
	public := f.service
	if err := c.mirrorPrivateService(ctx, es, public); err != nil {
		return err
	}
	ports := c.assignPorts(ctx, es, public, leaving)
	if err := c.frontOldServices(ctx, es, leaving, ports); err != nil {
		return err
	}

	state, err := c.scaler.Get(f.target)
	f.targetErr = err
	if v := targetChecks.First(f); v != nil {
		return c.setNotReady(ctx, es, ports, "", v.reason, v.message, v.then)
	}
	if err != nil {
		return err
	}

	ctx = c.observeTarget(ctx, es, state.Replicas)
	// A group's next step is taken before routing and never holds it up:
	// a failed scale is returned after the routing, to be retried.
	ctx, groupErr := c.advanceGroup(ctx, es, state)

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
		err = c.serve(ctx, es, public, ports)
	} else {
		err = c.proxy(ctx, es, public, ports, state.Replicas, slice == nil, fenced, now)
	}
	return cmp.Or(err, groupErr)
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
		c.handoffs.end(es.Key(), nil)
	} else if len(endpoints) > 0 {
		c.handoffs.settle(es.Key(), nil)
	}
	if v := resolverUnavailable(&facts{es: es, resolverPods: len(endpoints),
		resolverNamespace: c.cfg.ResolverNamespace, resolverService: c.cfg.ResolverService}); v != nil {
		return c.setNotReady(ctx, es, ports, elastiv1alpha1.ModeProxy, v.reason, v.message, v.then)
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
		c.observer.ObserveMode(es.Key(), elastiv1alpha1.ModeProxy)
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
