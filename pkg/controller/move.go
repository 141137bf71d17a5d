package controller

import (
	"context"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/directory"
	"github.com/elasti-dev/elasti/pkg/names"
	"github.com/elasti-dev/elasti/pkg/scaletarget"
)

// A change of spec.service moves an ElastiService to another Service. An
// old Service that was asleep has only the resolver's endpoints, and
// clients keep calling it, so it leaves in two steps:
//
//  1. Fronted: its resolver slice stays, kept current, until one of its own
//     endpoints serves from a pod that stays (canServe). The target is
//     woken for it if it is at zero.
//  2. Draining: the slice is gone, but for moveDrain its resolver ports in
//     status.resolverPorts (by which the resolver still fronts it), its
//     private Service and its directory claim stay.
//
// Then its generated objects are deleted and the next status write frees
// its ports.

const (
	// moveRecheck is how often a move looks again: what ends a step (an
	// old Service's slices, the resolver's) brings no event that maps to
	// this ElastiService.
	moveRecheck = 2 * time.Second
	// moveDrain is how long an old Service keeps what the resolver needs
	// after its resolver slice is deleted: kube-proxy takes about a second
	// to follow, Traefik two.
	moveDrain = 10 * time.Second
)

// leaving is an old Service a move has not let go of yet.
type leaving struct {
	svc *corev1.Service
	// fronted: its resolver slice is still there (step 1).
	fronted bool
}

// leavingServices names the old Services of es that a move has not let go
// of: those whose resolver slice es still owns, and those whose resolver
// ports its status still records. Both survive an operator restart.
func (c *Controller) leavingServices(es *elastiv1alpha1.ElastiService) []string {
	out := c.oldFrontedServices(es)
	for _, rp := range es.Status.ResolverPorts {
		if rp.Service != es.Spec.Service && !slices.Contains(out, rp.Service) {
			out = append(out, rp.Service)
		}
	}
	slices.Sort(out)
	return out
}

// Moving reports whether a change of es's spec.service is still under way.
// The idle poller leaves such an ElastiService alone: a move wakes the
// target, and scaling it down before the move completes would only have
// the move wake it again.
func (c *Controller) Moving(es *elastiv1alpha1.ElastiService) bool {
	return len(c.leavingServices(es)) > 0
}

// oldFrontedServices names the earlier Services whose resolver slice es
// still owns.
func (c *Controller) oldFrontedServices(es *elastiv1alpha1.ElastiService) []string {
	objs, err := c.sliceIndexer.ByIndex(indexByOwner, es.Namespace+"/"+es.Name)
	if err != nil {
		return nil
	}
	var out []string
	for _, obj := range objs {
		slice := obj.(*discoveryv1.EndpointSlice)
		svc := slice.Labels[discoveryv1.LabelServiceName]
		if svc != es.Spec.Service && slice.Name == names.ResolverSlice(svc) && hasOwnerRef(slice.OwnerReferences, es) {
			out = append(out, svc)
		}
	}
	slices.Sort(out)
	return out
}

// claimServices makes es claim its Service in the directory, as claim does,
// and keep claiming the old Services of a move, so a wake for one of them
// still reaches the target. It lets go of every other Service es held.
func (c *Controller) claimServices(es *elastiv1alpha1.ElastiService, old []string) (claimant types.NamespacedName, ok bool) {
	keep := []types.NamespacedName{{Namespace: es.Namespace, Name: es.Spec.Service}}
	for _, svc := range old {
		keep = append(keep, types.NamespacedName{Namespace: es.Namespace, Name: svc})
	}
	c.directory.ReleaseAll(es.Key(), keep...)
	if claimant, ok = c.claims.claim(es); !ok {
		return claimant, false
	}
	entry := directory.EntryFor(es)
	for _, svc := range keep[1:] {
		// An old Service another ElastiService now names is theirs.
		c.directory.Claim(svc, entry)
	}
	return claimant, true
}

// leaveOldServices takes the old Services of a move, named by old, a step
// further (see the top of this file) and returns those not yet let go of.
// With none left it deletes every generated object of an earlier
// spec.service.
func (c *Controller) leaveOldServices(ctx context.Context, f *facts, old []string) ([]leaving, error) {
	es := f.es
	key := es.Key()
	if len(old) == 0 {
		c.drains.forget(key)
		return nil, c.deleteStaleObjects(ctx, es)
	}
	replicas, err := c.wakeForMove(ctx, f)
	if err != nil {
		return nil, err
	}
	now := c.clock.Now()
	var out []leaving
	for _, name := range old {
		svc, err := c.services.Services(es.Namespace).Get(name)
		if apierrors.IsNotFound(err) {
			continue // nobody can call it any more
		}
		if err != nil {
			return nil, err
		}
		l, left, err := c.leaveStep(ctx, es, svc, replicas, now)
		if err != nil {
			return nil, err
		}
		if left {
			c.directory.Release(types.NamespacedName{Namespace: es.Namespace, Name: name}, key)
			continue
		}
		out = append(out, l)
	}
	if len(out) == 0 {
		c.drains.forget(key)
		klog.FromContext(ctx).V(2).Info("Moved off the old Services", "services", old)
		return nil, c.deleteStaleObjects(ctx, es)
	}
	c.elastiServiceQueue.AddAfter(key, moveRecheck)
	return out, nil
}

// leaveStep takes one old Service a step further; left reports that it is
// let go of.
func (c *Controller) leaveStep(ctx context.Context, es *elastiv1alpha1.ElastiService, svc *corev1.Service,
	replicas int32, now time.Time) (l leaving, left bool, err error) {
	key := es.Key()
	slice, err := c.slices.EndpointSlices(es.Namespace).Get(names.ResolverSlice(svc.Name))
	if err == nil && hasOwnerRef(slice.OwnerReferences, es) {
		serving, _, err := c.canServe(ctx, es, svc.Name, replicas, slice, fenceOf(slice, now))
		if err != nil || !serving {
			return leaving{svc: svc, fronted: true}, false, err
		}
		if err := c.front.deleteResolverSlice(ctx, es.Namespace, svc.Name); err != nil {
			return leaving{}, false, err
		}
		c.drains.start(key, svc.Name, now)
	}
	if c.drains.remaining(key, svc.Name, now) > 0 {
		return leaving{svc: svc}, false, nil
	}
	return leaving{}, true, nil
}

// wakeForMove scales the target up if it is at zero while an old Service
// still has only the resolver in front of it: that Service's own pods are
// all that can end the move. It returns the target's replicas, 0 when the
// target cannot be read (the old Services then stay fronted). A wake is
// recorded in f, as the Scaler, which reads its own writes, would show it.
func (c *Controller) wakeForMove(ctx context.Context, f *facts) (int32, error) {
	es, ref := f.es, f.target
	if f.targetErr != nil {
		// Nothing can wake without a target; the reconcile that follows
		// reports why.
		return 0, nil
	}
	fronted := c.oldFrontedServices(es)
	if f.state.Replicas > 0 || len(fronted) == 0 {
		return f.state.Replicas, nil
	}
	replicas := scaletarget.GoalFor(c.scaler, ref, directory.EntryFor(es).MinTargetReplicas, es.Spec.Autoscaler).Replicas
	err := scaletarget.Wake(ctx, c.scaler, ref, replicas, es.Spec.Autoscaler)
	if !scaletarget.Woken(err) {
		return 0, err
	}
	f.state.Replicas = replicas
	if err != nil {
		klog.FromContext(ctx).Error(err, "Woke the target for a move; KEDA stays paused", "target", ref.String())
	}
	klog.FromContext(ctx).V(2).Info("Woke the target for a move", "target", ref.String(), "replicas", replicas, "oldServices", fronted)
	c.recorder.Eventf(es, corev1.EventTypeNormal, ReasonWokenForMove,
		"spec.service changed to %q while %s %q was at zero: scaled it to %d; the resolver stays in front of %v until a pod serves",
		es.Spec.Service, ref.Kind, ref.Name, replicas, fronted)
	// The scale write only changed the target; its pods are not there yet.
	return 0, nil
}

// frontOldServices keeps the resolver slice of every fronted old Service
// current: the resolver's endpoints move, and its ports are those status
// records for that Service.
func (c *Controller) frontOldServices(ctx context.Context, es *elastiv1alpha1.ElastiService, old []leaving, ports *portStatus) error {
	if !slices.ContainsFunc(old, func(l leaving) bool { return l.fronted }) {
		return nil
	}
	endpoints, perPort := c.front.resolverEndpoints()
	for _, l := range old {
		if !l.fronted {
			continue
		}
		if err := c.front.ensureResolverSlice(ctx, es, l.svc, endpoints, perPortRoutes(es, ports, l.svc.Name, perPort), nil); err != nil {
			return err
		}
	}
	return nil
}

// portsWithoutService is the port status of es while spec.service names no
// Service: its ports went with it, but the old Services of a move keep
// theirs, and their resolver slices stay current.
func (c *Controller) portsWithoutService(ctx context.Context, es *elastiv1alpha1.ElastiService, old []leaving) (*portStatus, error) {
	if len(old) == 0 {
		c.front.releasePorts(ctx, es.Key())
		return noPorts, nil
	}
	ports := c.front.assignPorts(ctx, es, nil, old)
	return ports, c.frontOldServices(ctx, es, old, ports)
}

// deleteStaleObjects removes generated objects that belong to an earlier
// spec.service of this ElastiService.
func (c *Controller) deleteStaleObjects(ctx context.Context, es *elastiv1alpha1.ElastiService) error {
	return c.deleteOwned(ctx, es, names.PrivateService(es.Spec.Service), names.ResolverSlice(es.Spec.Service))
}

// moveDrains remembers when each old Service of a move lost its resolver
// slice. It is memory only: a new leader that finds a Service draining
// starts its drain again, which only makes it longer.
type moveDrains struct {
	mu sync.Mutex
	m  map[types.NamespacedName]map[string]time.Time
}

func (d *moveDrains) start(key types.NamespacedName, svc string, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil {
		d.m = map[types.NamespacedName]map[string]time.Time{}
	}
	if d.m[key] == nil {
		d.m[key] = map[string]time.Time{}
	}
	d.m[key][svc] = now
}

// remaining is how long svc still drains; one never started starts now.
func (d *moveDrains) remaining(key types.NamespacedName, svc string, now time.Time) time.Duration {
	d.mu.Lock()
	began, ok := d.m[key][svc]
	d.mu.Unlock()
	if !ok {
		d.start(key, svc, now)
		began = now
	}
	return max(began.Add(moveDrain).Sub(now), 0)
}

// forget drops what is remembered for key.
func (d *moveDrains) forget(key types.NamespacedName) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.m, key)
}
