package chart_test

import (
	"fmt"
	"strings"
	"testing"
)

// namespaceList is n distinct namespace names, comma-separated.
func namespaceList(n int) string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("ns-%d", i)
	}
	return strings.Join(names, ",")
}

// TestChartAllowedNamespaces: KubeElasti's namespace-scoped mode with two
// namespaces renders --watch-namespace with both, a Role and a RoleBinding
// of the operator in each, and no ClusterRole on ElastiServices; the
// uninstall hook watches the same namespaces (TestUninstallHook...).
func TestChartAllowedNamespaces(t *testing.T) {
	objs := render(t, "-f", repo(t, "charts", "elasti", "ci", "allowed-namespaces-values.yaml"))
	opc, _ := container(t, get(t, objs, "Deployment elasti/elasti-operator-controller-manager"))
	want(t, "operator args", opc["args"], []any{"--leader-elect", "--metrics-bind-address=:8080", "--health-probe-bind-address=:8081", "--watch-namespace=team-a,team-b"})
	// The resolver serves the same namespaces and no other.
	resc, _ := container(t, get(t, objs, "Deployment elasti/elasti-resolver"))
	want(t, "resolver args", resc["args"], []any{"--watch-namespace=team-a,team-b"})
	for _, ns := range []string{"team-a", "team-b"} {
		role := get(t, objs, "Role "+ns+"/elasti-operator")
		binding := get(t, objs, "RoleBinding "+ns+"/elasti-operator")
		want(t, ns+" role grants elastiservices", strings.Contains(fmt.Sprint(role["rules"]), "elastiservices"), true)
		want(t, ns+" binding's role", field(t, binding, "roleRef", "name"), "elasti-operator")
		want(t, ns+" binding's subject", field(t, binding, "subjects", 0), map[string]any{"kind": "ServiceAccount", "name": "elasti-operator", "namespace": namespace})
	}
	for _, k := range []string{"ClusterRole <nil>/elasti-operator", "ClusterRoleBinding <nil>/elasti-operator"} {
		if _, ok := objs[k]; ok {
			t.Errorf("a namespace-scoped install renders %s", k)
		}
	}
	var roles []string
	for _, k := range objs.keys() {
		if strings.HasPrefix(k, "Role ") && strings.HasSuffix(k, "/elasti-operator") {
			roles = append(roles, k)
		}
	}
	want(t, "operator Roles", roles, []string{"Role team-a/elasti-operator", "Role team-b/elasti-operator"})
}

// TestChartExtras: priority classes, per-component pull secrets (beside
// the global ones, each once), extra flags and environment, and the log
// values as the binaries' -v and --log-format, each on its component only.
func TestChartExtras(t *testing.T) {
	objs := render(t, "-f", repo(t, "charts", "elasti", "ci", "extras-values.yaml"))
	op := get(t, objs, "Deployment elasti/elasti-operator-controller-manager")
	res := get(t, objs, "Deployment elasti/elasti-resolver")
	opc, openv := container(t, op)
	resc, resenv := container(t, res)
	pod := func(o object) map[string]any { return field(t, o, "spec", "template", "spec").(map[string]any) }
	secrets := func(names ...string) []any {
		var out []any
		for _, n := range names {
			out = append(out, map[string]any{"name": n})
		}
		return out
	}

	want(t, "operator priorityClassName", pod(op)["priorityClassName"], "system-cluster-critical")
	want(t, "resolver priorityClassName", pod(res)["priorityClassName"], "elasti-resolver-critical")
	want(t, "operator imagePullSecrets", pod(op)["imagePullSecrets"], secrets("shared-pull", "operator-pull"))
	want(t, "resolver imagePullSecrets", pod(res)["imagePullSecrets"], secrets("shared-pull", "resolver-pull"))
	want(t, "operator args", opc["args"], []any{"--leader-elect", "--metrics-bind-address=:8080", "--health-probe-bind-address=:8081",
		"-v=2", "--log-format=json", "--elastiservice-workers=32"})
	want(t, "resolver args", resc["args"], []any{"--global-queue=20000", "-v=4", "--per-service-queue=500"})
	want(t, "operator GODEBUG", openv["GODEBUG"], "http2client=0")
	want(t, "resolver TZ", resenv["TZ"], "UTC")
	if _, ok := openv["TZ"]; ok {
		t.Error("the resolver's extraEnv reached the operator")
	}
	if _, ok := resenv["GODEBUG"]; ok {
		t.Error("the operator's extraEnv reached the resolver")
	}
	// The chart's own env is all still there.
	want(t, "operator POLLING_INTERVAL", openv["POLLING_INTERVAL"], "30s")
	want(t, "resolver REQ_TIMEOUT", resenv["REQ_TIMEOUT"], "120s")
}

// TestChartLogFormatText: format text adds no flag (it is the binaries'
// default) while a level alone adds -v.
func TestChartLogFormatText(t *testing.T) {
	objs := render(t, "--set", "elastiResolver.proxy.log.level=3", "--set", "elastiController.manager.log.format=json")
	opc, _ := container(t, get(t, objs, "Deployment elasti/elasti-operator-controller-manager"))
	resc, _ := container(t, get(t, objs, "Deployment elasti/elasti-resolver"))
	want(t, "resolver args", resc["args"], []any{"-v=3"})
	want(t, "operator args", opc["args"], []any{"--leader-elect", "--metrics-bind-address=:8080", "--health-probe-bind-address=:8081", "--log-format=json"})
}
