package controller

import (
	"context"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/names"
	"github.com/elasti-dev/elasti/pkg/scaletarget"
)

func indexElastiServiceByService(obj any) ([]string, error) {
	es, ok := obj.(*elastiv1alpha1.ElastiService)
	if !ok || es.Spec.Service == "" {
		return nil, nil
	}
	return []string{es.Namespace + "/" + es.Spec.Service}, nil
}

func indexElastiServiceByTarget(obj any) ([]string, error) {
	es, ok := obj.(*elastiv1alpha1.ElastiService)
	if !ok {
		return nil, nil
	}
	return []string{targetIndexKey(scaletarget.RefFor(es))}, nil
}

func targetIndexKey(r scaletarget.Ref) string { return r.Namespace + "/" + r.Kind + "/" + r.Name }

func indexSliceByService(obj any) ([]string, error) {
	slice, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return nil, nil
	}
	if svc := slice.Labels[discoveryv1.LabelServiceName]; svc != "" {
		return []string{slice.Namespace + "/" + svc}, nil
	}
	return nil, nil
}

// indexByOwnerElastiService finds generated objects by their owner, so
// objects left behind by an earlier spec.service can be cleaned up.
func indexByOwnerElastiService(obj any) ([]string, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, nil
	}
	var keys []string
	for _, ref := range m.GetOwnerReferences() {
		if elastiv1alpha1.IsElastiServiceRef(ref) {
			keys = append(keys, m.GetNamespace()+"/"+ref.Name)
		}
	}
	return keys, nil
}

// enqueueForTarget maps a scale-target event to the ElastiServices that name
// it. One whose target is at zero while no resolver slice fronts its Service
// goes ahead of every other key: someone else scaled the target down, and
// its Service is dark from the moment the cluster drops the pods' endpoints
// until that sync writes the slice. When thousands are scaled down at once,
// their status writes and other syncs must not come first. Each
// ElastiService's replicas observer is told the target's replicas too, so a
// scale-up from zero by anyone starts its cooldown.
func (c *Controller) enqueueForTarget(ctx context.Context, ref scaletarget.Ref) error {
	objs, err := c.elastiServiceIndexer.ByIndex(indexByTarget, targetIndexKey(ref))
	if err != nil || len(objs) == 0 {
		return err // most of a cluster's Deployments have no ElastiService
	}
	state, err := c.scaler.Get(ref)
	atZero := err == nil && state.Replicas == 0
	for _, obj := range objs {
		es := obj.(*elastiv1alpha1.ElastiService)
		if err == nil && es.DeletionTimestamp == nil {
			c.replicas.ObserveReplicas(ctx, types.NamespacedName{Namespace: es.Namespace, Name: es.Name}, state.Replicas)
		}
		urgent := atZero && !c.resolverSliceExists(es.Namespace, es.Spec.Service)
		klog.FromContext(ctx).V(4).Info("Scale target changed", "target", ref.String(), "elastiService", klog.KObj(es), "urgent", urgent)
		if urgent {
			c.enqueueUrgent(cache.MetaObjectToName(es))
		} else {
			c.enqueue(cache.MetaObjectToName(es))
		}
	}
	return nil
}

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
				c.enqueue(cache.MetaObjectToName(es))
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
	for _, ref := range svc.OwnerReferences {
		key := cache.ObjectName{Namespace: svc.Namespace, Name: ref.Name}
		if ref.Kind == "ElastiService" && c.handoffs.underway(key) {
			c.enqueue(key)
		}
	}
}
