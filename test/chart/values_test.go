package chart_test

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// kubeElastiValues is the KubeElasti-style values file, every key of
// KubeElasti v0.1.30's chart set as a user sets it.
const kubeElastiValues = "kubeelasti-values.yaml"

// field walks a rendered object along a path of map keys and list indexes.
func field(t *testing.T, o object, path ...any) any {
	t.Helper()
	var cur any = map[string]any(o)
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := cur.(map[string]any)
			if !ok {
				t.Fatalf("%s: no map at %v", o.key(), path)
			}
			cur = m[k]
		case int:
			l, ok := cur.([]any)
			if !ok || k >= len(l) {
				t.Fatalf("%s: no list item at %v", o.key(), path)
			}
			cur = l[k]
		}
	}
	return cur
}

func get(t *testing.T, objs objects, key string) object {
	t.Helper()
	o, ok := objs[key]
	if !ok {
		t.Fatalf("the chart renders no %s; it renders %v", key, objs.keys())
	}
	return o
}

// container returns a Deployment's only container, and its env as a map.
func container(t *testing.T, d object) (map[string]any, map[string]any) {
	t.Helper()
	c := field(t, d, "spec", "template", "spec", "containers", 0).(map[string]any)
	env := map[string]any{}
	for _, e := range c["env"].([]any) {
		m := e.(map[string]any)
		if v, ok := m["value"]; ok {
			env[m["name"].(string)] = v
		} else {
			env[m["name"].(string)] = m["valueFrom"]
		}
	}
	return c, env
}

func want(t *testing.T, what string, got, expected any) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(expected) {
		t.Errorf("%s = %v, want %v", what, got, expected)
	}
}

// TestChartTakesKubeElastiValues: a KubeElasti values file renders
// unchanged, and what it says is honoured on elasti's objects: elasti's
// images in place of KubeElasti's, the fixed object names, and the
// scheduling, resources, env, labels, monitoring and HPA it asks for.
func TestChartTakesKubeElastiValues(t *testing.T) {
	objs := render(t, "-f", repo(t, "charts", "elasti", "ci", kubeElastiValues))
	op := get(t, objs, "Deployment elasti/elasti-operator-controller-manager")
	res := get(t, objs, "Deployment elasti/elasti-resolver")
	opc, openv := container(t, op)
	resc, resenv := container(t, res)

	version := chartAppVersion(t)
	want(t, "operator image", opc["image"], "ghcr.io/elasti-dev/elasti-operator:"+version)
	want(t, "resolver image", resc["image"], "ghcr.io/elasti-dev/elasti-resolver:"+version)
	want(t, "operator args", opc["args"], []any{"--leader-elect", "--health-probe-bind-address=:8081", "--metrics-bind-address=:8080"})
	want(t, "operator memory limit", field(t, op, "spec", "template", "spec", "containers", 0, "resources", "limits", "memory"), "256Mi")
	want(t, "POLLING_INTERVAL", openv["POLLING_INTERVAL"], "15s")
	want(t, "PROMETHEUS_TRIGGER_SERVER_ADDRESS", openv["PROMETHEUS_TRIGGER_SERVER_ADDRESS"], "http://kube-prometheus-stack-prometheus.monitoring.svc.cluster.local:9090")
	want(t, "PROMETHEUS_TRIGGER_AUTHORIZATION_HEADER", openv["PROMETHEUS_TRIGGER_AUTHORIZATION_HEADER"], "Basic dXNlcjpwYXNz")
	want(t, "SENTRY_DSN", openv["SENTRY_DSN"], map[string]any{"secretKeyRef": map[string]any{"name": "elasti-secret", "key": "operatorSentryDsn"}})
	want(t, "SENTRY_ENVIRONMENT", openv["SENTRY_ENVIRONMENT"], "staging")
	want(t, "HEADER_FOR_HOST", resenv["HEADER_FOR_HOST"], "X-Envoy-Decorator-Operation")
	want(t, "REQ_TIMEOUT", resenv["REQ_TIMEOUT"], "600")
	want(t, "OPERATOR_RETRY_DURATION", resenv["OPERATOR_RETRY_DURATION"], "10")
	for _, d := range []object{op, res} {
		spec := field(t, d, "spec", "template", "spec").(map[string]any)
		want(t, d.key()+" imagePullSecrets", spec["imagePullSecrets"], []any{map[string]any{"name": "regcred"}})
		want(t, d.key()+" nodeSelector", spec["nodeSelector"], map[string]any{"kubernetes.io/os": "linux"})
		want(t, d.key()+" tolerations", len(spec["tolerations"].([]any)), 1)
		want(t, d.key()+" team label", field(t, d, "metadata", "labels", "team"), "platform")
		want(t, d.key()+" tier label", field(t, d, "metadata", "labels", "tier"), "control")
		want(t, d.key()+" pod label", field(t, d, "spec", "template", "metadata", "labels", "sidecar.istio.io/inject"), "false")
	}
	want(t, "operator affinity", field(t, op, "spec", "template", "spec", "affinity", "nodeAffinity") != nil, true)
	if _, ok := field(t, res, "spec").(map[string]any)["replicas"]; ok {
		t.Errorf("with autoscaling.enabled the resolver's replicas belong to the HPA, but the Deployment sets them")
	}
	hpa := get(t, objs, "HorizontalPodAutoscaler elasti/elasti-resolver")
	want(t, "HPA maxReplicas", field(t, hpa, "spec", "maxReplicas"), 6)
	for _, k := range []string{"ServiceMonitor elasti/elasti-operator", "ServiceMonitor elasti/elasti-resolver", "ConfigMap elasti/elasti-grafana-dashboard"} {
		get(t, objs, k)
	}
	want(t, "ServiceMonitor release label", field(t, get(t, objs, "ServiceMonitor elasti/elasti-operator"), "metadata", "labels", "release"), "kube-prometheus-stack")
	want(t, "resolver Service annotation", field(t, get(t, objs, "Service elasti/elasti-resolver-service"), "metadata", "annotations", "note"), "resolver-internal")
	want(t, "operator SA annotation", field(t, get(t, objs, "ServiceAccount elasti/elasti-operator"), "metadata", "annotations", "iam.example.com/role"), "elasti-operator")
	// Every name is manifests/' own.
	for _, k := range objs.keys() {
		if strings.Contains(k, "elasti-elasti") || strings.Contains(k, "kubeelasti") {
			t.Errorf("unexpected object name %s", k)
		}
	}
}

func chartAppVersion(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile(repo(t, "charts", "elasti", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^appVersion:\s*(\S+)`).FindSubmatch(src)
	if m == nil {
		t.Fatal("Chart.yaml has no appVersion")
	}
	return string(m[1])
}

// leafKeys lists the dotted paths of a values file's leaves (maps are
// walked; lists and scalars are leaves).
func leafKeys(prefix string, v any, out *[]string) {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 || isFreeForm(prefix) {
		*out = append(*out, prefix)
		return
	}
	for k, child := range m {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		leafKeys(p, child, out)
	}
}

// isFreeForm: maps whose keys are the user's (labels, resources, ...),
// which the README lists as one key.
func isFreeForm(path string) bool {
	last := path[strings.LastIndex(path, ".")+1:]
	switch last {
	case "labels", "annotations", "podLabels", "podAnnotations", "serviceLabels", "serviceAnnotations",
		"deploymentLabels", "deploymentAnnotations", "commonLabels", "commonAnnotations", "resources",
		"affinity", "nodeSelector", "containerSecurityContext", "podSecurityContext":
		return true
	}
	return false
}

// TestReadmeListsEveryKubeElastiKey: docs/install/helm.md's table says what
// becomes of every key of the KubeElasti values file.
func TestReadmeListsEveryKubeElastiKey(t *testing.T) {
	src, err := os.ReadFile(repo(t, "charts", "elasti", "ci", kubeElastiValues))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(src, &values); err != nil {
		t.Fatal(err)
	}
	var keys []string
	leafKeys("", values, &keys)
	sort.Strings(keys)
	readme, err := os.ReadFile(repo(t, "docs", "install", "helm.md"))
	if err != nil {
		t.Fatal(err)
	}
	// The keys named in the first cell of the table's rows.
	listed := map[string]bool{}
	for _, line := range strings.Split(string(readme), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		first := strings.SplitN(line[1:], "|", 2)[0]
		for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(first, -1) {
			listed[m[1]] = true
		}
	}
	for _, k := range keys {
		if !listed[k] {
			t.Errorf("docs/install/helm.md's KubeElasti values table has no row for `%s`", k)
		}
	}
}

// TestChartRefusesWithMessages: unknown keys, wrong types and KubeElasti
// settings elasti cannot honour are refused, each with a message that
// names the key and, for KubeElasti's, what to use instead.
func TestChartRefusesWithMessages(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  []string
		msg  []string
	}{
		{"unknown key", []string{"elastiController.replica=2"}, []string{"replica"}},
		{"unknown top-level key", []string{"operator.replicas=2"}, []string{"operator"}},
		{"mistyped", []string{"elastiController.replicas=two"}, []string{"replicas", "integer"}},
		{"bad pull policy", []string{"elastiResolver.proxy.imagePullPolicy=Sometimes"}, []string{"imagePullPolicy"}},
		{"bad digest", []string{"elastiController.manager.image.digest=latest"}, []string{"digest"}},
		{"101 namespaces", []string{"global.allowedNamespaces={" + namespaceList(101) + "}"}, []string{"/global/allowedNamespaces", "maxItems", "want 100"}},
		{"a namespace twice", []string{"global.allowedNamespaces={a,b,a}"}, []string{"/global/allowedNamespaces", "equal"}},
		{"a namespace that is no name", []string{"global.allowedNamespaces={Team-A}"}, []string{"/global/allowedNamespaces/0", "Team-A"}},
		{"log format", []string{"elastiController.manager.log.format=logfmt"}, []string{"/elastiController/manager/log/format", "text", "json"}},
		{"log level", []string{"elastiResolver.proxy.log.level=-1"}, []string{"/elastiResolver/proxy/log/level"}},
		{"extra env without a name", []string{"elastiResolver.proxy.extraEnv[0].value=x"}, []string{"/elastiResolver/proxy/extraEnv/0", "name"}},
		{"cold-start threshold", []string{"prometheusRule.coldStartP99Seconds=0"}, []string{"/prometheusRule/coldStartP99Seconds"}},
		{"alert duration", []string{"prometheusRule.notReadyFor=soon"}, []string{"/prometheusRule/notReadyFor"}},
		{"name override", []string{"global.fullnameOverride=x"}, []string{"global.fullnameOverride", "names", "fixed"}},
		{"queue size", []string{"elastiResolver.proxy.env.queueSize=100"}, []string{"queueSize=100", "--global-queue"}},
		{"queue concurrency", []string{"elastiResolver.proxy.env.maxQueueConcurrency=5"}, []string{"maxQueueConcurrency=5", "--per-service-queue"}},
		{"resolver sentry", []string{"elastiResolver.proxy.sentry.enabled=true"}, []string{"elastiResolver.proxy.sentry.enabled", "elastiController.manager.sentry"}},
		{"proxy service type", []string{"elastiResolver.reverseProxyService.type=NodePort"}, []string{"reverseProxyService.type", "elastiResolver.service.type"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var args []string
			for _, s := range tc.set {
				args = append(args, "--set", s)
			}
			out, err := helmTemplate(t, args...)
			if err == nil {
				t.Fatalf("helm template --set %v succeeded; want a refusal", tc.set)
			}
			for _, m := range tc.msg {
				if !strings.Contains(string(out), m) {
					t.Errorf("the refusal of %v does not say %q:\n%s", tc.set, m, out)
				}
			}
		})
	}
}

// TestChartOptions: the options no overlay expresses (image registry,
// digest and pull secrets, scheduling and resources, the resolver's HPA
// and flags) land where they should.
func TestChartOptions(t *testing.T) {
	objs := render(t, "-f", repo(t, "charts", "elasti", "ci", "scheduling-values.yaml"))
	op := get(t, objs, "Deployment elasti/elasti-operator-controller-manager")
	res := get(t, objs, "Deployment elasti/elasti-resolver")
	opc, _ := container(t, op)
	resc, _ := container(t, res)
	want(t, "operator image", opc["image"], "mirror.example.com/elasti/elasti-dev/elasti-operator@sha256:"+strings.Repeat("0", 63)+"1")
	want(t, "resolver image", resc["image"], "mirror.example.com/elasti/elasti-dev/elasti-resolver:v0.1.0-rc.1@sha256:"+strings.Repeat("0", 63)+"2")
	want(t, "resolver args", resc["args"], []any{"--global-queue=20000"})
	want(t, "operator memory", field(t, op, "spec", "template", "spec", "containers", 0, "resources", "limits", "memory"), "1Gi")
	want(t, "operator memory request", field(t, op, "spec", "template", "spec", "containers", 0, "resources", "requests", "memory"), "128Mi")
	for _, d := range []object{op, res} {
		want(t, d.key()+" imagePullSecrets", field(t, d, "spec", "template", "spec", "imagePullSecrets"), []any{map[string]any{"name": "mirror-pull"}})
		want(t, d.key()+" nodeSelector", field(t, d, "spec", "template", "spec", "nodeSelector"), map[string]any{"kubernetes.io/os": "linux"})
	}
	want(t, "operator tolerations", len(field(t, op, "spec", "template", "spec", "tolerations").([]any)), 1)
	want(t, "resolver spread", len(field(t, res, "spec", "template", "spec", "topologySpreadConstraints").([]any)), 1)
	want(t, "HPA min", field(t, get(t, objs, "HorizontalPodAutoscaler elasti/elasti-resolver"), "spec", "minReplicas"), 2)
}

// TestUninstallHookRunsTheOperatorsConfiguration: helm uninstall's
// pre-delete hook runs the operator's image, ServiceAccount, args and env,
// plus --release-all, whatever the values: it must find the Lease, the
// Deployment, the resolver and the watched namespace the operator uses.
func TestUninstallHookRunsTheOperatorsConfiguration(t *testing.T) {
	for _, values := range []string{"", "kubeelasti-values.yaml", "namespace-scoped-values.yaml", "allowed-namespaces-values.yaml",
		"wake-token-values.yaml", "scheduling-values.yaml", "extras-values.yaml"} {
		t.Run(values, func(t *testing.T) {
			var args []string
			if values != "" {
				args = []string{"-f", repo(t, "charts", "elasti", "ci", values)}
			}
			objs := render(t, args...)
			op := get(t, objs, "Deployment elasti/elasti-operator-controller-manager")
			job := get(t, objs, "Job elasti/elasti-uninstall")
			opc, _ := container(t, op)
			hookc, _ := container(t, job)
			pod := func(o object) map[string]any { return field(t, o, "spec", "template", "spec").(map[string]any) }
			want(t, "image", hookc["image"], opc["image"])
			want(t, "env", hookc["env"], opc["env"])
			want(t, "volumeMounts", hookc["volumeMounts"], opc["volumeMounts"])
			want(t, "volumes", pod(job)["volumes"], pod(op)["volumes"])
			want(t, "serviceAccountName", pod(job)["serviceAccountName"], pod(op)["serviceAccountName"])
			want(t, "imagePullSecrets", pod(job)["imagePullSecrets"], pod(op)["imagePullSecrets"])
			want(t, "nodeSelector", pod(job)["nodeSelector"], pod(op)["nodeSelector"])
			want(t, "tolerations", pod(job)["tolerations"], pod(op)["tolerations"])
			want(t, "priorityClassName", pod(job)["priorityClassName"], pod(op)["priorityClassName"])
			wantArgs := append(slices.Clone(opc["args"].([]any)), "--release-all", "--release-timeout=240s")
			want(t, "args", hookc["args"], wantArgs)
			want(t, "restartPolicy", pod(job)["restartPolicy"], "Never")
			want(t, "backoffLimit", field(t, job, "spec", "backoffLimit"), 0)
			// The operator's Services select its pods by this label; they
			// must never send a scale request to the hook.
			if l := field(t, job, "spec", "template", "metadata", "labels").(map[string]any); l["app.kubernetes.io/name"] == "elasti-operator" {
				t.Errorf("the hook's pod carries the operator's labels %v", l)
			}
		})
	}
}

// TestChartReadsPrometheusCredentialFromASecret: the operator's
// Prometheus credential comes from a Secret's key through a secretKeyRef,
// never as a plain value in the Deployment; asking for both ways is
// refused; KubeElasti's plain value still renders as it did
// (TestChartTakesKubeElastiValues).
func TestChartReadsPrometheusCredentialFromASecret(t *testing.T) {
	objs := render(t, "-f", repo(t, "charts", "elasti", "ci", "prometheus-secret-values.yaml"))
	_, env := container(t, get(t, objs, "Deployment elasti/elasti-operator-controller-manager"))
	want(t, "PROMETHEUS_TRIGGER_AUTHORIZATION_HEADER", env["PROMETHEUS_TRIGGER_AUTHORIZATION_HEADER"],
		map[string]any{"secretKeyRef": map[string]any{"name": "prometheus-credentials", "key": "authorization-header"}})

	// The key defaults to "authorization".
	objs = render(t, "--set", "elastiController.manager.env.prometheusTriggerAuthorizationSecret.name=prom")
	_, env = container(t, get(t, objs, "Deployment elasti/elasti-operator-controller-manager"))
	want(t, "PROMETHEUS_TRIGGER_AUTHORIZATION_HEADER with the default key", env["PROMETHEUS_TRIGGER_AUTHORIZATION_HEADER"],
		map[string]any{"secretKeyRef": map[string]any{"name": "prom", "key": "authorization"}})

	out, err := helmTemplate(t, "--set", "elastiController.manager.env.prometheusTriggerAuthorizationSecret.name=prom",
		"--set", "elastiController.manager.env.prometheusTriggerAuthorizationHeader=Bearer x")
	if err == nil || !strings.Contains(string(out), "not both") {
		t.Errorf("both the Secret and the plain value: err %v, output %s; want refused", err, out)
	}
}
