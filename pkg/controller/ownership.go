package controller

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

// ownerRef makes the ElastiService own a generated object, so the garbage
// collector removes it if the ElastiService is ever force-deleted.
// BlockOwnerDeletion stays off: it would need update rights on
// elastiservices/finalizers under OwnerReferencesPermissionEnforcement.
func ownerRef(es *elastiv1alpha1.ElastiService) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: elastiv1alpha1.SchemeGroupVersion.String(),
		Kind:       elastiv1alpha1.KindElastiService,
		Name:       es.Name,
		UID:        es.UID,
		Controller: ptr.To(true),
	}
}

// controlledByOther reports whether another object is obj's controller:
// the apiserver allows one, and adopting such an object would fight it.
func controlledByOther(obj metav1.Object, es *elastiv1alpha1.ElastiService) bool {
	ref := metav1.GetControllerOfNoCopy(obj)
	return ref != nil && ref.UID != es.UID
}

func hasOwnerRef(refs []metav1.OwnerReference, es *elastiv1alpha1.ElastiService) bool {
	for _, r := range refs {
		if r.UID == es.UID {
			return true
		}
	}
	return false
}

// deleteOwned deletes the Services and EndpointSlices es owns, except those
// named keepService and keepSlice.
func (c *Controller) deleteOwned(ctx context.Context, es *elastiv1alpha1.ElastiService, keepService, keepSlice string) error {
	if err := deleteOwnedIn(ctx, c.serviceIndexer, es, keepService, "service",
		c.kubeClient.CoreV1().Services(es.Namespace).Delete); err != nil {
		return err
	}
	return deleteOwnedIn(ctx, c.sliceIndexer, es, keepSlice, "endpointslice",
		c.kubeClient.DiscoveryV1().EndpointSlices(es.Namespace).Delete)
}

// deleteOwnedIn deletes, through del, the objects in indexer that es owns,
// except the one named keep.
func deleteOwnedIn(ctx context.Context, indexer cache.Indexer, es *elastiv1alpha1.ElastiService, keep, kind string,
	del func(context.Context, string, metav1.DeleteOptions) error) error {
	objs, err := indexer.ByIndex(indexByOwner, es.Namespace+"/"+es.Name)
	if err != nil {
		return err
	}
	for _, obj := range objs {
		m, ok := obj.(metav1.Object)
		if !ok || m.GetName() == keep || !hasOwnerRef(m.GetOwnerReferences(), es) {
			continue
		}
		if err := del(ctx, m.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete %s %s: %w", kind, m.GetName(), err)
		}
		klog.FromContext(ctx).V(2).Info("Deleted generated object", "kind", kind, "object", klog.KObj(m))
	}
	return nil
}

// ownerElastiServices names the ElastiServices that own obj through an owner
// reference, the mark ownerRef puts on every object the operator generates.
func ownerElastiServices(obj metav1.Object) []types.NamespacedName {
	var keys []types.NamespacedName
	for _, ref := range obj.GetOwnerReferences() {
		if elastiv1alpha1.IsElastiServiceRef(ref) {
			keys = append(keys, types.NamespacedName{Namespace: obj.GetNamespace(), Name: ref.Name})
		}
	}
	return keys
}
