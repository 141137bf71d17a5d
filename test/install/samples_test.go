package install_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/validation"
	"github.com/elasti-dev/elasti/test/localcluster"
	"github.com/elasti-dev/elasti/test/localcluster/clustertest"
	"github.com/elasti-dev/elasti/test/testenv"
)

// readDocs reads every object of a multi-document YAML file of the repo.
func readDocs(t *testing.T, rel string) []*unstructured.Unstructured {
	t.Helper()
	root, err := localcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, doc := range splitYAML(t, filepath.Join(root, rel)) {
		obj := map[string]any{}
		decode(t, doc, &obj)
		if len(obj) > 0 {
			out = append(out, &unstructured.Unstructured{Object: obj})
		}
	}
	return out
}

// The model-server sample (issue 41) is what its walkthrough says: every
// object is accepted by the apiserver as written (a server-side dry run,
// in a namespace of the test's), its ElastiService passes the operator's
// validation, and its bounds fit its app: the hold outlasts the app's
// start (listen delay plus loading), and the startupProbe gives the app
// as long as the hold before the kubelet would restart it.
func TestModelServerSampleHoldsForItsOwnStart(t *testing.T) {
	testenv.InstallCRD(t)
	ns := clustertest.Namespace(t)
	dyn := dynamic.NewForConfigOrDie(clustertest.Get(t).RESTConfig())
	resources := map[string]schema.GroupVersionResource{
		"Deployment":    appsv1.SchemeGroupVersion.WithResource("deployments"),
		"Service":       {Version: "v1", Resource: "services"},
		"ElastiService": elastiGVR,
	}
	var dep appsv1.Deployment
	var es elastiv1alpha1.ElastiService
	for _, obj := range readDocs(t, "deploy/samples/model-server.yaml") {
		kind := obj.GetKind()
		if kind == "Namespace" {
			continue
		}
		gvr, ok := resources[kind]
		if !ok {
			t.Fatalf("the sample has a %s, which this test does not know", kind)
		}
		obj.SetNamespace(ns)
		if _, err := dyn.Resource(gvr).Namespace(ns).Create(context.Background(), obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Errorf("the apiserver refuses the sample's %s %s: %v", kind, obj.GetName(), err)
		}
		switch kind {
		case "Deployment":
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &dep); err != nil {
				t.Fatal(err)
			}
		case "ElastiService":
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &es); err != nil {
				t.Fatal(err)
			}
		}
	}
	if errs := validation.ValidateElastiService(&es); len(errs) > 0 {
		t.Errorf("the operator would refuse the sample's ElastiService: %v", errs.ToAggregate())
	}
	hold, ok, err := elastiv1alpha1.ParseHoldTimeout(es.Spec.Hold.Timeout)
	if !ok || err != nil {
		t.Fatalf("spec.hold.timeout %q: %v", es.Spec.Hold.Timeout, err)
	}
	c := dep.Spec.Template.Spec.Containers[0]
	var start time.Duration
	for _, env := range c.Env {
		if env.Name == "LISTEN_DELAY" || env.Name == "NOT_READY_FOR" {
			d, err := time.ParseDuration(env.Value)
			if err != nil {
				t.Fatalf("%s=%q: %v", env.Name, env.Value, err)
			}
			start += d
		}
	}
	if start < 2*time.Minute || start >= hold {
		t.Errorf("the app starts in %v: want longer than the resolver's 2-minute default and shorter than its hold (%v)", start, hold)
	}
	sp := c.StartupProbe
	if sp == nil || time.Duration(sp.PeriodSeconds*sp.FailureThreshold)*time.Second < hold {
		t.Errorf("startupProbe %+v: want it to allow at least the hold's %v", sp, hold)
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil {
		t.Error("the sample's readiness probe is no httpGet: the wake's stage would show no readiness answers")
	}
	if es.Spec.WaitingPage == nil || !es.Spec.WaitingPage.Enabled {
		t.Error("the sample's waiting page is off: its walkthrough shows it")
	}
}
