package operator_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/controller"
	"github.com/elasti-dev/elasti/pkg/scaletarget"
	"github.com/elasti-dev/elasti/pkg/wakeserver"
	"github.com/elasti-dev/elasti/test/install"
	"github.com/elasti-dev/elasti/test/localcluster/clustertest"
	"github.com/elasti-dev/elasti/test/testenv"
)

// rolloutCRD is the smallest Argo Rollout CRD the operator needs: the kind,
// and a scale subresource.
func rolloutCRD() *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: scaletarget.RolloutCRDName},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "argoproj.io",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "rollouts", Singular: "rollout", Kind: "Rollout", ListKind: "RolloutList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1alpha1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type:                   "object",
					XPreserveUnknownFields: ptr.To(true),
				}},
				Subresources: &apiextensionsv1.CustomResourceSubresources{
					Status: &apiextensionsv1.CustomResourceSubresourceStatus{},
					Scale: &apiextensionsv1.CustomResourceSubresourceScale{
						SpecReplicasPath:   ".spec.replicas",
						StatusReplicasPath: ".status.replicas",
						LabelSelectorPath:  ptr.To(".status.selector"),
					},
				},
			}},
		},
	}
}

// Not parallel: the Rollout CRD is cluster-wide, and the first half needs it
// absent.
func TestRolloutTargetWithAndWithoutTheCRD(t *testing.T) {
	e := testenv.New(t)
	e.Opts.DeletionGrace = 2 * time.Second
	cfg := clustertest.Get(t).RESTConfig()
	apiext := apiextensionsclient.NewForConfigOrDie(cfg)
	if _, err := apiext.ApiextensionsV1().CustomResourceDefinitions().Get(e.Ctx(), scaletarget.RolloutCRDName, metav1.GetOptions{}); err == nil {
		t.Fatal("the Rollout CRD is already installed; this test needs a cluster without it")
	}

	op := e.StartOperatorReturning()
	e.Resolver(1)
	e.Service("ro", "ro")
	e.ElastiService("ro", "ro", elastiv1alpha1.KindRollout, "ro")
	es := e.WaitReason("ro", metav1.ConditionFalse, controller.ReasonTargetNotFound)
	if !strings.Contains(testenv.Describe(es), "Argo Rollouts CRD") {
		t.Errorf("condition does not say the Rollout CRD is missing: %s", testenv.Describe(es))
	}

	// Install the CRD and a Rollout: the operator notices both without a restart.
	if err := install.ApplyCRDs(e.Ctx(), cfg, rolloutCRD()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = apiext.ApiextensionsV1().CustomResourceDefinitions().Delete(context.Background(), scaletarget.RolloutCRDName, metav1.DeleteOptions{})
	})
	rollout := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
		"metadata": map[string]any{"name": "ro", "namespace": e.NS},
		"spec": map[string]any{"replicas": int64(0),
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "ro"}}}},
	}}
	dyn := dynamic.NewForConfigOrDie(cfg)
	if _, err := dyn.Resource(scaletarget.RolloutGVR).Namespace(e.NS).Create(e.Ctx(), rollout, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// No Argo controller runs here, so the Rollout has no pods: proxy.
	e.WaitMode("ro", elastiv1alpha1.ModeProxy)

	// A request wakes it through the scale subresource.
	srv := httptest.NewServer(op.WakeServer.Handler())
	defer srv.Close()
	if code, body := testenv.Post(t, srv.URL+wakeserver.Path, testenv.WakeBody("ro", e.NS)); code != 200 {
		t.Fatalf("wake: %d %s", code, body)
	}
	e.Eventually("the Rollout woken to minTargetReplicas", func() (bool, string) {
		got, err := dyn.Resource(scaletarget.RolloutGVR).Namespace(e.NS).Get(e.Ctx(), "ro", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		r, _, _ := unstructured.NestedInt64(got.Object, "spec", "replicas")
		return r == 2, fmt.Sprintf("replicas %d", r)
	})
	scale := []byte(`{"spec":{"replicas":0}}`)
	if _, err := dyn.Resource(scaletarget.RolloutGVR).Namespace(e.NS).Patch(e.Ctx(), "ro", types.MergePatchType, scale, metav1.PatchOptions{}, "scale"); err != nil {
		t.Fatal(err)
	}

	// Deleting the ElastiService scales the Rollout up through its scale
	// subresource.
	if err := e.Elasti.ElastiV1alpha1().ElastiServices(e.NS).Delete(e.Ctx(), "ro", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Eventually("the Rollout scaled to minTargetReplicas", func() (bool, string) {
		got, err := dyn.Resource(scaletarget.RolloutGVR).Namespace(e.NS).Get(e.Ctx(), "ro", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		r, _, _ := unstructured.NestedInt64(got.Object, "spec", "replicas")
		return r == 2, fmt.Sprintf("replicas %d", r)
	})
}
