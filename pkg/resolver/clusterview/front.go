package clusterview

import (
	"context"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/utils/clock"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/names"
)

// FrontSource tells whether the resolver is in front of a Service: whether
// the operator's resolver EndpointSlice points the Service at the resolver.
// The resolver forwards only for such a Service. Without the check any pod
// could reach any Service's pods through the resolver, by Host or on a
// resolver port, around the NetworkPolicies that guard them.
type FrontSource interface {
	// Front reports whether the resolver is in front of svc. It keeps no
	// state: svc comes from a client's Host. A caller that waits for a
	// change watches through EndpointSource.Watch.
	Front(svc ServiceRef) bool
}

// SliceControllers vouches for the controller of a resolver slice. A
// slice's labels and owner references are whatever its writer set, and
// anyone who may write EndpointSlices in a namespace may write them; the
// resolver fronts a Service only for a slice whose controller is an
// ElastiService of the Service's namespace it has cached whole, with that
// name and UID. An ElastiService of a namespace the resolver does not
// serve (Config.WatchNamespaces) is cached without its spec, and vouches
// for nothing.
type SliceControllers interface {
	Controls(ref metav1.OwnerReference, svc ServiceRef) bool
}

// DefaultFrontDrain is how long the resolver stays in front of a Service
// after its resolver slice goes (--front-drain): kube-proxy and ingress
// controllers follow a deleted resolver slice a second or two later
// (Traefik throttles its updates to 2 s); 10 s leaves room for a busy
// cluster.
const DefaultFrontDrain = 10 * time.Second

// FrontGrace is how long a request for a Service that an ElastiService
// names, but that the resolver is not in front of, waits for a resolver
// slice before it is answered 404: kube-proxy may route to a slice before
// the resolver's own informer has it.
const FrontGrace = 2 * time.Second

// Namer says whether an ElastiService names a Service; NamedIndex is
// one.
type Namer interface{ Named(ServiceRef) bool }

// AwaitFront reports whether the resolver is in front of svc, so that it
// may forward to it. For a Service named names (one an ElastiService
// names) it waits up to frontGrace for the resolver slice, which
// kube-proxy may have acted on before this resolver's informer saw it.
func AwaitFront(ctx context.Context, eps EndpointSource, named Namer, svc ServiceRef) bool {
	if eps.Front(svc) {
		return true
	}
	// A Service no ElastiService names is answered at once, and only a
	// named one is watched: the names a client sends cannot make the
	// resolver keep state (see EndpointSource).
	if named == nil || !named.Named(svc) {
		return false
	}
	grace := time.NewTimer(FrontGrace)
	defer grace.Stop()
	for {
		changed, stop := eps.Watch(svc)
		// Read after watching, so a change in between is not missed.
		if eps.Front(svc) {
			stop()
			return true
		}
		select {
		case <-changed:
			stop()
		case <-grace.C:
			stop()
			return false
		case <-ctx.Done():
			stop()
			return false
		}
	}
}

// resolverSlicesIndex indexes the operator's resolver slices by
// "<namespace>/<kubernetes.io/service-name>"; see resolverSliceOf.
const resolverSlicesIndex = "github.com/elasti-dev/elasti/pkg/resolver:resolver-slices"

// resolverSliceOf returns the Service s puts the resolver in front of, or
// "" when s is not a resolver slice: one the operator marks as its own and
// an ElastiService controls. A slice is only ever taken for a Service of
// its own namespace, so a slice made by hand can front no other
// namespace's Service.
func resolverSliceOf(s *discoveryv1.EndpointSlice) string {
	if s.Labels[discoveryv1.LabelManagedBy] != names.ResolverSliceManagedBy {
		return ""
	}
	if ref := metav1.GetControllerOfNoCopy(s); ref == nil || !elastiv1alpha1.IsElastiServiceRef(*ref) {
		return ""
	}
	return s.Labels[discoveryv1.LabelServiceName]
}

func indexByResolverSliceOf(obj any) ([]string, error) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return nil, nil
	}
	if name := resolverSliceOf(s); name != "" {
		return []string{s.Namespace + "/" + name}, nil
	}
	return nil, nil
}

// drains remembers the Services the resolver left the front of less than
// the drain ago. The library's expiring map drops each entry when its drain
// ends (on a later leave), so it holds only the Services that switched to
// serve within about the drain.
type drains struct {
	left  *utilcache.Expiring // ServiceRef -> struct{}
	drain time.Duration
}

func newDrains(drain time.Duration, clk clock.Clock) *drains {
	return &drains{left: utilcache.NewExpiringWithClock(clk), drain: drain}
}

// leave records that the resolver left the front of svc now.
func (d *drains) leave(svc ServiceRef) { d.left.Set(svc, struct{}{}, d.drain) }

// draining reports whether the resolver left the front of svc less than
// the drain ago.
func (d *drains) draining(svc ServiceRef) bool {
	_, ok := d.left.Get(svc)
	return ok
}
