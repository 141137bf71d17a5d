package clusterview

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/scaletarget"
)

// TrimForCache is the informers' transform: it keeps only the fields the
// resolver reads of each object. The resolver watches every Service and
// EndpointSlice of the cluster, and every ElastiService, so what it keeps
// of each is multiplied by the size of the cluster; managed fields,
// annotations (but the ElastiService's waiting-page switch), large selectors, topology and the ElastiService's
// triggers and conditions are never read here.
func TrimForCache(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Service:
		return &corev1.Service{
			ObjectMeta: scaletarget.Identity(o.ObjectMeta),
			Spec: corev1.ServiceSpec{ClusterIPs: o.Spec.ClusterIPs, Ports: o.Spec.Ports,
				Type: o.Spec.Type, Selector: trimSelector(o.Spec.Selector)},
		}, nil
	case *discoveryv1.EndpointSlice:
		meta := scaletarget.Identity(o.ObjectMeta)
		for _, k := range []string{discoveryv1.LabelServiceName, discoveryv1.LabelManagedBy} {
			if v, ok := o.Labels[k]; ok {
				if meta.Labels == nil {
					meta.Labels = make(map[string]string, 2)
				}
				meta.Labels[k] = v
			}
		}
		// The controller reference is what podSlicesOf's and
		// resolverSliceOf's callers trust a slice by.
		if ref := metav1.GetControllerOfNoCopy(o); ref != nil {
			meta.OwnerReferences = []metav1.OwnerReference{*ref}
		}
		trimmed := &discoveryv1.EndpointSlice{ObjectMeta: meta, AddressType: o.AddressType}
		if podSlicesOf(o) != "" {
			trimmed.Ports = o.Ports
			trimmed.Endpoints = make([]discoveryv1.Endpoint, len(o.Endpoints))
			for i, ep := range o.Endpoints {
				trimmed.Endpoints[i] = discoveryv1.Endpoint{Addresses: ep.Addresses, Conditions: ep.Conditions}
				// Every endpoint keeps the pod it names: direct probing
				// reads a not-ready one's pod (package directprobe), and past the
				// pod view's bounds a Ready one's pod is read to vouch for
				// its address (vouchByName). Trimmed away, no Ready address
				// past the bounds was ever vouched for, and its holds waited
				// until their clients gave up.
				if ep.TargetRef != nil && ep.TargetRef.Kind == "Pod" {
					trimmed.Endpoints[i].TargetRef = &corev1.ObjectReference{Kind: "Pod",
						Namespace: ep.TargetRef.Namespace, Name: ep.TargetRef.Name, UID: ep.TargetRef.UID}
				}
			}
		}
		return trimmed, nil
	case *elastiv1alpha1.ElastiService:
		meta := scaletarget.Identity(o.ObjectMeta)
		meta.CreationTimestamp = o.CreationTimestamp // the older claim on a resolver port wins
		return &elastiv1alpha1.ElastiService{
			TypeMeta:   o.TypeMeta,
			ObjectMeta: meta,
			Spec: elastiv1alpha1.ElastiServiceSpec{Service: o.Spec.Service, ProbeResponse: o.Spec.ProbeResponse,
				WaitingPage: o.Spec.WaitingPage, Hold: trimHold(o.Spec.Hold)},
			Status: elastiv1alpha1.ElastiServiceStatus{ResolverPorts: o.Status.ResolverPorts, Conditions: waitingConditions(o.Status.Conditions),
				RecentColdStarts: latestColdStarts(o.Status.RecentColdStarts)},
		}, nil
	}
	return obj, nil
}

// oversizedHoldTimeout stands for every spec.hold.timeout longer than the
// CRD's schema allows (an older CRD may be installed): it parses as no
// duration, so the resolver's flag decides, as the operator's condition
// says.
const oversizedHoldTimeout = "oversized"

// trimHold keeps h with its timeout bounded to MaxHoldTimeoutLength.
func trimHold(h *elastiv1alpha1.Hold) *elastiv1alpha1.Hold {
	if h == nil || len(h.Timeout) <= elastiv1alpha1.MaxHoldTimeoutLength {
		return h
	}
	return &elastiv1alpha1.Hold{Timeout: oversizedHoldTimeout, MaxRequests: h.MaxRequests}
}

// latestColdStarts keeps the last MaxRecentColdStarts of a status's
// recentColdStarts, as many as the CRD's schema lets the operator write:
// the resolver's Retry-After past a Service's hold bounds is their median.
// An older CRD without the bound could hold any number.
func latestColdStarts(ds []metav1.Duration) []metav1.Duration {
	return ds[max(0, len(ds)-elastiv1alpha1.MaxRecentColdStarts):]
}

// maxCachedSelector bounds the selector the cache keeps of a Service, in
// bytes of its keys and values: the pod view watches the pods it selects
// (podview.go). App selectors are a few labels; a larger one is kept as
// oversizedSelector, which says only that the Service has one
// (endpointready.Unkept), and its holds go on the slices alone.
const maxCachedSelector = 512

// oversizedSelector stands for every selector past maxCachedSelector:
// one shared map, never written.
var oversizedSelector = map[string]string{"": ""}

func trimSelector(sel map[string]string) map[string]string {
	if len(sel) == 0 {
		return nil
	}
	size := 0
	for k, v := range sel {
		size += len(k) + len(v)
	}
	if size > maxCachedSelector {
		return oversizedSelector
	}
	return sel
}

// waitingConditions keeps of an ElastiService's conditions only a False
// DependenciesReady of a wake that waits on a dependency: its message is
// what a hold that times out tells the client (see NamedIndex.WaitingOn).
func waitingConditions(conds []metav1.Condition) []metav1.Condition {
	for _, c := range conds {
		if c.Type == elastiv1alpha1.ConditionDependenciesReady && c.Status == metav1.ConditionFalse &&
			(c.Reason == elastiv1alpha1.ReasonDependencyNotReady || c.Reason == elastiv1alpha1.ReasonDependencyMissing) {
			return []metav1.Condition{{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message}}
		}
	}
	return nil
}
