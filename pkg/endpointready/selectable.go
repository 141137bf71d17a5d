package endpointready

import corev1 "k8s.io/api/core/v1"

// Unkept says why Kubernetes' EndpointSlice controller keeps no slices for
// svc, or "" when it keeps them. It keeps them only for a Service that has
// a selector and is not of type ExternalName; for any other Service it
// stops at once, creating, correcting and deleting nothing, so the slices
// it wrote before stay behind with their genuine controller reference, and
// whoever may write EndpointSlices in the namespace can point them
// anywhere. For a Service it does keep, it puts back any slice it owns
// that someone else edits, and deletes the ones it owns but did not
// want, so what such a slice lists is, give or take the moment that takes,
// the pods the selector matches.
//
// This is the rule the resolver forwards by and the operator fronts by: a
// Service's spec can only be changed by those who may write Services, so
// unlike an EndpointSlice's managed-by label or owner reference, which an
// EndpointSlice writer sets at will, it cannot be forged from the slice.
func Unkept(svc *corev1.Service) string {
	switch {
	case svc.Spec.Type == corev1.ServiceTypeExternalName:
		return "is of type ExternalName"
	case len(svc.Spec.Selector) == 0:
		return "has no selector"
	}
	return ""
}
