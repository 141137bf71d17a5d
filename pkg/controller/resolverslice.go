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
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/endpointready"
	"github.com/elasti-dev/elasti/pkg/names"
)

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
func (r *resolverFront) resolverEndpoints() (out []discoveryv1.Endpoint, perPort bool) {
	list, err := r.resolverSlices.EndpointSlices(r.cfg.ResolverNamespace).List(
		labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: r.cfg.ResolverService}))
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

// ensureResolverSlice points the public Service at the resolver: it
// writes the slice desiredResolverSlice decides on, if it differs from the
// one there.
func (r *resolverFront) ensureResolverSlice(ctx context.Context, es *elastiv1alpha1.ElastiService, public *corev1.Service,
	endpoints []discoveryv1.Endpoint, routes map[int32]int32, f *fence) error {
	name := names.ResolverSlice(public.Name)
	existing, err := r.slices.EndpointSlices(es.Namespace).Get(name)
	if apierrors.IsNotFound(err) {
		existing, err = nil, nil
	}
	if err != nil {
		return err
	}
	want, change, err := desiredResolverSlice(es, public, existing, endpoints, resolverSlicePorts(public, routes, r.cfg.ResolverProxyPort), f)
	logger := klog.FromContext(ctx)
	slices := r.kubeClient.DiscoveryV1().EndpointSlices(es.Namespace)
	switch change {
	case sliceCreate:
		if _, err := slices.Create(ctx, want, metav1.CreateOptions{FieldManager: AgentName}); err != nil {
			return fmt.Errorf("create resolver slice %s: %w", name, err)
		}
		logger.V(2).Info("Created resolver slice", "endpointSlice", klog.KObj(want), "endpoints", len(want.Endpoints))
	case sliceUpdate:
		if _, err := slices.Update(ctx, want, metav1.UpdateOptions{FieldManager: AgentName}); err != nil {
			return fmt.Errorf("update resolver slice %s: %w", name, err)
		}
		logger.V(2).Info("Updated resolver slice", "endpointSlice", klog.KRef(es.Namespace, name), "endpoints", len(want.Endpoints))
	case sliceReplace:
		if err := r.deleteResolverSlice(ctx, es.Namespace, es.Spec.Service); err != nil {
			return err
		}
	}
	return err
}

// sliceChange is what a resolver slice needs (desiredResolverSlice).
type sliceChange int

const (
	sliceKeep   sliceChange = iota // it is as wanted, or must not be touched
	sliceCreate                    // there is none
	sliceUpdate                    // it differs from the one wanted
	// sliceReplace: its addressType, which is immutable, is not IPv4;
	// it is deleted, and the next sync creates it again.
	sliceReplace
)

// desiredResolverSlice is the resolver slice of public that es wants,
// given existing (nil when there is none), and what existing needs to
// become it. The slice has one endpoint per ready resolver pod, and ports
// from resolverSlicePorts. f, when set, is the fence to record on it. An
// error says why the slice is not written (another object controls it,
// or it is replaced).
func desiredResolverSlice(es *elastiv1alpha1.ElastiService, public *corev1.Service, existing *discoveryv1.EndpointSlice,
	endpoints []discoveryv1.Endpoint, ports []discoveryv1.EndpointPort, f *fence) (*discoveryv1.EndpointSlice, sliceChange, error) {
	name := names.ResolverSlice(public.Name)
	if endpoints == nil {
		endpoints = []discoveryv1.Endpoint{}
	}
	wantLabels := map[string]string{
		discoveryv1.LabelServiceName: public.Name,
		discoveryv1.LabelManagedBy:   ManagedByValue,
	}
	if existing == nil {
		want := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{
				Name:            name,
				Namespace:       es.Namespace,
				Labels:          wantLabels,
				Annotations:     map[string]string{},
				OwnerReferences: []metav1.OwnerReference{ownerRef(es)},
			},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   endpoints,
			Ports:       ports,
		}
		if f != nil {
			f.annotate(want.Annotations)
		}
		return want, sliceCreate, nil
	}
	if controlledByOther(existing, es) {
		return nil, sliceKeep, fmt.Errorf("resolver slice %s is controlled by another object; not adopting it", name)
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
	want := existing.DeepCopy()
	if want.Labels == nil {
		want.Labels = map[string]string{}
	}
	maps.Copy(want.Labels, wantLabels)
	if f != nil {
		if want.Annotations == nil {
			want.Annotations = map[string]string{}
		}
		f.annotate(want.Annotations)
	}
	if !hasOwnerRef(want.OwnerReferences, es) {
		want.OwnerReferences = append(want.OwnerReferences, ownerRef(es))
	}
	want.Endpoints, want.Ports = endpoints, ports
	fenceOK := true
	for _, k := range []string{AnnotationFencedEndpoints, AnnotationFencedAt} {
		fenceOK = fenceOK && (f == nil || existing.Annotations[k] == want.Annotations[k])
	}
	switch {
	case existing.AddressType != discoveryv1.AddressTypeIPv4:
		return nil, sliceReplace, fmt.Errorf("replaced resolver slice %s with a non-IPv4 address type", name)
	case fenceOK && maps.Equal(existing.Labels, want.Labels) && hasOwnerRef(existing.OwnerReferences, es) &&
		sameEndpoints(existing.Endpoints, endpoints) && equality.Semantic.DeepEqual(existing.Ports, ports):
		return existing, sliceKeep, nil
	}
	return want, sliceUpdate, nil
}

// resolverSlicePorts lists one slice port per TCP port of the public
// Service, named like it: its own resolver port when routes assigns one
// (per-port routing, keeping the port's appProtocol), else the shared
// proxy port (Host routing).
func resolverSlicePorts(public *corev1.Service, routes map[int32]int32, proxyPort int32) []discoveryv1.EndpointPort {
	var ports []discoveryv1.EndpointPort
	for _, p := range public.Spec.Ports {
		if p.Protocol != "" && p.Protocol != corev1.ProtocolTCP {
			continue
		}
		port := discoveryv1.EndpointPort{
			Name:     ptr.To(p.Name),
			Port:     ptr.To(proxyPort),
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

func (r *resolverFront) resolverSliceExists(namespace, service string) bool {
	_, err := r.slices.EndpointSlices(namespace).Get(names.ResolverSlice(service))
	return err == nil
}

// deleteResolverSlice deletes the resolver slice of namespace/service.
func (r *resolverFront) deleteResolverSlice(ctx context.Context, namespace, service string) error {
	name := names.ResolverSlice(service)
	if !r.resolverSliceExists(namespace, service) {
		return nil
	}
	err := r.kubeClient.DiscoveryV1().EndpointSlices(namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete resolver slice %s: %w", name, err)
	}
	klog.FromContext(ctx).V(2).Info("Deleted resolver slice", "endpointSlice", klog.KRef(namespace, name))
	return nil
}

// frontedWithoutPods names the Services of namespace, among services, that
// only the resolver serves: each has a resolver slice and no ready
// endpoint of its own. Removing the slice would leave it dark.
func (r *resolverFront) frontedWithoutPods(namespace string, services []string) []string {
	var out []string
	for _, name := range services {
		if !r.resolverSliceExists(namespace, name) {
			continue
		}
		if _, err := r.services.Services(namespace).Get(name); err != nil {
			continue
		}
		if !r.hasReadyEndpoints(namespace, name, fence{}) {
			out = append(out, name)
		}
	}
	return out
}
