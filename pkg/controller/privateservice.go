package controller

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/names"
	"github.com/elasti-dev/elasti/pkg/workloop"
)

// privateServiceSpec is the private Service's spec for public: a ClusterIP
// copy of its selector and ports, so the target's pods stay reachable while
// the public Service points at the resolver.
func privateServiceSpec(public *corev1.Service) corev1.ServiceSpec {
	ports := make([]corev1.ServicePort, 0, len(public.Spec.Ports))
	for _, p := range public.Spec.Ports {
		p.NodePort = 0
		ports = append(ports, p)
	}
	return corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Selector: maps.Clone(public.Spec.Selector), Ports: ports}
}

// createPrivateService creates elasti-<svc>-pvt-<hash> unless it exists, and
// reports whether it did. Only syncPrivateService calls it.
func (r *resolverFront) createPrivateService(ctx context.Context, es *elastiv1alpha1.ElastiService, public *corev1.Service) (bool, error) {
	name := names.PrivateService(public.Name)
	if _, err := r.services.Services(es.Namespace).Get(name); !apierrors.IsNotFound(err) {
		// There already (mirrorPrivateService keeps it in step), or the
		// cache cannot say.
		return false, err
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       es.Namespace,
			Labels:          map[string]string{LabelManagedBy: AgentName},
			OwnerReferences: []metav1.OwnerReference{ownerRef(es)},
		},
		Spec: privateServiceSpec(public),
	}
	if _, err := r.kubeClient.CoreV1().Services(es.Namespace).Create(ctx, svc, metav1.CreateOptions{FieldManager: AgentName}); err != nil {
		// AlreadyExists means our cache is behind: retry with fresh state.
		return false, fmt.Errorf("create private service %s: %w", name, err)
	}
	klog.FromContext(ctx).V(2).Info("Created private service", "service", klog.KRef(es.Namespace, name))
	return true, nil
}

// requestPrivateService asks for es's private Service unless the cache has
// it, and reports whether it has. The private Service is made only when the
// resolver is put in front (as in KubeElasti, at the first switch to
// proxy): the resolver reaches the target's pods through its
// EndpointSlices. A Service that never needs the resolver costs no private
// Service, no EndpointSlice for it, and no writes.
func (r *resolverFront) requestPrivateService(es *elastiv1alpha1.ElastiService) bool {
	_, err := r.services.Services(es.Namespace).Get(names.PrivateService(es.Spec.Service))
	if apierrors.IsNotFound(err) {
		r.privateServices.Add(es.Key())
		return false
	}
	return err == nil
}

// syncPrivateService creates the private Service of the ElastiService key,
// if it still fronts a Service; the private Service's add event brings the
// ElastiService back to its own sync.
func (r *resolverFront) syncPrivateService(ctx context.Context, key types.NamespacedName) error {
	es, err := r.elastiServices.ElastiServices(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil || es.DeletionTimestamp != nil {
		return err
	}
	public, err := r.services.Services(es.Namespace).Get(es.Spec.Service)
	if apierrors.IsNotFound(err) {
		return nil // its ElastiService reports the missing Service
	}
	if err != nil {
		return err
	}
	if wait := r.terminating.wait(key.Namespace); wait > 0 {
		return workloop.RequeueAfter(wait)
	}
	ctx = klog.NewContext(ctx, klog.LoggerWithValues(klog.FromContext(ctx), "elastiService", klog.KObj(es)))
	_, err = r.createPrivateService(ctx, es, public)
	if r.terminating.refused(key.Namespace, err) {
		return workloop.RequeueAfter(terminatingMemory)
	}
	return err
}

// mirrorPrivateService keeps an existing private Service (made by an earlier
// sync, an older elasti or KubeElasti) in step with the public Service, and
// adopts one KubeElasti left without an owner. It creates none.
func (r *resolverFront) mirrorPrivateService(ctx context.Context, es *elastiv1alpha1.ElastiService, public *corev1.Service) error {
	existing, err := r.services.Services(es.Namespace).Get(names.PrivateService(public.Name))
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if controlledByOther(existing, es) {
		return fmt.Errorf("private service %s is controlled by another object; not adopting it", existing.Name)
	}
	want := privateServiceSpec(public)
	if existing.Spec.Type == want.Type &&
		equality.Semantic.DeepEqual(existing.Spec.Selector, want.Selector) &&
		equality.Semantic.DeepEqual(existing.Spec.Ports, want.Ports) &&
		hasOwnerRef(existing.OwnerReferences, es) &&
		// KubeElasti's copy of a ClusterIP Service matches in all but
		// this label; it marks every private Service as elasti's, e.g.
		// for kubectl get -l after a switch.
		existing.Labels[LabelManagedBy] == AgentName {
		return nil
	}
	return r.updatePrivateService(ctx, es, existing, want)
}

func (r *resolverFront) updatePrivateService(ctx context.Context, es *elastiv1alpha1.ElastiService, existing *corev1.Service, want corev1.ServiceSpec) error {
	updated := existing.DeepCopy()
	updated.Spec.Type = want.Type
	updated.Spec.Selector = want.Selector
	updated.Spec.Ports = want.Ports
	if !hasOwnerRef(updated.OwnerReferences, es) {
		updated.OwnerReferences = append(updated.OwnerReferences, ownerRef(es))
	}
	if updated.Labels == nil {
		updated.Labels = map[string]string{}
	}
	updated.Labels[LabelManagedBy] = AgentName
	if _, err := r.kubeClient.CoreV1().Services(es.Namespace).Update(ctx, updated, metav1.UpdateOptions{FieldManager: AgentName}); err != nil {
		return fmt.Errorf("update private service %s: %w", existing.Name, err)
	}
	klog.FromContext(ctx).V(2).Info("Mirrored public service onto private service", "service", klog.KObj(existing))
	return nil
}

// privateServicePublished reports whether the EndpointSlice controller has
// published a slice for es's private Service yet: until it has, KubeElasti's
// resolver put in front would hold every request, though the target's pods
// are ready, and wake a target that is not asleep.
func (r *resolverFront) privateServicePublished(es *elastiv1alpha1.ElastiService) bool {
	objs, err := r.sliceIndexer.ByIndex(indexByService, es.Namespace+"/"+names.PrivateService(es.Spec.Service))
	return err == nil && len(objs) > 0
}
