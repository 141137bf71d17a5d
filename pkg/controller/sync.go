package controller

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"time"

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
		c.wakes.forget(key)
		c.directory.ReleaseAll(key)
		c.front.releasePorts(ctx, key)
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
	if wait := c.front.terminating.wait(key.Namespace); wait > 0 {
		logger.V(4).Info("Namespace is being deleted; not fronting its Services", "retryIn", wait)
		return workloop.RequeueAfter(wait)
	}
	if !slices.Contains(es.Finalizers, elastiv1alpha1.Finalizer) {
		if es, err = c.patchFinalizers(ctx, es, append(slices.Clone(es.Finalizers), elastiv1alpha1.Finalizer)); err != nil {
			return err
		}
	}
	err = c.reconcile(ctx, es)
	if c.front.terminating.refused(key.Namespace, err) {
		logger.V(2).Info("Namespace is being deleted; its creates are refused, so its Services are left as they are", "retryIn", terminatingMemory)
		return workloop.RequeueAfter(terminatingMemory)
	}
	return err
}

// reconcile converges es in three steps, as kube-controller-manager's
// controllers do: gather every fact from the caches once, decide on them
// with pure functions (plan.go), then apply the plan, whose outcome goes
// to status in one write.
func (c *Controller) reconcile(ctx context.Context, es *elastiv1alpha1.ElastiService) error {
	f := c.gather(es)
	p := planAdmission(f)
	if p.stage == stageRoute {
		// The claim is the one fact that only acting gives: asking the
		// directory is claiming. Nothing is claimed for a spec or Service
		// refused above, so the last valid claim stands.
		f.claimant, f.claimed = c.claimServices(es, f.old)
		p = plan(f)
	}
	r, err := c.apply(ctx, f, p)
	if err != nil {
		return err
	}
	return c.status.record(ctx, es, r)
}

// gather reads every fact reconcile decides on, from the caches only.
func (c *Controller) gather(es *elastiv1alpha1.ElastiService) *facts {
	f := &facts{es: es, target: scaletarget.RefFor(es), now: c.clock.Now(),
		resolverNamespace: c.cfg.ResolverNamespace, resolverService: c.cfg.ResolverService}
	budget := c.directory.Budget()
	f.overBudget, f.budgetLimits = !budget.Admitted(es.Key()), budget.Limits()
	f.service, f.serviceErr = c.services.Services(es.Namespace).Get(es.Spec.Service)
	f.state, f.targetErr = c.scaler.Get(f.target)
	f.podLabels = f.state.PodLabels
	f.old = c.leavingServices(es)
	f.slice, _ = c.slices.EndpointSlices(es.Namespace).Get(names.ResolverSlice(es.Spec.Service))
	f.fenced = fenceOf(f.slice, f.now)
	f.resolverEndpoints, f.perPort = c.front.resolverEndpoints()
	f.resolverPods = len(f.resolverEndpoints)
	return f
}

// apply takes the steps of p in order, up to its stage, and returns what
// status should say; an error ends the sync before any status write.
func (c *Controller) apply(ctx context.Context, f *facts, p syncPlan) (syncResult, error) {
	es := f.es
	switch {
	case p.settleHandoff:
		// A poller waiting to scale the target down must not.
		c.handoffs.settle(es.Key(), errors.New(p.stop.message))
		if err := c.front.leaveUnkeptService(ctx, es, f.service, f.slice != nil, p.stop); err != nil {
			return syncResult{}, err
		}
	case p.stage == stageClaim:
		c.front.releasePorts(ctx, es.Key())
	}
	if p.stage <= stageClaim {
		return syncResult{ports: p.ports(), notReady: p.stop}, nil
	}
	leaving, err := c.leaveOldServices(ctx, f, f.old)
	if err != nil {
		return syncResult{}, err
	}
	if p.stage == stageLeave {
		if p.stop == nil {
			return syncResult{}, p.err
		}
		ports, err := c.portsWithoutService(ctx, es, leaving)
		return syncResult{ports: ports, notReady: p.stop}, err
	}
	if err := c.front.mirrorPrivateService(ctx, es, f.service); err != nil {
		return syncResult{}, err
	}
	ports := c.front.assignPorts(ctx, es, f.service, leaving)
	if err := c.frontOldServices(ctx, es, leaving, ports); err != nil {
		return syncResult{}, err
	}
	if p.stage == stageFront {
		return syncResult{ports: ports, notReady: p.stop}, p.err
	}
	ctx = observeTarget(ctx, c.replicas, es, f.state.Replicas)
	// A group's next step is taken before routing and never holds it up:
	// a failed scale is returned after the routing, to be retried.
	ctx, groupErr := c.groups.advanceGroup(ctx, es, f.state)
	// Serve needs a pod that can take traffic now. Proxy starts as soon as
	// the target is scaled to zero, before the cluster has removed the
	// terminating pods' endpoints, so the resolver is in front before the
	// Service's last endpoint goes.
	serving, pod, err := c.canServe(ctx, es, es.Spec.Service, f.state.Replicas, f.slice, f.fenced)
	if err != nil {
		return syncResult{}, err
	}
	ctx = withServingPod(ctx, pod)
	route := c.proxy
	if serving {
		route = c.serve
	}
	r, err := route(ctx, f, ports)
	r.ctx, r.groupErr = ctx, groupErr
	return r, err
}

// proxy puts the resolver in front of the Service: the target is at zero,
// or none of its pods serves yet (apart from fenced ones).
func (c *Controller) proxy(ctx context.Context, f *facts, ports *portStatus) (syncResult, error) {
	es, fenced := f.es, f.fenced
	var refence *fence // nil keeps the slice's fence as it is
	if f.state.Replicas == 0 {
		// Whatever serves now is going away, however ready it looks.
		if more := fenced.with(c.front.servingKeys(es.Namespace, es.Spec.Service), f.now); len(more.keys) > len(fenced.keys) {
			refence, fenced = &more, more
		}
	}
	routes := perPortRoutes(es, ports, f.service.Name, f.perPort)
	if err := c.front.ensureResolverSlice(ctx, es, f.service, f.resolverEndpoints, routes, refence); err != nil {
		return syncResult{}, err
	}
	// After the slice, so a slow Service create never keeps the resolver
	// away. Our resolver never needs it; KubeElasti's holds a request until
	// it exists.
	c.front.requestPrivateService(es)
	if f.state.Replicas == 0 {
		// The scale-down, ours or anyone's, is done.
		c.handoffs.end(es.Key(), nil)
		c.wakes.forget(es.Key())
	} else if f.resolverPods > 0 {
		c.handoffs.settle(es.Key(), nil)
	}
	if f.state.Replicas > 0 && es.Status.Asleep() {
		c.wakes.observe(ctx, es, f.service)
	}
	return planProxy(f, ports, fenced), nil
}

// serve lets the target's ready pods take the Service's traffic alone,
// unless a scale-down is under way: then the resolver stays in front too.
func (c *Controller) serve(ctx context.Context, f *facts, ports *portStatus) (syncResult, error) {
	es := f.es
	c.wakes.forget(es.Key())
	handingOff, err := c.holdForHandoff(ctx, es, func() (frontResult, error) {
		if len(f.resolverEndpoints) == 0 {
			return frontNoResolver, nil
		}
		// Asked for here, not only in proxy, so it is on its way by the time
		// the scale-down lands. Only KubeElasti's resolver, which a pod
		// without per-port routing is, dials the private Service; ours
		// reads the public Service's own slices, so it needs no wait.
		published := c.front.requestPrivateService(es) && c.front.privateServicePublished(es)
		if !published && !f.perPort {
			return frontPending, nil
		}
		routes := perPortRoutes(es, ports, f.service.Name, f.perPort)
		return frontDone, c.front.ensureResolverSlice(ctx, es, f.service, f.resolverEndpoints, routes, nil)
	})
	if !handingOff {
		if err := c.front.deleteResolverSlice(ctx, es.Namespace, es.Spec.Service); err != nil {
			return syncResult{}, err
		}
	}
	// The handoff's timeout, or its failure to front, after the status.
	return syncResult{ports: ports, mode: elastiv1alpha1.ModeServe, ready: readyServe, after: err}, nil
}

// record writes r to es's status: the one place a sync's outcome is
// written.
func (w *statusWriter) record(ctx context.Context, es *elastiv1alpha1.ElastiService, r syncResult) error {
	if r.ctx != nil {
		ctx = r.ctx
	}
	var err error
	switch {
	case r.notReady != nil:
		v := r.notReady
		err = w.setNotReady(ctx, es, r.ports, r.mode, v.reason, v.message, v.then)
	case r.canWait && w.statusCanWait(es, r.ports):
		// Traffic needed the slice, not the status. When another tool scales
		// many targets to zero at once, each Service's pods are on their way
		// out, and a status write here would halve how fast the rest get
		// their resolver: write it on a later pass, behind them. The new
		// slice's own event queues the key again once the cache has it;
		// the delay only guards against missing that. Either way the key
		// waits its turn, so under a large backlog the status can say
		// serve for minutes after traffic went to the resolver.
		w.observer.ObserveMode(es.Key(), r.mode)
		err = workloop.RequeueAfter(statusFollowUp)
	default:
		err = w.writeStatus(ctx, es, r.ports, r.mode, metav1.ConditionTrue, ReasonReconciled, r.ready)
		if err == nil {
			err = r.after
		}
	}
	return cmp.Or(err, r.groupErr)
}

// statusFollowUp is when a sync that fronted without writing the status
// queues its key again, at the latest.
const statusFollowUp = time.Second

func quoted(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = strconv.Quote(n)
	}
	return out
}
