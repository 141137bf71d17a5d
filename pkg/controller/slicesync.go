package controller

import (
	"context"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/names"
	"github.com/elasti-dev/elasti/pkg/tombstone"
	"github.com/elasti-dev/elasti/pkg/workloop"
)

// enqueueForSliceService maps an EndpointSlice event, keyed by its Service, to the
// ElastiServices that care: the resolver's slices concern every ElastiService
// not serving directly; any other Service's slices concern the
// ElastiServices fronting it.
func (c *Controller) enqueueForSliceService(ctx context.Context, svc types.NamespacedName) error {
	if svc.Namespace == c.cfg.ResolverNamespace && svc.Name == c.cfg.ResolverService {
		all, err := c.elastiServices.List(labels.Everything())
		if err != nil {
			return err
		}
		n := 0
		for _, es := range all {
			if es.Status.Mode != elastiv1alpha1.ModeServe {
				c.queue.Add(es.Key())
				n++
			}
		}
		klog.FromContext(ctx).V(4).Info("Resolver endpoints changed", "elastiServicesEnqueued", n)
		return nil
	}
	c.enqueueByService(svc.Namespace, svc.Name)
	if names.IsPrivateService(svc.Name) {
		c.enqueueHandoffOwner(svc)
	}
	return nil
}

// enqueueHandoffOwner re-syncs the ElastiService owning a private Service
// whose EndpointSlices changed, if a scale-down handoff of it waits for
// them (frontPending); otherwise nothing reads private slices.
func (c *Controller) enqueueHandoffOwner(private types.NamespacedName) {
	svc, err := c.services.Services(private.Namespace).Get(private.Name)
	if err != nil {
		return
	}
	for _, key := range ownerElastiServices(svc) {
		if c.handoffs.underway(key) {
			c.queue.Add(key)
		}
	}
}

func sliceHandler(q *workloop.Loop[types.NamespacedName]) cache.ResourceEventHandler {
	add := func(obj any) {
		slice, ok := tombstone.Object[*discoveryv1.EndpointSlice](obj)
		if !ok {
			return
		}
		if svc := slice.Labels[discoveryv1.LabelServiceName]; svc != "" {
			q.Add(types.NamespacedName{Namespace: slice.Namespace, Name: svc})
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: add,
		UpdateFunc: func(old, cur any) {
			if old.(*discoveryv1.EndpointSlice).ResourceVersion != cur.(*discoveryv1.EndpointSlice).ResourceVersion {
				add(cur)
			}
		},
		DeleteFunc: add,
	}
}
