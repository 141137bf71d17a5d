package scaletarget

import (
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

// A Scaler reads its own scale writes until its cache shows them, or a
// later change, and no longer: the idle poller's scale to zero is what a
// wake request right after it must see.
func TestScalerReadsItsOwnWritesUntilTheCacheCatchesUp(t *testing.T) {
	uid := types.UID("first")
	deployment := func(generation int64, replicas int32) *appsv1.Deployment {
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", Generation: generation, UID: uid},
			Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(replicas)},
		}
	}
	kube := kubefake.NewClientset(deployment(5, 1))
	deployments := cache.NewStore(cache.MetaNamespaceKeyFunc)
	cacheShows := func(generation int64, replicas int32) {
		t.Helper()
		if err := deployments.Update(CacheTarget(deployment(generation, replicas))); err != nil {
			t.Fatal(err)
		}
	}
	cacheShows(5, 1)
	s := NewScaler(kube, nil, deployments, cache.NewStore(cache.MetaNamespaceKeyFunc), nil, nil)
	ref := Ref{Kind: elastiv1alpha1.KindDeployment, Namespace: "ns", Name: "web"}
	reads := func(step string, want int32) {
		t.Helper()
		got, err := s.Get(ref)
		if err != nil || got.Replicas != want {
			t.Errorf("%s: Get = %d replicas, %v; want %d", step, got.Replicas, err, want)
		}
	}
	scale := func(replicas int32) {
		t.Helper()
		if err := s.Scale(t.Context(), ref, replicas); err != nil {
			t.Fatal(err)
		}
	}

	scale(0)
	reads("scaled to 0, the cache still at generation 5", 0)
	scale(2)
	reads("scaled to 2 before the cache showed the 0", 2)
	cacheShows(6, 0)
	reads("the cache shows the first write only", 2)
	cacheShows(7, 2)
	reads("the cache shows the second write", 2)
	cacheShows(8, 3)
	reads("someone else scaled it to 3", 3)

	scale(3)
	cacheShows(8, 3)
	reads("a write of what the cache shows", 3)

	kube.PrependReactor("patch", "deployments", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("the apiserver timed out")
	})
	if err := s.Scale(t.Context(), ref, 0); err == nil {
		t.Fatal("Scale: no error from a failed patch")
	}
	reads("a failed write is not read back", 3)
	kube.ReactionChain = kube.ReactionChain[1:]

	// Deleted and created again under the same name: generations start
	// over, and the new object is believed at once.
	scale(0)
	uid = "second"
	cacheShows(1, 4)
	reads("created again since the write", 4)
}
