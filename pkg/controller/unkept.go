package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/endpointready"
)

// leaveUnkeptService decides, for a Service refused by the selector checks
// (fronted: its resolver slice exists, as reconcile gathered it),
// whether the resolver stays in front of it, and says which in v's
// message. It acts only on a Service whose endpoints Kubernetes no longer
// keeps (endpointready.Unkept) and that this ElastiService fronted before:
// its selector was removed, or it became ExternalName, after proxy mode.
//
// The resolver forwards nothing for such a Service (its slices are
// whatever an EndpointSlice writer made them), so in front of it the
// resolver only answers 503 with the reason. Taking it out hands the
// Service to kube-proxy and its remaining slices, which clients then
// reach with their own source address, as they would without elasti. That
// is no darker only when those slices list a serving endpoint: then the
// resolver leaves, with a ResolverWithdrawn event. With none, leaving
// would turn an explained 503 into a connection refused, so it stays, and
// the condition says why. Either way nothing is scaled, and the Service's
// next change brings the key back.
func (r *resolverFront) leaveUnkeptService(ctx context.Context, es *elastiv1alpha1.ElastiService, svc *corev1.Service, fronted bool, v *notReady) error {
	if svc == nil || endpointready.Unkept(svc) == "" || !fronted {
		return nil
	}
	if !r.hasReadyEndpoints(es.Namespace, svc.Name, fence{}) {
		v.message += "; the resolver stays in front and answers 503, since none of the Service's remaining EndpointSlices lists a serving endpoint"
		return nil
	}
	if err := r.deleteResolverSlice(ctx, es.Namespace, svc.Name); err != nil {
		return err
	}
	v.message += "; the resolver left the front, and the Service's remaining EndpointSlices, which list serving endpoints, take its traffic"
	r.recorder.Event(es, corev1.EventTypeWarning, ReasonResolverWithdrawn, v.message)
	return nil
}
