package install_test

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	versioned "github.com/elasti-dev/elasti/pkg/generated/clientset/versioned"
	informers "github.com/elasti-dev/elasti/pkg/generated/informers/externalversions"
	"github.com/elasti-dev/elasti/test/localcluster/clustertest"
	"github.com/elasti-dev/elasti/test/testenv"
)

var elastiGVR = elastiv1alpha1.SchemeGroupVersion.WithResource("elastiservices")

func readYAML(t *testing.T, rel string) map[string]any {
	t.Helper()
	docs := readDocs(t, rel)
	if len(docs) != 1 {
		t.Fatalf("%s: %d objects, want one", rel, len(docs))
	}
	return docs[0].Object
}

func TestCRDInstallsAndIsServed(t *testing.T) {
	testenv.InstallCRD(t)
	cs := clustertest.Clientset(t)
	// Other tests of this package apply manifests/, CRD included, at the
	// same time; the apiserver's discovery document follows each update a
	// moment late, so read it until it answers.
	var resources *metav1.APIResourceList
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		var err error
		resources, err = cs.Discovery().ServerResourcesForGroupVersion(elastiv1alpha1.SchemeGroupVersion.String())
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	var found *metav1.APIResource
	for i := range resources.APIResources {
		if resources.APIResources[i].Name == "elastiservices" {
			found = &resources.APIResources[i]
		}
	}
	if found == nil {
		t.Fatalf("elastiservices not served; got %+v", resources.APIResources)
	}
	if !found.Namespaced || found.Kind != "ElastiService" || strings.Join(found.ShortNames, ",") != "elastisvc" {
		t.Errorf("resource = namespaced %v kind %q shortNames %v; want namespaced ElastiService with short name elastisvc",
			found.Namespaced, found.Kind, found.ShortNames)
	}
	var hasStatus bool
	for _, r := range resources.APIResources {
		hasStatus = hasStatus || r.Name == "elastiservices/status"
	}
	if !hasStatus {
		t.Error("the status subresource is not served")
	}
}

// A KubeElasti manifest, byte for byte, must apply and read back through the
// generated clientset, lister and informer.
func TestKubeElastiResourceIsAcceptedUnchanged(t *testing.T) {
	testenv.InstallCRD(t)
	ns := clustertest.Namespace(t)
	cfg := clustertest.Get(t).RESTConfig()
	dyn := dynamic.NewForConfigOrDie(cfg)
	client := versioned.NewForConfigOrDie(cfg)
	ctx := context.Background()

	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	informer := factory.Elasti().V1alpha1().ElastiServices()
	seen := make(chan *elastiv1alpha1.ElastiService, 1)
	if _, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { seen <- obj.(*elastiv1alpha1.ElastiService) },
	}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	factory.Start(stop)
	factory.WaitForCacheSync(stop)

	obj := &unstructured.Unstructured{Object: readYAML(t, "deploy/samples/kubeelasti-legacy.yaml")}
	if _, err := dyn.Resource(elastiGVR).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("a KubeElasti manifest was refused: %v", err)
	}

	check := func(via string, es *elastiv1alpha1.ElastiService) {
		t.Helper()
		s := es.Spec
		if s.Service != "target-service" || s.MinTargetReplicas != 1 || s.CooldownPeriod != 5 {
			t.Errorf("%s: service/minTargetReplicas/cooldownPeriod = %q/%d/%d", via, s.Service, s.MinTargetReplicas, s.CooldownPeriod)
		}
		if s.ScaleTargetRef.Kind != "deployments" || s.ScaleTargetRef.Canonical().Kind != elastiv1alpha1.KindDeployment {
			t.Errorf("%s: kind %q (canonical %q), want legacy deployments → Deployment", via, s.ScaleTargetRef.Kind, s.ScaleTargetRef.Canonical().Kind)
		}
		if s.Autoscaler == nil || s.Autoscaler.Type != "keda" || s.Autoscaler.Name != "target-scaled-object" {
			t.Errorf("%s: autoscaler = %+v", via, s.Autoscaler)
		}
		if len(s.Triggers) != 1 || s.Triggers[0].Type != "prometheus" {
			t.Fatalf("%s: triggers = %+v", via, s.Triggers)
		}
		var md map[string]string
		if err := json.Unmarshal(s.Triggers[0].Metadata, &md); err != nil {
			t.Fatalf("%s: trigger metadata: %v", via, err)
		}
		if md["threshold"] != "0.5" || !strings.Contains(md["query"], "nginx_ingress_controller") || md["serverAddress"] == "" {
			t.Errorf("%s: trigger metadata = %v", via, md)
		}
	}

	got, err := client.ElastiV1alpha1().ElastiServices(ns).Get(ctx, "target-elastiservice", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("clientset get: %v", err)
	}
	check("clientset", got)

	select {
	case es := <-seen:
		check("informer", es)
	case <-time.After(30 * time.Second):
		t.Fatal("the informer never delivered the ElastiService")
	}
	listed, err := informer.Lister().ElastiServices(ns).Get("target-elastiservice")
	if err != nil {
		t.Fatalf("lister get: %v", err)
	}
	check("lister", listed)
}

// Defaults come from the schema, and unknown fields survive only inside
// trigger metadata.
func TestSchemaDefaultsAndPruning(t *testing.T) {
	testenv.InstallCRD(t)
	ns := clustertest.Namespace(t)
	cfg := clustertest.Get(t).RESTConfig()
	dyn := dynamic.NewForConfigOrDie(cfg)
	obj := validElastiService("defaults")
	spec := obj.Object["spec"].(map[string]any)
	delete(spec, "minTargetReplicas")
	delete(spec, "cooldownPeriod")
	spec["bogusField"] = "dropped"
	spec["enabledPeriod"] = map[string]any{}
	spec["triggers"] = []any{map[string]any{"type": "prometheus", "metadata": map[string]any{
		"query": "up", "threshold": "1", "customKey": map[string]any{"nested": true},
	}}}
	if _, err := dyn.Resource(elastiGVR).Namespace(ns).Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := versioned.NewForConfigOrDie(cfg).ElastiV1alpha1().ElastiServices(ns).Get(context.Background(), "defaults", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.MinTargetReplicas != elastiv1alpha1.DefaultMinTargetReplicas || got.Spec.CooldownPeriod != elastiv1alpha1.DefaultCooldownPeriodSeconds {
		t.Errorf("defaults: minTargetReplicas %d cooldownPeriod %d", got.Spec.MinTargetReplicas, got.Spec.CooldownPeriod)
	}
	if ep := got.Spec.EnabledPeriod; ep == nil || ep.Schedule != elastiv1alpha1.DefaultEnabledSchedule || ep.Duration != elastiv1alpha1.DefaultEnabledDuration {
		t.Errorf("enabledPeriod defaults = %+v", ep)
	}
	if !strings.Contains(string(got.Spec.Triggers[0].Metadata), `"customKey":{"nested":true}`) {
		t.Errorf("unknown trigger metadata was pruned: %s", got.Spec.Triggers[0].Metadata)
	}
	raw, err := dyn.Resource(elastiGVR).Namespace(ns).Get(context.Background(), "defaults", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, kept := raw.Object["spec"].(map[string]any)["bogusField"]; kept {
		t.Error("an unknown spec field was preserved; only trigger metadata may keep unknown fields")
	}
}

func validElastiService(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "elasti.truefoundry.com/v1alpha1",
		"kind":       "ElastiService",
		"metadata":   map[string]any{"name": name},
		"spec": map[string]any{
			"service": "web",
			"scaleTargetRef": map[string]any{
				"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
			},
			"minTargetReplicas": int64(1),
			"cooldownPeriod":    int64(60),
			"triggers": []any{map[string]any{"type": "prometheus", "metadata": map[string]any{
				"query": "sum(rate(x[1m]))", "threshold": "0.5",
			}}},
			"autoscaler": map[string]any{"type": "hpa", "name": "web"},
			"probeResponse": []any{map[string]any{
				"path":     map[string]any{"type": "Exact", "value": "/healthz"},
				"response": map[string]any{"status": int64(200), "body": "ok"},
			}},
		},
	}}
}

func TestInvalidResourcesAreRefusedByTheAPIServer(t *testing.T) {
	testenv.InstallCRD(t)
	ns := clustertest.Namespace(t)
	dyn := dynamic.NewForConfigOrDie(clustertest.Get(t).RESTConfig())
	ctx := context.Background()

	// Each case edits a valid spec; the apiserver must refuse it with a
	// message naming the field.
	cases := []struct {
		name string
		edit func(spec map[string]any)
		want []string
	}{
		{"missing service", func(s map[string]any) { delete(s, "service") }, []string{"spec.service", "Required value"}},
		{"empty service", func(s map[string]any) { s["service"] = "" }, []string{"spec.service"}},
		{"missing scaleTargetRef", func(s map[string]any) { delete(s, "scaleTargetRef") }, []string{"spec.scaleTargetRef", "Required value"}},
		{"missing target name", func(s map[string]any) { delete(ref(s), "name") }, []string{"spec.scaleTargetRef.name", "Required value"}},
		{"bad kind", func(s map[string]any) { ref(s)["kind"] = "CronJob" }, []string{"spec.scaleTargetRef.kind", `Unsupported value: "CronJob"`}},
		{"bad apiVersion", func(s map[string]any) { ref(s)["apiVersion"] = "batch/v1" }, []string{"spec.scaleTargetRef.apiVersion", `Unsupported value: "batch/v1"`}},
		{"minTargetReplicas 0", func(s map[string]any) { s["minTargetReplicas"] = int64(0) }, []string{"spec.minTargetReplicas", "greater than or equal to 1"}},
		{"minTargetReplicas not a number", func(s map[string]any) { s["minTargetReplicas"] = "one" }, []string{"spec.minTargetReplicas", "must be of type integer"}},
		{"cooldownPeriod -1", func(s map[string]any) { s["cooldownPeriod"] = int64(-1) }, []string{"spec.cooldownPeriod", "greater than or equal to 0"}},
		{"cooldownPeriod 604801", func(s map[string]any) { s["cooldownPeriod"] = int64(604801) }, []string{"spec.cooldownPeriod", "less than or equal to 604800"}},
		{"unknown trigger type", func(s map[string]any) { trigger(s)["type"] = "cpu" }, []string{"spec.triggers[0].type", `Unsupported value: "cpu"`}},
		{"service over 63", func(s map[string]any) { s["service"] = strings.Repeat("s", 64) }, []string{"spec.service", "Too long"}},
		{"target name over 253", func(s map[string]any) { ref(s)["name"] = strings.Repeat("n", 254) }, []string{"spec.scaleTargetRef.name", "Too long"}},
		{"11 triggers", func(s map[string]any) {
			for range 10 {
				s["triggers"] = append(s["triggers"].([]any), trigger(s))
			}
		}, []string{"spec.triggers", "must have at most 10 items"}},
		{"bad autoscaler type", func(s map[string]any) { s["autoscaler"].(map[string]any)["type"] = "vpa" }, []string{"spec.autoscaler.type", `Unsupported value: "vpa"`}},
		{"bad probeResponse path type", func(s map[string]any) { probe(s)["path"].(map[string]any)["type"] = "Glob" }, []string{"spec.probeResponse[0].path.type", `Unsupported value: "Glob"`}},
		{"probeResponse without response", func(s map[string]any) { delete(probe(s), "response") }, []string{"spec.probeResponse[0].response", "Required value"}},
		{"probeResponse status out of range", func(s map[string]any) { probe(s)["response"].(map[string]any)["status"] = int64(42) }, []string{"spec.probeResponse[0].response.status"}},
		{"probeResponse status 1xx", func(s map[string]any) { probe(s)["response"].(map[string]any)["status"] = int64(101) }, []string{"spec.probeResponse[0].response.status", "greater than or equal to 200"}},
		{"9 probeResponse rules", func(s map[string]any) {
			for range elastiv1alpha1.MaxProbeRules {
				s["probeResponse"] = append(s["probeResponse"].([]any), probe(s))
			}
		}, []string{"spec.probeResponse", "must have at most 8 items"}},
		// The attack measured on issue #20: with two such rules the resolver
		// grew to 1 GB.
		{"probeResponse regexp of a 3000-character group repeated 1000 times", func(s map[string]any) {
			probe(s)["path"] = map[string]any{"type": "RegularExpression", "value": "(" + strings.Repeat("ab", 1500) + "){1000}"}
		}, []string{"spec.probeResponse[0].path.value", "Too long", "may not be more than 128"}},
		{"5 probeResponse headers", func(s map[string]any) {
			var hs []any
			for range elastiv1alpha1.MaxProbeMatches + 1 {
				hs = append(hs, map[string]any{"name": "User-Agent", "type": "Exact", "value": "kube-probe/1.36"})
			}
			probe(s)["headers"] = hs
		}, []string{"spec.probeResponse[0].headers", "must have at most 4 items"}},
		{"probeResponse header name over 64", func(s map[string]any) {
			probe(s)["headers"] = []any{map[string]any{"name": strings.Repeat("h", 65), "type": "Exact", "value": "x"}}
		}, []string{"spec.probeResponse[0].headers[0].name", "Too long"}},
		{"probeResponse query value over 128", func(s map[string]any) {
			probe(s)["queryParams"] = []any{map[string]any{"name": "probe", "type": "Exact", "value": strings.Repeat("q", 129)}}
		}, []string{"spec.probeResponse[0].queryParams[0].value", "Too long"}},
		{"probeResponse body over 256", func(s map[string]any) { probe(s)["response"].(map[string]any)["body"] = strings.Repeat("b", 257) },
			[]string{"spec.probeResponse[0].response.body", "Too long"}},
		{"probeResponse method over 16", func(s map[string]any) { probe(s)["method"] = strings.Repeat("M", 17) },
			[]string{"spec.probeResponse[0].method", "Too long"}},
		{"bad header match type", func(s map[string]any) {
			probe(s)["headers"] = []any{map[string]any{"name": "User-Agent", "type": "Glob", "value": "kube-probe*"}}
		}, []string{"spec.probeResponse[0].headers[0].type", `Unsupported value: "Glob"`}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := validElastiService("bad-" + strings.ReplaceAll(strings.ToLower(tc.name), " ", "-"))
			obj.SetName(obj.GetName() + "-" + strconv.Itoa(i))
			tc.edit(obj.Object["spec"].(map[string]any))
			_, err := dyn.Resource(elastiGVR).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{})
			if err == nil {
				t.Fatalf("accepted; the schema must refuse %s", tc.name)
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("refused with %v, want an Invalid (422) error from validation", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message %q does not contain %q", err.Error(), w)
				}
			}
		})
	}

	// The valid base itself must be accepted, or every case above proves nothing.
	if _, err := dyn.Resource(elastiGVR).Namespace(ns).Create(ctx, validElastiService("valid"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("the valid base resource was refused: %v", err)
	}
}

func ref(spec map[string]any) map[string]any { return spec["scaleTargetRef"].(map[string]any) }
func trigger(spec map[string]any) map[string]any {
	return spec["triggers"].([]any)[0].(map[string]any)
}
func probe(spec map[string]any) map[string]any {
	return spec["probeResponse"].([]any)[0].(map[string]any)
}

// status.resolverPorts, the resolver's contract, is written through the
// status subresource and read back as written; the apiserver refuses two
// entries for one Service port and ports outside 1-65535.
func TestResolverPortsStatusIsValidatedByTheAPIServer(t *testing.T) {
	testenv.InstallCRD(t)
	ns := clustertest.Namespace(t)
	cfg := clustertest.Get(t).RESTConfig()
	dyn := dynamic.NewForConfigOrDie(cfg)
	client := versioned.NewForConfigOrDie(cfg).ElastiV1alpha1().ElastiServices(ns)
	ctx := context.Background()
	if _, err := dyn.Resource(elastiGVR).Namespace(ns).Create(ctx, validElastiService("ports"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	write := func(ports ...elastiv1alpha1.ResolverPort) error {
		es, err := client.Get(ctx, "ports", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		es.Status.ResolverPorts = ports
		_, err = client.UpdateStatus(ctx, es, metav1.UpdateOptions{})
		return err
	}
	want := []elastiv1alpha1.ResolverPort{
		{Service: "web", Name: "http", Port: 80, ResolverPort: 20000},
		{Service: "web", Port: 9000, ResolverPort: 20001},
	}
	if err := write(want...); err != nil {
		t.Fatalf("valid resolverPorts refused: %v", err)
	}
	got, err := client.Get(ctx, "ports", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Status.ResolverPorts, want) {
		t.Errorf("read back %+v, want %+v", got.Status.ResolverPorts, want)
	}
	raw, err := dyn.Resource(elastiGVR).Namespace(ns).Get(ctx, "ports", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The field names the resolver reads.
	first := raw.Object["status"].(map[string]any)["resolverPorts"].([]any)[0].(map[string]any)
	for _, k := range []string{"service", "name", "port", "resolverPort"} {
		if _, ok := first[k]; !ok {
			t.Errorf("status.resolverPorts[0] has no %q: %v", k, first)
		}
	}

	for _, tc := range []struct {
		name  string
		ports []elastiv1alpha1.ResolverPort
		want  string
	}{
		{"one Service port twice", []elastiv1alpha1.ResolverPort{want[0], {Service: "web", Port: 80, ResolverPort: 20005}}, "Duplicate value"},
		{"resolver port 0", []elastiv1alpha1.ResolverPort{{Service: "web", Port: 80, ResolverPort: 0}}, "status.resolverPorts[0].resolverPort"},
		{"resolver port 70000", []elastiv1alpha1.ResolverPort{{Service: "web", Port: 80, ResolverPort: 70000}}, "status.resolverPorts[0].resolverPort"},
		{"no service", []elastiv1alpha1.ResolverPort{{Port: 80, ResolverPort: 20000}}, "status.resolverPorts[0].service"},
	} {
		err := write(tc.ports...)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an Invalid error naming %q", tc.name, err, tc.want)
		}
	}
}
