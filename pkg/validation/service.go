package validation

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/elasti-dev/elasti/pkg/endpointready"
)

// Reasons FrontableService refuses a Service with.
const (
	// ReasonServiceHasNoSelector: the Service has no selector.
	ReasonServiceHasNoSelector = "ServiceHasNoSelector"
	// ReasonServiceNotSelectable: the Service is of type ExternalName,
	// which the EndpointSlice controller keeps no slices for even with a
	// selector.
	ReasonServiceNotSelectable = "ServiceNotSelectable"
)

// FrontableService returns why the operator must not front svc, as a
// condition reason and message, or two empty strings when it may. It may
// only front a Service whose EndpointSlices Kubernetes keeps
// (endpointready.Unkept): the resolver forwards only to those, and for
// any other Service the slices are whatever an EndpointSlice writer of
// the namespace made them, so fronting it would hold traffic the resolver
// can never forward, and scale a workload on traffic that never reaches it.
func FrontableService(svc *corev1.Service) (reason, message string) {
	why := endpointready.Unkept(svc)
	switch {
	case why == "":
		return "", ""
	case svc.Spec.Type == corev1.ServiceTypeExternalName:
		reason = ReasonServiceNotSelectable
	default:
		reason = ReasonServiceHasNoSelector
	}
	return reason, fmt.Sprintf("Service %q %s; an ElastiService needs a Service that selects the pods of its scale target, whose endpoints Kubernetes keeps", shorten(svc.Name), why)
}
