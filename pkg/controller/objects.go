package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/endpointready"
	"github.com/elasti-dev/elasti/pkg/names"
)

// ownerRef makes the ElastiService own a generated object, so the garbage
// collector removes it if the ElastiService is ever force-deleted.
// BlockOwnerDeletion stays off: it would need update rights on
// elastiservices/finalizers under OwnerReferencesPermissionEnforcement.
func ownerRef(es *elastiv1alpha1.ElastiService) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: elastiv1alpha1.SchemeGroupVersion.String(),
		Kind:       "ElastiService",
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
func (c *Controller) createPrivateService(ctx context.Context, es *elastiv1alpha1.ElastiService, public *corev1.Service) (bool, error) {
	name := names.PrivateService(public.Name)
	if _, err := c.services.Services(es.Namespace).Get(name); !apierrors.IsNotFound(err) {
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
	if _, err := c.kubeClient.CoreV1().Services(es.Namespace).Create(ctx, svc, metav1.CreateOptions{FieldManager: AgentName}); err != nil {
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
func (c *Controller) requestPrivateService(es *elastiv1alpha1.ElastiService) bool {
	_, err := c.services.Services(es.Namespace).Get(names.PrivateService(es.Spec.Service))
	if apierrors.IsNotFound(err) {
		c.wantPrivateService(cache.MetaObjectToName(es))
		return false
	}
	return err == nil
}

// syncPrivateService creates the private Service of the ElastiService key,
// if it still fronts a Service; the private Service's add event brings the
// ElastiService back to its own sync.
func (c *Controller) syncPrivateService(ctx context.Context, key cache.ObjectName) error {
	es, err := c.elastiServices.ElastiServices(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil || es.DeletionTimestamp != nil {
		return err
	}
	public, err := c.services.Services(es.Namespace).Get(es.Spec.Service)
	if apierrors.IsNotFound(err) {
		return nil // its ElastiService reports the missing Service
	}
	if err != nil {
		return err
	}
	ctx = klog.NewContext(ctx, klog.LoggerWithValues(klog.FromContext(ctx), "elastiService", klog.KObj(es)))
	_, err = c.createPrivateService(ctx, es, public)
	return err
}

// mirrorPrivateService keeps an existing private Service (made by an earlier
// sync, an older elasti or KubeElasti) in step with the public Service, and
// adopts one KubeElasti left without an owner. It creates none.
func (c *Controller) mirrorPrivateService(ctx context.Context, es *elastiv1alpha1.ElastiService, public *corev1.Service) error {
	existing, err := c.services.Services(es.Namespace).Get(names.PrivateService(public.Name))
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
	return c.updatePrivateService(ctx, es, existing, want)
}

func (c *Controller) updatePrivateService(ctx context.Context, es *elastiv1alpha1.ElastiService, existing *corev1.Service, want corev1.ServiceSpec) error {
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
	if _, err := c.kubeClient.CoreV1().Services(es.Namespace).Update(ctx, updated, metav1.UpdateOptions{FieldManager: AgentName}); err != nil {
		return fmt.Errorf("update private service %s: %w", existing.Name, err)
	}
	klog.FromContext(ctx).V(2).Info("Mirrored public service onto private service", "service", klog.KObj(existing))
	return nil
}

// privateServicePublished reports whether the EndpointSlice controller has
// published a slice for es's private Service yet: until it has, KubeElasti's
// resolver put in front would hold every request, though the target's pods
// are ready, and wake a target that is not asleep.
func (c *Controller) privateServicePublished(es *elastiv1alpha1.ElastiService) bool {
	objs, err := c.sliceIndexer.ByIndex(indexByService, es.Namespace+"/"+names.PrivateService(es.Spec.Service))
	return err == nil && len(objs) > 0
}

// hasReadyEndpoints reports whether the public Service has a ready endpoint
// of its own, i.e. one that is not our resolver slice, and that f does not
// fence. Judging from the Service's slices rather than the target's replica
// count means serve mode starts only once traffic can really reach a ready
// pod.
func (c *Controller) hasReadyEndpoints(namespace, service string, f fence) bool {
	found := false
	c.servingEndpoints(namespace, service, func(ep discoveryv1.Endpoint) {
		found = found || !f.has(endpointKey(ep))
	})
	return found
}

// resolverEndpoints lists the resolver's ready IPv4 endpoints, one per
// address, in a stable order so unchanged input never rewrites a slice.
//
// perPort reports whether every one of them declares per-port routing:
// is in a slice that lists the resolver Service's ResolverPerPortRoutingPort.
// That Service port targets a named container port, and the EndpointSlice
// controller lists a Service port for a pod only when the pod has the
// container port it names; so a pod without it (KubeElasti's resolver,
// which listens on the proxy port alone) lands in a slice without it. One
// such pod is enough to keep every Service on Host routing: its share of
// the traffic would otherwise reach ports it does not listen on.
func (c *Controller) resolverEndpoints() (out []discoveryv1.Endpoint, perPort bool) {
	list, err := c.resolverSlices.EndpointSlices(c.cfg.ResolverNamespace).List(
		labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: c.cfg.ResolverService}))
	if err != nil {
		return nil, false
	}
	seen := map[string]bool{}
	perPort = true
	for _, slice := range list {
		if slice.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		declares := slices.ContainsFunc(slice.Ports, func(p discoveryv1.EndpointPort) bool {
			return ptr.Deref(p.Name, "") == ResolverPerPortRoutingPort
		})
		for _, ep := range slice.Endpoints {
			if !endpointready.Serving(ep) {
				continue
			}
			perPort = perPort && declares
			for _, addr := range ep.Addresses {
				if seen[addr] {
					continue
				}
				seen[addr] = true
				out = append(out, discoveryv1.Endpoint{
					Addresses:  []string{addr},
					Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
					TargetRef:  ep.TargetRef,
					NodeName:   ep.NodeName,
					Zone:       ep.Zone,
				})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Addresses[0] < out[j].Addresses[0] })
	return out, perPort && len(out) > 0
}

// ensureResolverSlice points the public Service at the resolver: one
// endpoint per ready resolver pod, and one port per public Service TCP port,
// named like it. A port in routes (Service port → resolver port) points at
// its own resolver port, carrying the Service port's appProtocol, so the
// resolver knows the Service from the port alone; any other port points at
// the resolver's proxy port, where it routes by Host.
func (c *Controller) ensureResolverSlice(ctx context.Context, es *elastiv1alpha1.ElastiService, public *corev1.Service,
	endpoints []discoveryv1.Endpoint, routes map[int32]int32, f *fence) error {
	name := names.ResolverSlice(public.Name)
	ports := c.resolverSlicePorts(public, routes)
	if endpoints == nil {
		endpoints = []discoveryv1.Endpoint{}
	}
	wantLabels := map[string]string{
		discoveryv1.LabelServiceName: public.Name,
		discoveryv1.LabelManagedBy:   ManagedByValue,
	}
	wantAnnotations := map[string]string{}
	if f != nil {
		f.annotate(wantAnnotations)
	}

	existing, err := c.slices.EndpointSlices(es.Namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return c.createResolverSlice(ctx, es, &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{
				Name:            name,
				Namespace:       es.Namespace,
				Labels:          wantLabels,
				Annotations:     wantAnnotations,
				OwnerReferences: []metav1.OwnerReference{ownerRef(es)},
			},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   endpoints,
			Ports:       ports,
		})
	}
	if err != nil {
		return err
	}
	if controlledByOther(existing, es) {
		return fmt.Errorf("resolver slice %s is controlled by another object; not adopting it", name)
	}
	if len(endpoints) == 0 && hasServing(existing.Endpoints) {
		// No resolver pod is known, but the slice still lists some: keep
		// them rather than leave the Service with no endpoint at all. They
		// may well answer: an operator that starts before the resolver
		// Service's slices are published sees none, and during a switch
		// from KubeElasti its resolver pods, orphaned, still serve the
		// slices it wrote until ours replace them. The ready condition
		// says the resolver is unavailable meanwhile.
		endpoints = existing.Endpoints
	}
	labelsOK := true
	for k, v := range wantLabels {
		labelsOK = labelsOK && existing.Labels[k] == v
	}
	for _, k := range []string{AnnotationFencedEndpoints, AnnotationFencedAt} {
		labelsOK = labelsOK && (f == nil || existing.Annotations[k] == wantAnnotations[k])
	}
	if labelsOK && hasOwnerRef(existing.OwnerReferences, es) && existing.AddressType == discoveryv1.AddressTypeIPv4 &&
		sameEndpoints(existing.Endpoints, endpoints) && equality.Semantic.DeepEqual(existing.Ports, ports) {
		return nil
	}
	if existing.AddressType != discoveryv1.AddressTypeIPv4 {
		// addressType is immutable: replace the slice.
		if err := c.deleteResolverSlice(ctx, es.Namespace, es.Spec.Service); err != nil {
			return err
		}
		return fmt.Errorf("replaced resolver slice %s with a non-IPv4 address type", name)
	}
	updated := existing.DeepCopy()
	if updated.Labels == nil {
		updated.Labels = map[string]string{}
	}
	maps.Copy(updated.Labels, wantLabels)
	if f != nil {
		if updated.Annotations == nil {
			updated.Annotations = map[string]string{}
		}
		f.annotate(updated.Annotations)
	}
	if !hasOwnerRef(updated.OwnerReferences, es) {
		updated.OwnerReferences = append(updated.OwnerReferences, ownerRef(es))
	}
	updated.Endpoints = endpoints
	updated.Ports = ports
	if _, err := c.kubeClient.DiscoveryV1().EndpointSlices(es.Namespace).Update(ctx, updated, metav1.UpdateOptions{FieldManager: AgentName}); err != nil {
		return fmt.Errorf("update resolver slice %s: %w", name, err)
	}
	klog.FromContext(ctx).V(2).Info("Updated resolver slice", "endpointSlice", klog.KRef(es.Namespace, name), "endpoints", len(endpoints))
	return nil
}

// resolverSlicePorts lists one slice port per TCP port of the public
// Service, named like it: its own resolver port when routes assigns one
// (per-port routing, keeping the port's appProtocol), else the shared
// proxy port (Host routing).
func (c *Controller) resolverSlicePorts(public *corev1.Service, routes map[int32]int32) []discoveryv1.EndpointPort {
	var ports []discoveryv1.EndpointPort
	for _, p := range public.Spec.Ports {
		if p.Protocol != "" && p.Protocol != corev1.ProtocolTCP {
			continue
		}
		port := discoveryv1.EndpointPort{
			Name:     ptr.To(p.Name),
			Port:     ptr.To(c.cfg.ResolverProxyPort),
			Protocol: ptr.To(corev1.ProtocolTCP),
		}
		if rp, ok := routes[p.Port]; ok {
			port.Port = ptr.To(rp)
			port.AppProtocol = p.AppProtocol
		}
		ports = append(ports, port)
	}
	return ports
}

func (c *Controller) createResolverSlice(ctx context.Context, es *elastiv1alpha1.ElastiService, slice *discoveryv1.EndpointSlice) error {
	if _, err := c.kubeClient.DiscoveryV1().EndpointSlices(es.Namespace).Create(ctx, slice, metav1.CreateOptions{FieldManager: AgentName}); err != nil {
		return fmt.Errorf("create resolver slice %s: %w", slice.Name, err)
	}
	klog.FromContext(ctx).V(2).Info("Created resolver slice", "endpointSlice", klog.KObj(slice), "endpoints", len(slice.Endpoints))
	return nil
}

// hasServing reports whether any of endpoints serves.
func hasServing(endpoints []discoveryv1.Endpoint) bool {
	return slices.ContainsFunc(endpoints, endpointready.Serving)
}

func sameEndpoints(a, b []discoveryv1.Endpoint) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !equality.Semantic.DeepEqual(a[i].Addresses, b[i].Addresses) || endpointready.Serving(a[i]) != endpointready.Serving(b[i]) {
			return false
		}
	}
	return true
}

func (c *Controller) resolverSliceExists(namespace, service string) bool {
	_, err := c.slices.EndpointSlices(namespace).Get(names.ResolverSlice(service))
	return err == nil
}

// deleteResolverSlice deletes the resolver slice of namespace/service.
func (c *Controller) deleteResolverSlice(ctx context.Context, namespace, service string) error {
	name := names.ResolverSlice(service)
	if !c.resolverSliceExists(namespace, service) {
		return nil
	}
	err := c.kubeClient.DiscoveryV1().EndpointSlices(namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete resolver slice %s: %w", name, err)
	}
	klog.FromContext(ctx).V(2).Info("Deleted resolver slice", "endpointSlice", klog.KRef(namespace, name))
	return nil
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
