package scaletarget

import (
	"reflect"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// A cached Rollout keeps what Scaler.Get and notify read, and no more.
func TestTrimRolloutKeepsWhatGetReads(t *testing.T) {
	in := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1",
		"kind":       "Rollout",
		"metadata": map[string]any{
			"name": "r", "namespace": "ns", "uid": "u", "resourceVersion": "9", "generation": int64(4),
			"labels":        map[string]any{"app": "r"},
			"annotations":   map[string]any{"a": "b"},
			"managedFields": []any{map[string]any{"manager": "argo"}},
		},
		"spec": map[string]any{
			"replicas": int64(3),
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"app": "r"}, "annotations": map[string]any{"x": "y"}},
				"spec":     map[string]any{"containers": []any{map[string]any{"name": "c"}}},
			},
			"workloadRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "d", "scaleDown": "never"},
			"strategy":    map[string]any{"canary": map[string]any{}},
		},
		"status": map[string]any{"replicas": int64(3), "readyReplicas": int64(2)},
	}}
	out, err := trimRollout(in)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"apiVersion": "argoproj.io/v1alpha1",
		"kind":       "Rollout",
		"metadata":   map[string]any{"name": "r", "namespace": "ns", "uid": "u", "resourceVersion": "9", "generation": int64(4)},
		"spec": map[string]any{
			"replicas":    int64(3),
			"template":    map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "r"}}},
			"workloadRef": map[string]any{"kind": "Deployment", "name": "d"},
		},
		"status": map[string]any{"readyReplicas": int64(2)},
	}
	if got := out.(*unstructured.Unstructured).Object; !reflect.DeepEqual(got, want) {
		t.Errorf("trimmed Rollout = %v, want %v", got, want)
	}

	// Without spec.replicas Get defaults to 1: the trimmed copy has none either.
	unstructured.RemoveNestedField(in.Object, "spec", "replicas")
	out, _ = trimRollout(in)
	if _, found, _ := unstructured.NestedFieldNoCopy(out.(*unstructured.Unstructured).Object, "spec", "replicas"); found {
		t.Error("a Rollout without spec.replicas got one")
	}
}

// The cached CRD keeps its status conditions, which established reads.
func TestTrimCRDKeepsConditions(t *testing.T) {
	conds := []apiextensionsv1.CustomResourceDefinitionCondition{{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue}}
	in := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: RolloutCRDName, ResourceVersion: "1", Annotations: map[string]string{"a": "b"}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "argoproj.io", Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
			Name: "v1alpha1", Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}},
		}}},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{Conditions: conds},
	}
	out, err := trimCRD(in)
	if err != nil {
		t.Fatal(err)
	}
	crd := out.(*apiextensionsv1.CustomResourceDefinition)
	if crd.Name != RolloutCRDName || crd.ResourceVersion != "1" || !established(crd) || crd.Annotations != nil || len(crd.Spec.Versions) != 0 {
		t.Errorf("trimmed CRD = %+v", crd)
	}
}
