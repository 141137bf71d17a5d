package scaletarget

import (
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	autoscalingv2listers "k8s.io/client-go/listers/autoscaling/v2"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

func hpaFor(ns, name, apiVersion, kind, target string, minReplicas *int32, maxReplicas int32) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: apiVersion, Kind: kind, Name: target},
			MinReplicas:    minReplicas,
			MaxReplicas:    maxReplicas,
		},
	}
}

func scalerWithHPAs(t *testing.T, hpas ...*autoscalingv2.HorizontalPodAutoscaler) *Scaler {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, h := range hpas {
		if err := idx.Add(h); err != nil {
			t.Fatal(err)
		}
	}
	return NewScaler(nil, nil, nil, nil, nil, autoscalingv2listers.NewHorizontalPodAutoscalerLister(idx))
}

func TestGoalFor(t *testing.T) {
	web := Ref{Kind: elastiv1alpha1.KindDeployment, Namespace: "shop", Name: "web"}
	hpa := func(name string) *elastiv1alpha1.AutoscalerSpec {
		return &elastiv1alpha1.AutoscalerSpec{Type: elastiv1alpha1.AutoscalerTypeHPA, Name: name}
	}
	s := scalerWithHPAs(t,
		hpaFor("shop", "floor3", "apps/v1", "Deployment", "web", ptr.To[int32](3), 10),
		hpaFor("shop", "unset", "apps/v1", "Deployment", "web", nil, 10),
		hpaFor("shop", "zero", "apps/v1", "Deployment", "web", ptr.To[int32](0), 10),
		hpaFor("shop", "cap2", "apps/v1", "Deployment", "web", ptr.To[int32](1), 2),
		hpaFor("shop", "other", "apps/v1", "Deployment", "api", ptr.To[int32](3), 10),
		hpaFor("shop", "otherkind", "apps/v1", "StatefulSet", "web", ptr.To[int32](3), 10),
		hpaFor("shop", "othergroup", "example.com/v1", "Deployment", "web", ptr.To[int32](3), 10),
		// Another tenant's HPA of the same name: never read for shop.
		hpaFor("other", "elsewhere", "apps/v1", "Deployment", "web", ptr.To[int32](5), 10),
	)
	for _, tc := range []struct {
		name       string
		src        HPAReader
		minTarget  int32
		autoscaler *elastiv1alpha1.AutoscalerSpec
		want       WakeGoal
	}{
		{"no autoscaler", s, 2, nil, WakeGoal{Replicas: 2, UpAt: 2}},
		{"KEDA", s, 2, &elastiv1alpha1.AutoscalerSpec{Type: elastiv1alpha1.AutoscalerTypeKEDA, Name: "floor3"}, WakeGoal{Replicas: 2, UpAt: 2}},
		{"HPA floor above minTargetReplicas", s, 1, hpa("floor3"), WakeGoal{Replicas: 3, UpAt: 1, HPA: HPAOwns}},
		{"minTargetReplicas above the HPA floor", s, 4, hpa("floor3"), WakeGoal{Replicas: 4, UpAt: 1, HPA: HPAOwns}},
		{"unset minReplicas is the HPA's 1", s, 1, hpa("unset"), WakeGoal{Replicas: 1, UpAt: 1, HPA: HPAOwns}},
		{"minReplicas 0", s, 2, hpa("zero"), WakeGoal{Replicas: 2, UpAt: 1, HPA: HPAOwns}},
		{"capped at maxReplicas", s, 5, hpa("cap2"), WakeGoal{Replicas: 2, UpAt: 1, HPA: HPAOwns}},
		{"HPA of another workload", s, 2, hpa("other"), WakeGoal{Replicas: 2, UpAt: 2, HPA: HPAOtherTarget}},
		{"HPA of another kind", s, 2, hpa("otherkind"), WakeGoal{Replicas: 2, UpAt: 2, HPA: HPAOtherTarget}},
		{"HPA of another group", s, 2, hpa("othergroup"), WakeGoal{Replicas: 2, UpAt: 2, HPA: HPAOtherTarget}},
		{"HPA of another namespace", s, 2, hpa("elsewhere"), WakeGoal{Replicas: 2, UpAt: 2, HPA: HPANotFound}},
		{"missing HPA", s, 2, hpa("missing"), WakeGoal{Replicas: 2, UpAt: 2, HPA: HPANotFound}},
		{"HPAs not watched", NewScaler(nil, nil, nil, nil, nil, nil), 2, hpa("floor3"), WakeGoal{Replicas: 2, UpAt: 2, HPA: HPAUnreadable}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := GoalFor(tc.src, web, tc.minTarget, tc.autoscaler); got != tc.want {
				t.Errorf("GoalFor = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestHPAScalesRollout(t *testing.T) {
	ref := Ref{Kind: elastiv1alpha1.KindRollout, Namespace: "shop", Name: "web"}
	if !HPAScales(hpaFor("shop", "h", "argoproj.io/v1alpha1", "Rollout", "web", nil, 3), ref) {
		t.Error("an HPA of the Rollout does not scale it")
	}
	if HPAScales(hpaFor("shop", "h", "apps/v1", "Rollout", "web", nil, 3), ref) {
		t.Error("an HPA of an apps Rollout scales an Argo Rollout")
	}
}

func TestCacheHPAKeepsWhatGoalForReads(t *testing.T) {
	full := hpaFor("shop", "h", "apps/v1", "Deployment", "web", ptr.To[int32](2), 7)
	full.ResourceVersion = "42"
	full.Annotations = map[string]string{"a": "b"}
	full.Spec.Metrics = []autoscalingv2.MetricSpec{{Type: autoscalingv2.ExternalMetricSourceType}}
	full.Status.CurrentReplicas = 3
	got := CacheHPA(full)
	if got.ResourceVersion != "42" || got.Spec.ScaleTargetRef != full.Spec.ScaleTargetRef || *got.Spec.MinReplicas != 2 || got.Spec.MaxReplicas != 7 {
		t.Errorf("CacheHPA lost what GoalFor reads: %+v", got)
	}
	if got.Annotations != nil || got.Spec.Metrics != nil || got.Status.CurrentReplicas != 0 {
		t.Errorf("CacheHPA kept what nothing reads: %+v", got)
	}
}
