package controller

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/directory"
	"github.com/elasti-dev/elasti/pkg/names"
)

// claim makes es the claimant of its Service in the directory unless
// another live ElastiService should be; it returns the claimant. Which one
// claims a contested Service is decided the same way on every replica and
// after every restart (see shouldClaim), so a failover never hands the
// Service to the other.
func (cl *claimer) claim(es *elastiv1alpha1.ElastiService) (claimant types.NamespacedName, ok bool) {
	svcKey := types.NamespacedName{Namespace: es.Namespace, Name: es.Spec.Service}
	entry := directory.EntryFor(es)
	if claimant, ok = cl.directory.Claim(svcKey, entry); ok {
		return claimant, true
	}
	other, err := cl.elastiServices.ElastiServices(claimant.Namespace).Get(claimant.Name)
	switch {
	case apierrors.IsNotFound(err) || (err == nil && other.Spec.Service != es.Spec.Service):
		// The claimant was deleted or now names another Service, and its own
		// sync has not released this one yet: events for the two keys may be
		// handled in any order. Only this Service is released, so the
		// claimant's new claim stands.
	case err == nil && cl.shouldClaim(es, other):
		// Tell the displaced claimant, so it reports the conflict.
		cl.queue.Add(claimant)
	default:
		return claimant, false
	}
	cl.directory.Release(svcKey, claimant)
	return cl.directory.Claim(svcKey, entry)
}

// shouldClaim reports whether a rather than b should claim a Service both
// name: the one controlling the objects already generated for it, else the
// older, else the first by name.
func (cl *claimer) shouldClaim(a, b *elastiv1alpha1.ElastiService) bool {
	if ca, cb := cl.controlsGenerated(a), cl.controlsGenerated(b); ca != cb {
		return ca
	}
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

// controlsGenerated reports whether es is the controller of the private
// Service or resolver slice generated for its Service.
func (cl *claimer) controlsGenerated(es *elastiv1alpha1.ElastiService) bool {
	if svc, err := cl.services.Services(es.Namespace).Get(names.PrivateService(es.Spec.Service)); err == nil && metav1.IsControlledBy(svc, es) {
		return true
	}
	slice, err := cl.slices.EndpointSlices(es.Namespace).Get(names.ResolverSlice(es.Spec.Service))
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
		if es.DeletionTimestamp == nil && es.Spec.Service != "" && c.directory.Budget().Admitted(es.Key()) {
			c.claims.claim(es)
		}
	}
	klog.FromContext(ctx).V(2).Info("Directory primed", "services", c.directory.Len())
}

// managesService reports whether es may change its Service's routing. An
// ElastiService that lost a ServiceConflict never did, so its deletion must
// not wake the claimant's target or remove the claimant's resolver slice.
func (cl *claimer) managesService(es *elastiv1alpha1.ElastiService) bool {
	me := es.Key()
	if entry, ok := cl.directory.Lookup(types.NamespacedName{Namespace: es.Namespace, Name: es.Spec.Service}); ok {
		return entry.ElastiService == me
	}
	// Nobody claims it in memory (e.g. just after a restart): the resolver
	// slice's owner is the one in charge.
	slice, err := cl.slices.EndpointSlices(es.Namespace).Get(names.ResolverSlice(es.Spec.Service))
	return err != nil || len(slice.OwnerReferences) == 0 || hasOwnerRef(slice.OwnerReferences, es)
}

// Manages reports whether the controller drives es's Service now: es claims
// it in the directory and is Ready at its current generation. Only then is
// there a resolver to put in front of the Service and a wake path back, so
// the idle poller scales no other ElastiService's target.
func (c *Controller) Manages(es *elastiv1alpha1.ElastiService) bool {
	entry, ok := c.directory.Lookup(types.NamespacedName{Namespace: es.Namespace, Name: es.Spec.Service})
	ready := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionReady)
	return ok && entry.ElastiService == es.Key() &&
		ready != nil && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == es.Generation
}
