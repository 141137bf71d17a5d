package scaletarget

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	s := NewScaler(nil, nil, deployments, statefulSets, nil)
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
		if err != nil || got != tc.want {
			t.Errorf("%s %s: %+v, %v; want %+v", tc.kind, tc.name, got, err, tc.want)
		}
	}
	if _, err := s.Get(Ref{Kind: elastiv1alpha1.KindStatefulSet, Namespace: "ns", Name: "cached"}); !apierrors.IsNotFound(err) || !IsNotFound(err) {
		t.Errorf("missing target: %v, want NotFound", err)
	}

	c := CacheTarget(&appsv1.Deployment{ObjectMeta: meta("c"), Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)}}).(*Cached)
	if c.Kind != "Deployment" || c.APIVersion != "apps/v1" || c.Labels != nil {
		t.Errorf("cached = %+v", c)
	}
	cp := c.DeepCopyObject().(*Cached)
	*cp.Replicas = 9
	if *c.Replicas != 1 {
		t.Error("DeepCopyObject shares replicas")
	}
}
