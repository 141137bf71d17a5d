// Package scaletarget reads and scales the workloads an ElastiService names.
// Reads come from informer caches so request paths make no API read, with
// a Scaler's own writes read back until the caches show them (ownWrites);
// writes go through the scale subresource, which every supported kind has.
package scaletarget

import (
	"context"
	"errors"
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	autoscalingv2listers "k8s.io/client-go/listers/autoscaling/v2"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

// RolloutGVR is Argo Rollouts' resource.
var RolloutGVR = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "rollouts"}

// RolloutCRDName is the CRD whose presence enables Rollout targets.
const RolloutCRDName = "rollouts.argoproj.io"

// Ref identifies one scale target; Kind is canonical (see ScaleTargetRef.Canonical).
type Ref struct {
	Kind      string
	Namespace string
	Name      string
}

// RefFor returns the target of an ElastiService.
func RefFor(es *elastiv1alpha1.ElastiService) Ref {
	c := es.Spec.ScaleTargetRef.Canonical()
	return Ref{Kind: c.Kind, Namespace: es.Namespace, Name: c.Name}
}

func (r Ref) String() string { return r.Kind + " " + r.Namespace + "/" + r.Name }

// ErrUnsupportedKind is returned for a kind without a scale path.
var ErrUnsupportedKind = errors.New("unsupported scale target kind")

// ErrRolloutsUnavailable is returned for a Rollout target while the Argo
// Rollout CRD is not installed.
var ErrRolloutsUnavailable = errors.New("the Argo Rollouts CRD (rollouts.argoproj.io) is not installed")

// State is what the cache says about a target.
type State struct {
	// Replicas is spec.replicas (desired), defaulting to 1 when unset as the
	// apiserver does.
	Replicas int32
	// Generation is metadata.generation of the cached object: it grows
	// with every spec change, scale writes included, so it tells whether
	// the cache has seen a given write yet.
	Generation int64
	// UID is metadata.uid: an object deleted and created again under the
	// same name starts its generations over, and only the UID tells.
	UID types.UID
	// PodLabels are the labels of the target's pod template
	// (spec.template.metadata.labels; for a Rollout with a workloadRef,
	// those of the Deployment it names). The controller checks that the
	// ElastiService's Service selects them. Shared with the cache: do not
	// mutate.
	PodLabels map[string]string
	// ReadyReplicas is status.readyReplicas: how many of the target's pods
	// are Ready. A dependency of spec.wakeWith is Ready when it reaches
	// the replicas it wants.
	ReadyReplicas int32
}

// Interface is what the idle poller and the scale server use of a Scaler,
// so that their tests can stand in for it.
type Interface interface {
	Get(ref Ref) (State, error)
	Scale(ctx context.Context, ref Ref, replicas int32) error
	KEDAPauser
	HPAReader
}

// Scaler reads targets from caches and scales them.
type Scaler struct {
	kube         kubernetes.Interface
	dynamic      dynamic.Interface
	deployments  cache.Store
	statefulSets cache.Store
	rollouts     *RolloutInformer
	// hpas is the cache of HorizontalPodAutoscalers GoalFor reads through
	// HPA; nil when HPAs are not watched.
	hpas autoscalingv2listers.HorizontalPodAutoscalerLister
	// own lets Get read the Scaler's own writes before the caches show
	// them (see ownWrites).
	own ownWrites
}

// NewScaler wires a Scaler to the Deployment and StatefulSet informer
// caches, which may hold Cached targets or the typed objects, and to the
// HorizontalPodAutoscaler cache wakes read (see GoalFor). rollouts may be
// nil when Rollouts are not watched, hpas when HPAs are not: every HPA
// then reads as Unreadable, and a wake goes by minTargetReplicas alone.
func NewScaler(kube kubernetes.Interface, dyn dynamic.Interface, deployments, statefulSets cache.Store, rollouts *RolloutInformer,
	hpas autoscalingv2listers.HorizontalPodAutoscalerLister) *Scaler {
	return &Scaler{kube: kube, dynamic: dyn, deployments: deployments, statefulSets: statefulSets, rollouts: rollouts, hpas: hpas, own: newOwnWrites()}
}

// Cached is what the operator's informer caches keep of a Deployment or
// StatefulSet (see CacheTarget): metadata, spec.replicas and the pod
// template's labels, all that Scaler.Get and the event handlers read. A
// typed Deployment is over 1 KiB before any of its fields are set, most of
// it the inline pod template, of which only the labels are read.
type Cached struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	// Replicas is spec.replicas as it came; nil means unset.
	Replicas *int32
	// PodLabels is spec.template.metadata.labels, the decoded map itself
	// (no copy, so it costs only what the labels do).
	PodLabels map[string]string
	// ReadyReplicas is status.readyReplicas.
	ReadyReplicas int32
}

// CacheTarget is the Cached form of a Deployment or StatefulSet, keeping
// of meta only what keys it, tells versions apart and shows a deletion;
// other objects are returned as they are.
func CacheTarget(obj any) any {
	var meta *metav1.ObjectMeta
	var replicas *int32
	var podLabels map[string]string
	var kind string
	var ready int32
	switch o := obj.(type) {
	case *appsv1.Deployment:
		meta, replicas, podLabels, kind, ready = &o.ObjectMeta, o.Spec.Replicas, o.Spec.Template.Labels, elastiv1alpha1.KindDeployment, o.Status.ReadyReplicas
	case *appsv1.StatefulSet:
		meta, replicas, podLabels, kind, ready = &o.ObjectMeta, o.Spec.Replicas, o.Spec.Template.Labels, elastiv1alpha1.KindStatefulSet, o.Status.ReadyReplicas
	default:
		return obj
	}
	return &Cached{
		TypeMeta:      metav1.TypeMeta{APIVersion: elastiv1alpha1.APIVersionApps, Kind: kind},
		ObjectMeta:    Identity(*meta),
		Replicas:      replicas,
		PodLabels:     podLabels,
		ReadyReplicas: ready,
	}
}

// Identity is the part of m every object trimmed for a cache keeps: what
// keys it, tells versions apart (resourceVersion, generation) and shows a
// deletion.
func Identity(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:              m.Name,
		Namespace:         m.Namespace,
		UID:               m.UID,
		ResourceVersion:   m.ResourceVersion,
		Generation:        m.Generation,
		DeletionTimestamp: m.DeletionTimestamp,
	}
}

// DeepCopyObject implements runtime.Object.
func (c *Cached) DeepCopyObject() runtime.Object {
	out := &Cached{TypeMeta: c.TypeMeta, ReadyReplicas: c.ReadyReplicas}
	c.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if c.Replicas != nil {
		out.Replicas = ptr.To(*c.Replicas)
	}
	out.PodLabels = maps.Clone(c.PodLabels)
	return out
}

// cachedState reads a Deployment or StatefulSet from its informer cache.
func cachedState(c cache.Store, resource string, ref Ref) (State, error) {
	obj, exists, err := c.GetByKey(ref.Namespace + "/" + ref.Name)
	if err != nil {
		return State{}, err
	}
	if !exists {
		return State{}, apierrors.NewNotFound(appsv1.Resource(resource), ref.Name)
	}
	switch o := obj.(type) {
	case *Cached:
		return State{Replicas: replicasOrDefault(o.Replicas), Generation: o.Generation, UID: o.UID, PodLabels: o.PodLabels, ReadyReplicas: o.ReadyReplicas}, nil
	case *appsv1.Deployment:
		return State{Replicas: replicasOrDefault(o.Spec.Replicas), Generation: o.Generation, UID: o.UID, PodLabels: o.Spec.Template.Labels,
			ReadyReplicas: o.Status.ReadyReplicas}, nil
	case *appsv1.StatefulSet:
		return State{Replicas: replicasOrDefault(o.Spec.Replicas), Generation: o.Generation, UID: o.UID, PodLabels: o.Spec.Template.Labels,
			ReadyReplicas: o.Status.ReadyReplicas}, nil
	}
	return State{}, fmt.Errorf("%s cache holds a %T", resource, obj)
}

// Get returns the cached state of a target, with the replicas of this
// Scaler's own latest write while the cache has not shown it (see
// ownWrites); a missing target is a NotFound API error so callers can use
// apierrors.IsNotFound.
func (s *Scaler) Get(ref Ref) (State, error) {
	state, err := s.cached(ref)
	if err != nil {
		return state, err
	}
	return s.own.apply(ref, state), nil
}

// cached returns what the informer cache says about a target.
func (s *Scaler) cached(ref Ref) (State, error) {
	switch ref.Kind {
	case elastiv1alpha1.KindDeployment:
		return cachedState(s.deployments, "deployment", ref)
	case elastiv1alpha1.KindStatefulSet:
		return cachedState(s.statefulSets, "statefulset", ref)
	case elastiv1alpha1.KindRollout:
		if s.rollouts == nil {
			return State{}, ErrRolloutsUnavailable
		}
		obj, err := s.rollouts.Get(ref.Namespace, ref.Name)
		if err != nil {
			return State{}, err
		}
		replicas, found, err := unstructured.NestedInt64(obj.Object, "spec", "replicas")
		if err != nil {
			return State{}, fmt.Errorf("rollout %s/%s: spec.replicas: %w", ref.Namespace, ref.Name, err)
		}
		if !found {
			replicas = 1
		}
		ready, _, _ := unstructured.NestedInt64(obj.Object, "status", "readyReplicas")
		return State{Replicas: int32(replicas), Generation: obj.GetGeneration(), UID: obj.GetUID(), PodLabels: s.rolloutPodLabels(obj), ReadyReplicas: int32(ready)}, nil
	}
	return State{}, fmt.Errorf("%w: %q", ErrUnsupportedKind, ref.Kind)
}

// rolloutPodLabels returns a Rollout's pod template labels; a Rollout
// with a workloadRef has no template of its own and runs the pods of the
// Deployment it names (Argo's only supported workloadRef kind).
func (s *Scaler) rolloutPodLabels(obj *unstructured.Unstructured) map[string]string {
	if labels, found, _ := unstructured.NestedStringMap(obj.Object, "spec", "template", "metadata", "labels"); found {
		return labels
	}
	kind, _, _ := unstructured.NestedString(obj.Object, "spec", "workloadRef", "kind")
	name, _, _ := unstructured.NestedString(obj.Object, "spec", "workloadRef", "name")
	if kind != elastiv1alpha1.KindDeployment || name == "" {
		return nil
	}
	state, err := cachedState(s.deployments, "deployment", Ref{Kind: kind, Namespace: obj.GetNamespace(), Name: name})
	if err != nil {
		return nil
	}
	return state.PodLabels
}

// Scale sets the target's replicas through its scale subresource.
func (s *Scaler) Scale(ctx context.Context, ref Ref, replicas int32) error {
	if ref.Kind == elastiv1alpha1.KindRollout && (s.rollouts == nil || !s.rollouts.Available()) {
		return ErrRolloutsUnavailable
	}
	before, readErr := s.cached(ref)
	if err := patchScale(ctx, s.kube, s.dynamic, ref, replicas); err != nil || readErr != nil {
		s.own.forget(ref)
		return err
	}
	s.own.wrote(ref, before, replicas)
	return nil
}

// patchScale writes ref's scale subresource.
func patchScale(ctx context.Context, kube kubernetes.Interface, dyn dynamic.Interface, ref Ref, replicas int32) error {
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas)
	opts := metav1.PatchOptions{}
	var err error
	switch ref.Kind {
	case elastiv1alpha1.KindDeployment:
		_, err = kube.AppsV1().Deployments(ref.Namespace).Patch(ctx, ref.Name, types.MergePatchType, patch, opts, "scale")
	case elastiv1alpha1.KindStatefulSet:
		_, err = kube.AppsV1().StatefulSets(ref.Namespace).Patch(ctx, ref.Name, types.MergePatchType, patch, opts, "scale")
	case elastiv1alpha1.KindRollout:
		_, err = dyn.Resource(RolloutGVR).Namespace(ref.Namespace).Patch(ctx, ref.Name, types.MergePatchType, patch, opts, "scale")
	default:
		return fmt.Errorf("%w: %q", ErrUnsupportedKind, ref.Kind)
	}
	if err != nil {
		return fmt.Errorf("scale %s to %d: %w", ref, replicas, err)
	}
	return nil
}

// IsNotFound reports whether err means the target does not exist (or its
// kind is not served).
func IsNotFound(err error) bool {
	return apierrors.IsNotFound(err) || errors.Is(err, ErrRolloutsUnavailable)
}

func replicasOrDefault(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}
