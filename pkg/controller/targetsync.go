package controller

import (
	"context"

	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/scaletarget"
	"github.com/elasti-dev/elasti/pkg/tombstone"
	"github.com/elasti-dev/elasti/pkg/workloop"
)

// enqueueForTarget maps a scale-target event to the ElastiServices that name
// it. One whose target is at zero while no resolver slice fronts its Service
// goes ahead of every other key: someone else scaled the target down, and
// its Service is dark from the moment the cluster drops the pods' endpoints
// until that sync writes the slice. When thousands are scaled down at once,
// their status writes and other syncs must not come first. Each
// ElastiService's replicas observer is told the target's replicas too, so a
// scale-up from zero by anyone starts its cooldown. The ElastiServices whose
// spec.wakeWith names the workload are queued as well.
func (c *Controller) enqueueForTarget(ctx context.Context, ref scaletarget.Ref) error {
	// A dependency's change (its readiness, above all) takes the wake of
	// each group that names it one step on.
	groups, err := c.elastiServiceIndexer.ByIndex(indexByDependency, targetIndexKey(ref))
	if err != nil {
		return err
	}
	for _, obj := range groups {
		es := obj.(*elastiv1alpha1.ElastiService)
		klog.FromContext(ctx).V(4).Info("Dependency changed", "dependency", ref.String(), "elastiService", klog.KObj(es))
		c.queue.Add(es.Key())
	}
	objs, err := c.elastiServiceIndexer.ByIndex(indexByTarget, targetIndexKey(ref))
	if err != nil || len(objs) == 0 {
		return err // most of a cluster's Deployments have no ElastiService
	}
	state, err := c.scaler.Get(ref)
	atZero := err == nil && state.Replicas == 0
	for _, obj := range objs {
		es := obj.(*elastiv1alpha1.ElastiService)
		if err == nil && es.DeletionTimestamp == nil {
			c.replicas.ObserveReplicas(ctx, es.Key(), state.Replicas)
		}
		urgent := atZero && !c.front.resolverSliceExists(es.Namespace, es.Spec.Service)
		klog.FromContext(ctx).V(4).Info("Scale target changed", "target", ref.String(), "elastiService", klog.KObj(es), "urgent", urgent)
		if urgent {
			c.queue.AddUrgent(es.Key())
		} else {
			c.queue.Add(es.Key())
		}
	}
	return nil
}

func targetHandler(q *workloop.Loop[scaletarget.Ref], kind string) cache.ResourceEventHandler {
	add := func(obj any) {
		if o, ok := tombstone.Object[objectWithMeta](obj); ok {
			q.Add(scaletarget.Ref{Kind: kind, Namespace: o.GetNamespace(), Name: o.GetName()})
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: add,
		UpdateFunc: func(old, cur any) {
			if old.(objectWithMeta).GetResourceVersion() != cur.(objectWithMeta).GetResourceVersion() {
				add(cur)
			}
		},
		DeleteFunc: add,
	}
}

type objectWithMeta interface {
	GetNamespace() string
	GetName() string
	GetResourceVersion() string
}
