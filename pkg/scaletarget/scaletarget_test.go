package scaletarget

import (
	"maps"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

// Get reads Cached targets and typed objects alike; a missing target is
// NotFound, as the listers reported.
func TestGetFromCachedAndTypedObjects(t *testing.T) {
	deployments := cache.NewStore(cache.MetaNamespaceKeyFunc)
	statefulSets := cache.NewStore(cache.MetaNamespaceKeyFunc)
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: "ns", Name: name, Generation: 5, Labels: map[string]string{"a": "b"}}
	}
	for _, obj := range []any{
		CacheTarget(&appsv1.Deployment{ObjectMeta: meta("cached"), Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3)}}),
		CacheTarget(&appsv1.Deployment{ObjectMeta: meta("unset")}),
		&appsv1.Deployment{ObjectMeta: meta("typed"), Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](0)}},
	} {
		if err := deployments.Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	if err := statefulSets.Add(CacheTarget(&appsv1.StatefulSet{ObjectMeta: meta("sts"), Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2)}})); err != nil {
		t.Fatal(err)
	}
	s := NewScaler(nil, nil, deployments, statefulSets, nil, nil)
	for _, tc := range []struct {
		kind, name string
		want       State
	}{
		{elastiv1alpha1.KindDeployment, "cached", State{Replicas: 3, Generation: 5}},
		{elastiv1alpha1.KindDeployment, "unset", State{Replicas: 1, Generation: 5}},
		{elastiv1alpha1.KindDeployment, "typed", State{Replicas: 0, Generation: 5}},
		{elastiv1alpha1.KindStatefulSet, "sts", State{Replicas: 2, Generation: 5}},
	} {
		got, err := s.Get(Ref{Kind: tc.kind, Namespace: "ns", Name: tc.name})
		if err != nil || got.Replicas != tc.want.Replicas || got.Generation != tc.want.Generation {
			t.Errorf("%s %s: %+v, %v; want %+v", tc.kind, tc.name, got, err, tc.want)
		}
	}
	if _, err := s.Get(Ref{Kind: elastiv1alpha1.KindStatefulSet, Namespace: "ns", Name: "cached"}); !apierrors.IsNotFound(err) || !IsNotFound(err) {
		t.Errorf("missing target: %v, want NotFound", err)
	}

	c := CacheTarget(&appsv1.Deployment{ObjectMeta: meta("c"), Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](1),
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "c"}, Annotations: map[string]string{"x": "y"}}},
	}}).(*Cached)
	if c.Kind != "Deployment" || c.APIVersion != "apps/v1" || c.Labels != nil || !maps.Equal(c.PodLabels, map[string]string{"app": "c"}) {
		t.Errorf("cached = %+v", c)
	}
	cp := c.DeepCopyObject().(*Cached)
	*cp.Replicas = 9
	cp.PodLabels["app"] = "other"
	if *c.Replicas != 1 || c.PodLabels["app"] != "c" {
		t.Error("DeepCopyObject shares replicas or pod labels")
	}
}

// Get returns the pod template's labels, which the controller checks the
// Service selects: a Deployment's, a StatefulSet's, and a Rollout's own or,
// with a workloadRef, those of the Deployment it names.
func TestGetReturnsPodLabels(t *testing.T) {
	template := func(app string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}}}
	}
	deployments := cache.NewStore(cache.MetaNamespaceKeyFunc)
	statefulSets := cache.NewStore(cache.MetaNamespaceKeyFunc)
	_ = deployments.Add(CacheTarget(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "d"}, Spec: appsv1.DeploymentSpec{Template: template("d")}}))
	_ = statefulSets.Add(CacheTarget(&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}, Spec: appsv1.StatefulSetSpec{Template: template("s")}}))
	rollouts := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for name, spec := range map[string]map[string]any{
		"own":      {"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "own"}}}},
		"ref":      {"workloadRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"}},
		"dangling": {"workloadRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "missing"}},
	} {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "spec": spec}}
		u.SetNamespace("ns")
		u.SetName(name)
		trimmed, _ := trimRollout(u)
		_ = rollouts.Add(trimmed)
	}
	s := NewScaler(nil, nil, deployments, statefulSets, &RolloutInformer{informer: fakeInformer{indexer: rollouts}}, nil)
	for _, tc := range []struct {
		ref  Ref
		want map[string]string
	}{
		{Ref{Kind: elastiv1alpha1.KindDeployment, Namespace: "ns", Name: "d"}, map[string]string{"app": "d"}},
		{Ref{Kind: elastiv1alpha1.KindStatefulSet, Namespace: "ns", Name: "s"}, map[string]string{"app": "s"}},
		{Ref{Kind: elastiv1alpha1.KindRollout, Namespace: "ns", Name: "own"}, map[string]string{"app": "own"}},
		{Ref{Kind: elastiv1alpha1.KindRollout, Namespace: "ns", Name: "ref"}, map[string]string{"app": "d"}},
		{Ref{Kind: elastiv1alpha1.KindRollout, Namespace: "ns", Name: "dangling"}, nil},
	} {
		got, err := s.Get(tc.ref)
		if err != nil || !maps.Equal(got.PodLabels, tc.want) {
			t.Errorf("%s: pod labels %v, %v; want %v", tc.ref, got.PodLabels, err, tc.want)
		}
	}
}

// fakeInformer serves a RolloutInformer's cache from an indexer; Get
// calls nothing else.
type fakeInformer struct {
	cache.SharedIndexInformer
	indexer cache.Indexer
}

func (f fakeInformer) GetIndexer() cache.Indexer { return f.indexer }
