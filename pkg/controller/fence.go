package controller

import (
	"slices"
	"strings"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/elasti-dev/elasti/pkg/endpointready"
	"github.com/elasti-dev/elasti/pkg/names"
)

// Annotations of the resolver slice that record its fence.
const (
	AnnotationFencedEndpoints = "elasti.truefoundry.com/fenced-endpoints"
	AnnotationFencedAt        = "elasti.truefoundry.com/fenced-at"
)

const (
	// fenceTimeout bounds how long fenced endpoints are disbelieved. The
	// EndpointSlice controller marks a deleted pod's endpoint terminating
	// within seconds even on a loaded cluster; a fenced pod still ready
	// after this long was never deleted (the target went to zero and back
	// before its ReplicaSet acted), so it may serve again.
	fenceTimeout = 30 * time.Second
	// maxFenced caps the record, so an annotation stays small whatever the
	// target's size; a fence that overflows holds the first ones seen.
	maxFenced = 1000
)

// fence is the set of endpoints that served the public Service when its
// target was seen at zero. Those pods are on their way out, but the
// EndpointSlice controller may still list them as ready for a while after
// the scale write; a wake in that window must not take them for the woken
// pods and remove the resolver, or the Service goes dark when they go. The
// fence lives on the resolver slice, so a new leader knows it too, and it
// goes with the slice.
type fence struct {
	keys []string // sorted
	at   time.Time
}

// fenceOf reads slice's fence; a missing, unreadable or expired one is empty.
func fenceOf(slice *discoveryv1.EndpointSlice, now time.Time) fence {
	if slice == nil || slice.Annotations[AnnotationFencedEndpoints] == "" {
		return fence{}
	}
	at, err := time.Parse(time.RFC3339, slice.Annotations[AnnotationFencedAt])
	if err != nil || now.Sub(at) >= fenceTimeout {
		return fence{}
	}
	return fence{keys: strings.Split(slice.Annotations[AnnotationFencedEndpoints], ","), at: at}
}

func (f fence) has(key string) bool {
	_, found := slices.BinarySearch(f.keys, key)
	return found
}

// remaining is how long the fence still holds.
func (f fence) remaining(now time.Time) time.Duration {
	if len(f.keys) == 0 {
		return 0
	}
	return max(f.at.Add(fenceTimeout).Sub(now), 0)
}

// with adds keys; a fence that was empty starts now.
func (f fence) with(keys []string, now time.Time) fence {
	if len(keys) == 0 {
		return f
	}
	out := fence{keys: slices.Clone(f.keys), at: f.at}
	if len(out.keys) == 0 {
		out.at = now
	}
	for _, k := range keys {
		if len(out.keys) >= maxFenced {
			break
		}
		if i, found := slices.BinarySearch(out.keys, k); !found {
			out.keys = slices.Insert(out.keys, i, k)
		}
	}
	return out
}

// annotate writes the fence onto annotations, or removes it.
func (f fence) annotate(annotations map[string]string) {
	if len(f.keys) == 0 {
		delete(annotations, AnnotationFencedEndpoints)
		delete(annotations, AnnotationFencedAt)
		return
	}
	annotations[AnnotationFencedEndpoints] = strings.Join(f.keys, ",")
	annotations[AnnotationFencedAt] = f.at.UTC().Format(time.RFC3339)
}

// endpointKey names an endpoint across slice rewrites: its pod's UID, which
// a StatefulSet's new pod of the same name does not share, else its first
// address.
func endpointKey(ep discoveryv1.Endpoint) string {
	if ep.TargetRef != nil && ep.TargetRef.UID != "" {
		return string(ep.TargetRef.UID)
	}
	if len(ep.Addresses) > 0 {
		return ep.Addresses[0]
	}
	return ""
}

// servingEndpoints calls each for every serving endpoint of the public
// Service's own slices (not the resolver's).
func (r *resolverFront) servingEndpoints(namespace, service string, each func(discoveryv1.Endpoint)) {
	objs, err := r.sliceIndexer.ByIndex(indexByService, namespace+"/"+service)
	if err != nil {
		return
	}
	resolverSlice := names.ResolverSlice(service)
	for _, obj := range objs {
		slice := obj.(*discoveryv1.EndpointSlice)
		if slice.Name == resolverSlice || slice.Labels[discoveryv1.LabelManagedBy] == ManagedByValue {
			continue
		}
		for _, ep := range slice.Endpoints {
			if endpointready.Serving(ep) {
				each(ep)
			}
		}
	}
}

// servingKeys lists the keys of the public Service's serving endpoints.
func (r *resolverFront) servingKeys(namespace, service string) []string {
	var keys []string
	r.servingEndpoints(namespace, service, func(ep discoveryv1.Endpoint) { keys = append(keys, endpointKey(ep)) })
	return keys
}
