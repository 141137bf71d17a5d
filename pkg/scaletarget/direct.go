package scaletarget

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

// Direct reads and scales targets straight through the API, with no
// informer caches: for a one-shot client such as kubectl elasti. It is a
// Writer, so such a client wakes a target through Wake exactly as the
// operator does. A Rollout target needs no watched CRD here: without Argo
// Rollouts the apiserver answers NotFound.
type Direct struct {
	kube    kubernetes.Interface
	dynamic dynamic.Interface
	keda    *Scaler
}

// NewDirect returns a Direct that uses kube and dyn.
func NewDirect(kube kubernetes.Interface, dyn dynamic.Interface) *Direct {
	return &Direct{kube: kube, dynamic: dyn, keda: &Scaler{kube: kube, dynamic: dyn}}
}

// Scale sets ref's replicas through its scale subresource.
func (d *Direct) Scale(ctx context.Context, ref Ref, replicas int32) error {
	return patchScale(ctx, d.kube, d.dynamic, ref, replicas)
}

// SetKEDAPaused pauses a ScaledObject at zero replicas, or resumes it.
func (d *Direct) SetKEDAPaused(ctx context.Context, namespace, name string, paused bool) error {
	return d.keda.SetKEDAPaused(ctx, namespace, name, paused)
}

// Replicas reads spec.replicas of ref's scale subresource. Its errors are
// the API's, unwrapped, so callers can tell NotFound and Forbidden apart.
func (d *Direct) Replicas(ctx context.Context, ref Ref) (int32, error) {
	opts := metav1.GetOptions{}
	switch ref.Kind {
	case elastiv1alpha1.KindDeployment:
		s, err := d.kube.AppsV1().Deployments(ref.Namespace).GetScale(ctx, ref.Name, opts)
		if err != nil {
			return 0, err
		}
		return s.Spec.Replicas, nil
	case elastiv1alpha1.KindStatefulSet:
		s, err := d.kube.AppsV1().StatefulSets(ref.Namespace).GetScale(ctx, ref.Name, opts)
		if err != nil {
			return 0, err
		}
		return s.Spec.Replicas, nil
	case elastiv1alpha1.KindRollout:
		s, err := d.dynamic.Resource(RolloutGVR).Namespace(ref.Namespace).Get(ctx, ref.Name, opts, "scale")
		if err != nil {
			return 0, err
		}
		r, _, err := unstructured.NestedInt64(s.Object, "spec", "replicas")
		if err != nil {
			return 0, fmt.Errorf("rollout %s/%s scale: spec.replicas: %w", ref.Namespace, ref.Name, err)
		}
		return int32(r), nil
	}
	return 0, fmt.Errorf("%w: %q", ErrUnsupportedKind, ref.Kind)
}
