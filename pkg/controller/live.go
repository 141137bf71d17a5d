package controller

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

const (
	// maxLiveChecks bounds the pods one sync reads before it gives up on
	// leaving proxy mode for now.
	maxLiveChecks = 10
	// liveRecheck is how soon a Service whose ready endpoints were not
	// trusted is looked at again: what settles it (a pod deleted, a
	// ReplicaSet's status) brings no event the operator watches.
	liveRecheck = 2 * time.Second
)

// canServe reports whether service, a Service es fronts, may leave the
// resolver for its own pods: the target is scaled up and an endpoint
// outside the fence serves. While the resolver slice is still there, that
// endpoint's pod must also stay (podStays): the resolver is only taken
// away for a pod that does, and that pod is returned (the wake's event
// says how long it spent in each stage), nil when none was read.
func (c *Controller) canServe(ctx context.Context, es *elastiv1alpha1.ElastiService, service string, replicas int32,
	resolverSlice *discoveryv1.EndpointSlice, f fence) (bool, *corev1.Pod, error) {
	if replicas == 0 || !c.front.hasReadyEndpoints(es.Namespace, service, f) {
		return false, nil, nil
	}
	if resolverSlice == nil {
		// Nothing to take away: the Service already relies on its pods.
		return true, nil, nil
	}
	pod, err := c.live.liveEndpoint(ctx, es.Namespace, service, f)
	if err == nil && pod == nil {
		c.elastiServiceQueue.AddAfter(es.Key(), liveRecheck)
	}
	return pod != nil, pod, err
}

// liveEndpoint returns the pod of a serving endpoint of the Service
// outside f that stays, nil when none does, asking the apiserver rather
// than trusting the EndpointSlice. An endpoint that names no pod, or a
// pod the operator may not read, counts as staying: its pod is then an
// empty one.
//
// The EndpointSlice and ReplicaSet controllers can be far behind: after an
// apiserver restart their watches back off for tens of seconds, longer
// than a fence holds. A wake then finds the pods of the last scale-down
// listed as ready and no longer fenced, though they are deleted already,
// or still there but about to be deleted by a ReplicaSet that has not yet
// acted on the scale to zero. Leaving proxy for them sends the Service's
// traffic to pods that are gone or going, and leaves it with no endpoint
// at all once the controllers catch up.
func (l *podLiveness) liveEndpoint(ctx context.Context, namespace, service string, f fence) (*corev1.Pod, error) {
	var candidates []discoveryv1.Endpoint
	l.front.servingEndpoints(namespace, service, func(ep discoveryv1.Endpoint) {
		if !f.has(endpointKey(ep)) {
			candidates = append(candidates, ep)
		}
	})
	for i, ep := range candidates {
		if i == maxLiveChecks {
			break
		}
		pod, err := l.podStays(ctx, namespace, ep.TargetRef)
		if pod != nil || err != nil {
			return pod, err
		}
	}
	klog.FromContext(ctx).V(2).Info("No ready endpoint's pod is there to stay; the resolver stays in front",
		"service", klog.KRef(namespace, service), "endpoints", len(candidates))
	return nil, nil
}

// podStays returns the pod ref names when it exists, with the UID ref
// names, is not being deleted, and its controller (ReplicaSet or
// StatefulSet) has acted on its latest spec, which keeps at least one pod:
// then it has already deleted every pod it is going to. It returns nil
// when the pod does not stay.
//
// An endpoint that names no pod cannot be checked and counts, and so does
// everything when the operator may not read pods or their controllers
// (RBAC from before this check): that is how it behaved before. Such a
// pod is returned empty (unread).
func (l *podLiveness) podStays(ctx context.Context, namespace string, ref *corev1.ObjectReference) (*corev1.Pod, error) {
	if ref == nil || ref.Kind != "Pod" || ref.Name == "" {
		return unread(), nil
	}
	if ref.Namespace != "" {
		namespace = ref.Namespace
	}
	pod, err := l.kubeClient.CoreV1().Pods(namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if stays, done, err := l.readOutcome(ctx, err, "pod", namespace, ref.Name); done {
		return staying(stays, unread()), err
	}
	if (ref.UID != "" && pod.UID != ref.UID) || pod.DeletionTimestamp != nil {
		return nil, nil
	}
	owner := metav1.GetControllerOf(pod)
	if owner == nil {
		return pod, nil
	}
	var generation, observed int64
	var replicas int32
	switch {
	case owner.APIVersion == appsv1.SchemeGroupVersion.String() && owner.Kind == "ReplicaSet":
		rs, err := l.kubeClient.AppsV1().ReplicaSets(namespace).Get(ctx, owner.Name, metav1.GetOptions{})
		if stays, done, err := l.readOutcome(ctx, err, "ReplicaSet", namespace, owner.Name); done {
			return staying(stays, pod), err
		}
		generation, observed, replicas = rs.Generation, rs.Status.ObservedGeneration, ptr.Deref(rs.Spec.Replicas, 1)
	case owner.APIVersion == appsv1.SchemeGroupVersion.String() && owner.Kind == "StatefulSet":
		sts, err := l.kubeClient.AppsV1().StatefulSets(namespace).Get(ctx, owner.Name, metav1.GetOptions{})
		if stays, done, err := l.readOutcome(ctx, err, "StatefulSet", namespace, owner.Name); done {
			return staying(stays, pod), err
		}
		generation, observed, replicas = sts.Generation, sts.Status.ObservedGeneration, ptr.Deref(sts.Spec.Replicas, 1)
	default:
		return pod, nil
	}
	return staying(observed >= generation && replicas > 0, pod), nil
}

// unread is the pod of an endpoint that stays without a read of it.
func unread() *corev1.Pod { return &corev1.Pod{} }

// staying is pod when it stays, else nil.
func staying(stays bool, pod *corev1.Pod) *corev1.Pod {
	if !stays {
		return nil
	}
	return pod
}

// readOutcome turns the error of reading kind namespace/name into podStays'
// answer when it decides it (done): gone means the pod does not stay,
// forbidden means trusting the EndpointSlice (logged once), anything else
// is retried.
func (l *podLiveness) readOutcome(ctx context.Context, err error, kind, namespace, name string) (stays, done bool, _ error) {
	switch {
	case err == nil:
		return false, false, nil
	case apierrors.IsNotFound(err):
		return false, true, nil
	case apierrors.IsForbidden(err):
		l.readForbidden.Do(func() {
			klog.FromContext(ctx).Error(err, "Cannot read the pods behind ready endpoints; trusting EndpointSlices alone (grant the operator get on pods and replicasets)")
		})
		return true, true, nil
	default:
		return false, true, fmt.Errorf("read %s %s/%s: %w", kind, namespace, name, err)
	}
}

// hasReadyEndpoints reports whether the public Service has a ready endpoint
// of its own, i.e. one that is not our resolver slice, and that f does not
// fence. Judging from the Service's slices rather than the target's replica
// count means serve mode starts only once traffic can really reach a ready
// pod.
func (r *resolverFront) hasReadyEndpoints(namespace, service string, f fence) bool {
	found := false
	r.servingEndpoints(namespace, service, func(ep discoveryv1.Endpoint) {
		found = found || !f.has(endpointKey(ep))
	})
	return found
}
