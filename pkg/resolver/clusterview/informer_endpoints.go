package clusterview

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/elasti-dev/elasti/pkg/endpointready"
	"github.com/elasti-dev/elasti/pkg/tombstone"
)

// podSlicesIndex indexes the EndpointSlices that the EndpointSlice
// controller keeps for a Service by "<namespace>/<kubernetes.io/service-name>";
// see podSlicesOf.
const podSlicesIndex = "github.com/elasti-dev/elasti/pkg/resolver:pod-slices"

// clusterIPIndex indexes Services by each of their ClusterIPs.
const clusterIPIndex = "github.com/elasti-dev/elasti/pkg/resolver:cluster-ip"

func indexByClusterIP(obj any) ([]string, error) {
	s, ok := obj.(*corev1.Service)
	if !ok {
		return nil, nil
	}
	var ips []string
	for _, ip := range s.Spec.ClusterIPs {
		if ip != "" && ip != corev1.ClusterIPNone {
			ips = append(ips, ip)
		}
	}
	return ips, nil
}

// InformerEndpoints is the EndpointSource of a running resolver: the
// Service and the EndpointSlices the cluster keeps for its pods come from
// shared informers, and every informer event reaches the requests waiting on
// that Service.
//
// It reads the Service's own controller-managed slices, not those of the
// private Service: they list the same pods (the private Service copies the
// selector), and they exist from the moment the Service does, so a wake
// never waits for the operator to create a Service, which at a fleet's
// scale can take seconds while the apiserver allocates its ClusterIP.
type InformerEndpoints struct {
	services corelisters.ServiceLister
	// byClusterIP indexes the Services by ClusterIP.
	byClusterIP cache.Indexer
	slices      cache.Indexer
	// controllers vouches for resolver slices: see SliceControllers.
	controllers SliceControllers
	// drains remembers the Services whose resolver slice just went.
	drains *drains
	synced []cache.InformerSynced
	b      *Broadcaster[ServiceRef]
	logger klog.Logger
}

// NewInformerEndpoints registers an index and event handlers on the shared
// Service and EndpointSlice informers. Call it before the informer factory
// is started. ctx only carries the logger. controllers vouches for the
// resolver slices' ElastiServices (the command's NamedIndex). drain is
// Config.FrontDrain: how long the resolver stays in front of a Service
// after its last resolver slice goes.
func NewInformerEndpoints(ctx context.Context, services coreinformers.ServiceInformer, endpointSlices discoveryinformers.EndpointSliceInformer,
	controllers SliceControllers, drain time.Duration) (*InformerEndpoints, error) {
	e := &InformerEndpoints{
		services:    services.Lister(),
		byClusterIP: services.Informer().GetIndexer(),
		slices:      endpointSlices.Informer().GetIndexer(),
		controllers: controllers,
		drains:      newDrains(drain, clock.RealClock{}),
		b:           NewBroadcaster[ServiceRef](),
		logger:      klog.FromContext(ctx).WithName("endpoints"),
	}
	for name, index := range map[string]cache.IndexFunc{podSlicesIndex: indexByPodSlicesOf, resolverSlicesIndex: indexByResolverSliceOf} {
		if _, exists := e.slices.GetIndexers()[name]; !exists {
			if err := endpointSlices.Informer().AddIndexers(cache.Indexers{name: index}); err != nil {
				return nil, fmt.Errorf("adding EndpointSlice index: %w", err)
			}
		}
	}

	if _, exists := e.byClusterIP.GetIndexers()[clusterIPIndex]; !exists {
		if err := services.Informer().AddIndexers(cache.Indexers{clusterIPIndex: indexByClusterIP}); err != nil {
			return nil, fmt.Errorf("adding Service index: %w", err)
		}
	}

	sliceReg, err := endpointSlices.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    e.sliceChanged,
		UpdateFunc: func(old, cur any) { e.sliceChanged(old); e.sliceChanged(cur) },
		DeleteFunc: e.sliceChanged,
	})
	if err != nil {
		return nil, fmt.Errorf("adding EndpointSlice handler: %w", err)
	}
	svcReg, err := services.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    e.serviceChanged,
		UpdateFunc: func(_, cur any) { e.serviceChanged(cur) },
		DeleteFunc: e.serviceChanged,
	})
	if err != nil {
		return nil, fmt.Errorf("adding Service handler: %w", err)
	}
	e.synced = []cache.InformerSynced{
		endpointSlices.Informer().HasSynced, services.Informer().HasSynced,
		sliceReg.HasSynced, svcReg.HasSynced,
	}
	return e, nil
}

// HasSynced reports whether both informers and their handlers have synced.
func (e *InformerEndpoints) HasSynced() bool {
	return AllSynced(e.synced)
}

// Lookup implements EndpointSource. It only reads the informers' caches.
func (e *InformerEndpoints) Lookup(svc ServiceRef, hostPort string) (Backends, error) {
	return e.resolve(svc, hostPort)
}

// Front implements FrontSource: the resolver is in front of svc while a
// resolver slice for it exists, and for the drain after the last one goes.
// It only reads: a Host that names no fronted Service leaves nothing
// behind.
func (e *InformerEndpoints) Front(svc ServiceRef) bool { return e.inFront(svc) }

// Watch implements EndpointSource. Informers update their store before
// they call handlers, so a caller that watches and then reads either sees
// a change or is woken by it.
func (e *InformerEndpoints) Watch(svc ServiceRef) (<-chan struct{}, func()) { return e.b.Watch(svc) }

// Watched is the number of Services watched now (Watch): one per Service
// something waits on, never one per name a client sent, which the bounds
// tests check.
func (e *InformerEndpoints) Watched() int { return e.b.watching() }

func (e *InformerEndpoints) inFront(svc ServiceRef) bool {
	return e.hasResolverSlice(svc) || e.drains.draining(svc)
}

// hasResolverSlice reports whether a resolver slice for svc exists whose
// controller the ElastiServices vouch for: the managed-by label and an
// owner reference are the slice writer's to set, so neither alone proves
// the operator wrote the slice.
func (e *InformerEndpoints) hasResolverSlice(svc ServiceRef) bool {
	objs, err := e.slices.ByIndex(resolverSlicesIndex, svc.Namespace+"/"+svc.Name)
	if err != nil {
		return false
	}
	for _, obj := range objs {
		if s, ok := obj.(*discoveryv1.EndpointSlice); ok && e.vouched(s, svc) {
			return true
		}
	}
	return false
}

// vouched reports whether the controller of s, a resolver slice for svc,
// is an ElastiService that vouches for it (SliceControllers).
func (e *InformerEndpoints) vouched(s *discoveryv1.EndpointSlice, svc ServiceRef) bool {
	ref := metav1.GetControllerOfNoCopy(s)
	return ref != nil && e.controllers.Controls(*ref, svc)
}

// ServiceForClusterIP implements ClusterIPIndex.
func (e *InformerEndpoints) ServiceForClusterIP(ip string) (ServiceRef, bool) {
	objs, err := e.byClusterIP.ByIndex(clusterIPIndex, ip)
	if err != nil {
		return ServiceRef{}, false
	}
	for _, o := range objs {
		if s, ok := o.(*corev1.Service); ok {
			return ServiceRef{Namespace: s.Namespace, Name: s.Name}, true
		}
	}
	return ServiceRef{}, false
}

func (e *InformerEndpoints) resolve(svc ServiceRef, hostPort string) (Backends, error) {
	pub, err := e.services.Services(svc.Namespace).Get(svc.Name)
	if apierrors.IsNotFound(err) {
		return Backends{}, fmt.Errorf("%w: %s", ErrServiceNotFound, svc)
	}
	if err != nil {
		return Backends{}, err
	}
	// The slices of a Service Kubernetes no longer keeps are whatever an
	// EndpointSlice writer of the namespace made them, owner reference
	// and managed-by label included (see endpointready.Unkept): forwarding
	// there would reach any address with the resolver's own source.
	if why := endpointready.Unkept(pub); why != "" {
		return Backends{}, fmt.Errorf("%w: %s %s", ErrServiceNotSelectable, svc, why)
	}
	objs, err := e.slices.ByIndex(podSlicesIndex, svc.Namespace+"/"+svc.Name)
	if err != nil {
		return Backends{}, err
	}
	list := make([]*discoveryv1.EndpointSlice, 0, len(objs))
	for _, o := range objs {
		if s, ok := o.(*discoveryv1.EndpointSlice); ok && controlledBy(s, pub) {
			list = append(list, s)
		}
	}
	return ResolveBackends(pub, list, hostPort)
}

// podSlicesOf returns the Service whose pods s lists, or "" when s is not
// one of the EndpointSlice controller's. Slices written by anyone else are
// ignored: the operator's own slice to the resolver (forwarding there would
// loop), a selectorless Service's manual Endpoints mirrored into slices by
// endpointslicemirroring-controller.k8s.io, or a hand-made slice, which
// could otherwise make the resolver proxy to arbitrary addresses.
func podSlicesOf(s *discoveryv1.EndpointSlice) string {
	if s.Labels[discoveryv1.LabelManagedBy] != endpointSliceController {
		return ""
	}
	return s.Labels[discoveryv1.LabelServiceName]
}

// controlledBy reports whether the Service svc controls s, as it does the
// slices the EndpointSlice controller keeps for it. The managed-by label
// alone is no proof: anyone who may write EndpointSlices in a namespace
// can set it, and the owner reference names this very Service object.
func controlledBy(s *discoveryv1.EndpointSlice, svc *corev1.Service) bool {
	ref := metav1.GetControllerOfNoCopy(s)
	return ref != nil && ref.Kind == "Service" && ref.APIVersion == "v1" && ref.UID == svc.UID
}

func indexByPodSlicesOf(obj any) ([]string, error) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return nil, nil
	}
	name := podSlicesOf(s)
	if name == "" {
		return nil, nil
	}
	return []string{s.Namespace + "/" + name}, nil
}

func (e *InformerEndpoints) sliceChanged(obj any) {
	s, ok := tombstone.Object[*discoveryv1.EndpointSlice](obj)
	if !ok {
		return
	}
	if name := resolverSliceOf(s); name != "" {
		e.resolverSliceChanged(s, ServiceRef{s.Namespace, name})
		return
	}
	name := podSlicesOf(s)
	if name == "" {
		return
	}
	e.logger.V(4).Info("EndpointSlice changed", "endpointSlice", klog.KObj(s), "service", klog.KRef(s.Namespace, name))
	// Broadcasting to a key nobody watches is a map lookup.
	e.b.Broadcast(ServiceRef{s.Namespace, name})
}

// resolverSliceChanged follows the resolver slices of svc; s is the one
// that changed, as it was before the change or after it (an update
// calls it for both). Informers update their store before they call
// handlers, so when s was vouched for and none is after the change, the
// resolver just left the front of svc: the drain starts. A slice nobody
// vouches for starts none, so a forged one cannot front a Service for a
// drain either.
func (e *InformerEndpoints) resolverSliceChanged(s *discoveryv1.EndpointSlice, svc ServiceRef) {
	if e.vouched(s, svc) && !e.hasResolverSlice(svc) {
		e.logger.V(4).Info("Resolver left the front of the service; draining", "service", svc.KRef(), "drain", e.drains.drain)
		e.drains.leave(svc)
	}
	e.b.Broadcast(svc)
}

func (e *InformerEndpoints) serviceChanged(obj any) {
	if s, ok := tombstone.Object[*corev1.Service](obj); ok {
		e.b.Broadcast(ServiceRef{s.Namespace, s.Name})
	}
}
