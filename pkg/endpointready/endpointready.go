// Package endpointready holds the rules the operator and the resolver
// share for an EndpointSlice endpoint that can take traffic: whether it
// serves (Serving), and whether Kubernetes keeps its Service's slices at
// all (Unkept).
package endpointready

import discoveryv1 "k8s.io/api/discovery/v1"

// Serving is kube-proxy's rule for a ready endpoint: ready unset or true,
// and not terminating.
func Serving(ep discoveryv1.Endpoint) bool {
	c := ep.Conditions
	if c.Ready != nil && !*c.Ready {
		return false
	}
	return c.Terminating == nil || !*c.Terminating
}
