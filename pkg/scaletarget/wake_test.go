package scaletarget

import (
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

// Wake's error policy, the one every caller shares: a failed scale is a
// failed wake and leaves KEDA alone; a missing ScaledObject is no error; a
// ScaledObject that cannot be resumed is reported, but the target is up.
func TestWakeErrorPolicy(t *testing.T) {
	keda := &elastiv1alpha1.AutoscalerSpec{Type: elastiv1alpha1.AutoscalerTypeKEDA, Name: "so"}
	for _, tc := range []struct {
		name         string
		target       string
		autoscaler   *elastiv1alpha1.AutoscalerSpec
		scaledObject bool
		kedaFails    bool
		wantWoken    bool
		wantKEDAErr  bool
		wantPaused   string // the ScaledObject's paused annotation after the wake
	}{
		{name: "no autoscaler", target: "web", wantWoken: true},
		{name: "KEDA resumed", target: "web", autoscaler: keda, scaledObject: true, wantWoken: true, wantPaused: "false"},
		{name: "ScaledObject gone", target: "web", autoscaler: keda, wantWoken: true},
		{name: "KEDA cannot be resumed", target: "web", autoscaler: keda, scaledObject: true, kedaFails: true, wantWoken: true, wantKEDAErr: true, wantPaused: "true"},
		{name: "target gone", target: "missing", autoscaler: keda, scaledObject: true, wantPaused: "true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kube := kubefake.NewClientset(&appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
				Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](0)},
			})
			var objects []runtime.Object
			if tc.scaledObject {
				so := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject"}}
				so.SetNamespace("ns")
				so.SetName("so")
				so.SetAnnotations(map[string]string{KEDAPausedAnnotation: "true", KEDAPausedReplicasAnnotation: "0"})
				objects = append(objects, so)
			}
			dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
				map[schema.GroupVersionResource]string{ScaledObjectGVR: "ScaledObjectList"}, objects...)
			if tc.kedaFails {
				dyn.PrependReactor("patch", "scaledobjects", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, errors.New("admission webhook said no")
				})
			}
			s := NewScaler(kube, dyn, cache.NewStore(cache.MetaNamespaceKeyFunc), cache.NewStore(cache.MetaNamespaceKeyFunc), nil, nil)

			err := Wake(t.Context(), s, Ref{Kind: elastiv1alpha1.KindDeployment, Namespace: "ns", Name: tc.target}, 2, tc.autoscaler)
			if Woken(err) != tc.wantWoken || errors.Is(err, ErrKEDANotResumed) != tc.wantKEDAErr {
				t.Fatalf("Wake: %v; want woken=%v, KEDA error=%v", err, tc.wantWoken, tc.wantKEDAErr)
			}
			d, _ := kube.AppsV1().Deployments("ns").Get(t.Context(), "web", metav1.GetOptions{})
			if want := map[bool]int32{true: 2, false: 0}[tc.target == "web"]; *d.Spec.Replicas != want {
				t.Errorf("replicas %d, want %d", *d.Spec.Replicas, want)
			}
			if !tc.scaledObject {
				return
			}
			so, err := dyn.Resource(ScaledObjectGVR).Namespace("ns").Get(t.Context(), "so", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := so.GetAnnotations()[KEDAPausedAnnotation]; got != tc.wantPaused {
				t.Errorf("paused annotation %q, want %q", got, tc.wantPaused)
			}
		})
	}
}
