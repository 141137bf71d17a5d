package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"

	"github.com/elasti-dev/elasti/pkg/command"
	"github.com/elasti-dev/elasti/pkg/command/commandtest"
	"github.com/elasti-dev/elasti/pkg/portalloc"
	"github.com/elasti-dev/elasti/pkg/triggers"
)

func parse(t *testing.T, env map[string]string, args ...string) (*options, error) {
	t.Helper()
	return command.Parse(flag.NewFlagSet("test", flag.ContinueOnError), bindFlags, func(k string) string { return env[k] }, args)
}

func TestDefaultsWithoutEnvironment(t *testing.T) {
	o, err := parse(t, nil)
	if err != nil {
		t.Fatalf("no flags and no environment must work: %v", err)
	}
	if o.operator.ResolverNamespace != "elasti" || o.operator.ResolverService != "elasti-resolver-service" || o.operator.ResolverProxyPort != 8012 {
		t.Errorf("resolver defaults = %+v", o.operator)
	}
	if o.operator.ResolverPortRange != portalloc.DefaultRange || o.operator.ResolverPortRange.String() != "20000-29999" {
		t.Errorf("resolver port range = %s, want 20000-29999", o.operator.ResolverPortRange)
	}
	if o.metricsBindAddress != ":8080" || o.healthProbeBindAddress != ":8081" || o.leaderElect {
		t.Errorf("server defaults: metrics %q health %q leader %v", o.metricsBindAddress, o.healthProbeBindAddress, o.leaderElect)
	}
}

func TestKubeElastiEnvironmentIsHonoured(t *testing.T) {
	o, err := parse(t, map[string]string{
		"ELASTI_RESOLVER_NAMESPACE":    "infra",
		"ELASTI_RESOLVER_SERVICE_NAME": "resolver-svc",
		"ELASTI_RESOLVER_PROXY_PORT":   "9012",
		"ELASTI_OPERATOR_NAMESPACE":    "ops",
	})
	if err != nil {
		t.Fatal(err)
	}
	o2, err := parse(t, map[string]string{"POLLING_INTERVAL": "45s", "ELASTI_OPERATOR_PORT": "9013", "PROMETHEUS_TRIGGER_SERVER_ADDRESS": "http://prom:9090", "PROMETHEUS_TRIGGER_AUTHORIZATION_HEADER": "Bearer x"})
	if err != nil || o2.operator.PollingInterval != 45*time.Second || o2.wakeServerBindAddress != ":9013" ||
		o2.operator.PrometheusServerAddress != "http://prom:9090" || o2.operator.PrometheusAuthorizationHeader != "Bearer x" {
		t.Errorf("scaling environment not honoured: %v %+v %q", err, o2.operator, o2.wakeServerBindAddress)
	}
	if o.operator.ResolverNamespace != "infra" || o.operator.ResolverService != "resolver-svc" || o.operator.ResolverProxyPort != 9012 || o.leaderElectNamespace != "ops" {
		t.Errorf("environment not honoured: %+v lease ns %q", o.operator, o.leaderElectNamespace)
	}
	// A flag beats the environment.
	o, err = parse(t, map[string]string{"ELASTI_RESOLVER_PROXY_PORT": "9012"}, "--resolver-proxy-port=7000")
	if err != nil || o.operator.ResolverProxyPort != 7000 {
		t.Errorf("flag did not override env: %v %d", err, o.operator.ResolverProxyPort)
	}
}

func TestResolverPortRangeFlag(t *testing.T) {
	o, err := parse(t, nil, "--resolver-port-range=40000-40099", "--resolver-proxy-port=9012")
	if err != nil {
		t.Fatal(err)
	}
	if o.operator.ResolverPortRange != (portalloc.Range{First: 40000, Last: 40099}) {
		t.Errorf("range = %s", o.operator.ResolverPortRange)
	}
	// A range that holds the default proxy port is fine once the proxy port moved.
	if _, err := parse(t, nil, "--resolver-port-range=8012-8012", "--resolver-proxy-port=9012"); err == nil {
		t.Error("a range holding the resolver's own port 8012 was accepted")
	}
}

func TestResolverPortQuotaFlags(t *testing.T) {
	o, err := parse(t, nil)
	if err != nil || o.operator.ResolverPortQuota != portalloc.DefaultQuota {
		t.Errorf("default quota %+v, %v; want %+v", o.operator.ResolverPortQuota, err, portalloc.DefaultQuota)
	}
	o, err = parse(t, nil, "--resolver-ports-per-elastiservice=8", "--resolver-ports-per-namespace=0")
	if err != nil || o.operator.ResolverPortQuota != (portalloc.Quota{PerOwner: 8}) {
		t.Errorf("quota %+v, %v; want 8 per ElastiService, none per namespace", o.operator.ResolverPortQuota, err)
	}
	if _, err := parse(t, nil, "--resolver-ports-per-namespace=-1"); err == nil {
		t.Error("a negative quota was accepted")
	}
}

// The allow-list of trigger servers is empty (any server) unless set, by
// flag or environment, the flag winning.
func TestPrometheusAllowedServers(t *testing.T) {
	o, err := parse(t, nil)
	if err != nil || o.operator.PrometheusAllowedServers != nil {
		t.Fatalf("default allow-list = %v, %v; want none", o.operator.PrometheusAllowedServers, err)
	}
	o, err = parse(t, map[string]string{"ELASTI_PROMETHEUS_ALLOWED_SERVERS": "http://a:9090, https://b/prom"})
	if err != nil || fmt.Sprint(o.operator.PrometheusAllowedServers) != "[http://a:9090 https://b:443/prom]" {
		t.Errorf("from the environment: %v, %v", o.operator.PrometheusAllowedServers, err)
	}
	o, err = parse(t, map[string]string{"ELASTI_PROMETHEUS_ALLOWED_SERVERS": "http://a:9090"}, "--prometheus-allowed-servers=http://c")
	if err != nil || fmt.Sprint(o.operator.PrometheusAllowedServers) != "[http://c:80]" {
		t.Errorf("flag over environment: %v, %v", o.operator.PrometheusAllowedServers, err)
	}
}

// --prometheus-tenant-headers-allowed: none by default, names from the
// environment or the flag, the flag winning, and a bad name refused.
func TestPrometheusTenantHeaders(t *testing.T) {
	parsed := func(list string) triggers.TenantHeaders {
		h, err := triggers.ParseTenantHeaders(list)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	for _, tt := range []struct {
		env  map[string]string
		args []string
		want triggers.TenantHeaders
	}{
		{nil, nil, triggers.TenantHeaders{}},
		{map[string]string{"ELASTI_PROMETHEUS_TENANT_HEADERS_ALLOWED": "x-scope-orgid"}, nil, parsed("X-Scope-OrgID")},
		{map[string]string{"ELASTI_PROMETHEUS_TENANT_HEADERS_ALLOWED": "X-Scope-OrgID"}, []string{"--prometheus-tenant-headers-allowed=*"}, parsed("*")},
	} {
		o, err := parse(t, tt.env, tt.args...)
		if err != nil || !reflect.DeepEqual(o.operator.PrometheusTenantHeaders, tt.want) {
			t.Errorf("env %v args %v: %+v, %v; want %+v", tt.env, tt.args, o.operator.PrometheusTenantHeaders, err, tt.want)
		}
	}
	if _, err := parse(t, nil, "--prometheus-tenant-headers-allowed=X-Scope-OrgID,bad name"); err == nil ||
		!strings.Contains(err.Error(), "--prometheus-tenant-headers-allowed") {
		t.Errorf("a bad header name: %v, want refused", err)
	}
}

func TestKubeElastiFlagsAreAccepted(t *testing.T) {
	o, err := parse(t, nil, "--leader-elect", "--health-probe-bind-address=:8081", "--metrics-bind-address=0", "--watch-namespace=team-a", "--enable-http2=false")
	if err != nil {
		t.Fatal(err)
	}
	if !o.leaderElect || !disabled(o.metricsBindAddress) || !slices.Equal(o.operator.WatchNamespaces, []string{"team-a"}) {
		t.Errorf("parsed %+v", o)
	}
}

// --watch-namespace takes KubeElasti's one namespace or a comma-separated
// list (global.allowedNamespaces), up to nsinformer.MaxNamespaces.
func TestWatchNamespaceTakesAList(t *testing.T) {
	for _, c := range []struct {
		flag string
		want []string
	}{
		{"", nil},
		{"team-a", []string{"team-a"}},
		{"team-a,team-b", []string{"team-a", "team-b"}},
		{" team-a , team-b ", []string{"team-a", "team-b"}},
		{namespaceList(100), strings.Split(namespaceList(100), ",")},
	} {
		o, err := parse(t, nil, "--watch-namespace="+c.flag)
		if err != nil {
			t.Fatalf("--watch-namespace=%q: %v", c.flag, err)
		}
		if !slices.Equal(o.operator.WatchNamespaces, c.want) {
			t.Errorf("--watch-namespace=%q: watches %q, want %q", c.flag, o.operator.WatchNamespaces, c.want)
		}
	}
}

// namespaceList is n distinct namespace names, comma-separated.
func namespaceList(n int) string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("ns-%d", i)
	}
	return strings.Join(names, ",")
}

func TestBadInputIsAClearError(t *testing.T) {
	cases := []struct {
		env  map[string]string
		args []string
		want string
	}{
		{map[string]string{"ELASTI_RESOLVER_PROXY_PORT": "http"}, nil, `ELASTI_RESOLVER_PROXY_PORT="http" is not a TCP port`},
		{map[string]string{"ELASTI_RESOLVER_PROXY_PORT": "70000"}, nil, "is not a TCP port"},
		{nil, []string{"--resolver-proxy-port=0"}, "--resolver-proxy-port=0 is not a TCP port"},
		{nil, []string{"--kube-api-qps=0"}, "client QPS"},
		{nil, []string{"--elastiservice-workers=0"}, "at least one worker"},
		{nil, []string{"--metrics-secure"}, "--metrics-secure=true is not supported"},
		{nil, []string{"--leader-elect", "--leader-elect-renew-deadline=90s"}, "retry-period"},
		{map[string]string{"POLLING_INTERVAL": "soon"}, nil, `POLLING_INTERVAL="soon" is not a positive Go duration`},
		{map[string]string{"POLLING_INTERVAL": "-5s"}, nil, "POLLING_INTERVAL"},
		{map[string]string{"ELASTI_OPERATOR_PORT": "x"}, nil, "ELASTI_OPERATOR_PORT"},
		{nil, []string{"--resolver-port-range=20000"}, `--resolver-port-range: port range "20000" is not of the form FIRST-LAST`},
		{nil, []string{"--resolver-port-range=0-100"}, "not within 1-65535"},
		{nil, []string{"--resolver-port-range=65000-70000"}, "not within 1-65535"},
		{nil, []string{"--resolver-port-range=3000-2000"}, "ends before it starts"},
		{nil, []string{"--resolver-port-range=8000-8999"}, "contains the resolver proxy port 8012"},
		{nil, []string{"--resolver-port-range=8013-8013"}, "contains one of the resolver's own ports [8012 8013 8014]"},
		{nil, []string{"--resolver-port-range=8014-9000"}, "resolver's own ports"},
		{nil, []string{"--resolver-proxy-port=20500"}, "contains the resolver proxy port 20500"},
		{nil, []string{"--prometheus-allowed-servers=prometheus:9090"}, `--prometheus-allowed-servers: "prometheus:9090" is not an absolute http or https URL`},
		{map[string]string{"ELASTI_PROMETHEUS_ALLOWED_SERVERS": "http://p?tenant=a"}, nil, "--prometheus-allowed-servers: "},
		{nil, []string{"--watch-namespace=a,,b"}, `--watch-namespace: "" is not a namespace name`},
		{nil, []string{"--watch-namespace=a,"}, `--watch-namespace: "" is not a namespace name`},
		{nil, []string{"--watch-namespace=a,Team-B"}, `"Team-B" is not a namespace name`},
		{nil, []string{"--watch-namespace=a,b,a"}, `--watch-namespace names "a" twice`},
		{nil, []string{"--watch-namespace=" + namespaceList(101)}, "names 101 namespaces; at most 100"},
	}
	for _, c := range cases {
		_, err := parse(t, c.env, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("env %v args %v: err %v, want it to contain %q", c.env, c.args, err, c.want)
		}
	}
	if _, err := parse(t, nil, "--deletion-grace=banana"); err == nil {
		t.Error("an unparsable duration flag was accepted")
	}
}

// -h says what the operator does, then lists its own flags, then klog's.
func TestHelpSummaryThenOwnFlagsThenKlogFlags(t *testing.T) {
	commandtest.CheckHelp(t, "elasti-operator", summary, bindFlags)
}

// docs/reference/operator.md's table documents every flag the operator defines, and no other.
func TestFlagReferenceListsEveryFlag(t *testing.T) {
	commandtest.CheckReadmeFlagTable(t, "../../docs/reference/operator.md", "# The operator", bindFlags)
}

// The wake token is off unless a file is named, by flag or environment;
// a named file must hold a token at start.
func TestWakeTokenFile(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	o, err := parse(t, nil)
	if err != nil || o.operator.WakeTokens != nil {
		t.Fatalf("by default a wake token is required (%v, err %v); KubeElasti's resolver sends none", o.operator.WakeTokens, err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "token")
	if err := os.WriteFile(path, []byte("s3cr3t\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		env  map[string]string
		args []string
	}{
		{nil, []string{"--wake-token-file=" + path}},
		{map[string]string{"ELASTI_WAKE_TOKEN_FILE": path}, nil},
		{map[string]string{"ELASTI_WAKE_TOKEN_FILE": filepath.Join(dir, "missing")}, []string{"--wake-token-file=" + path}},
	} {
		o, err := parse(t, c.env, c.args...)
		if err != nil {
			t.Fatalf("env %v args %v: %v", c.env, c.args, err)
		}
		if o.operator.WakeTokens == nil || !o.operator.WakeTokens.Verify(ctx, "s3cr3t") || o.operator.WakeTokens.Verify(ctx, "other") {
			t.Errorf("env %v args %v: the token in %s is not what the scale endpoint requires", c.env, c.args, path)
		}
	}

	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{
		filepath.Join(dir, "missing"): "--wake-token-file=" + filepath.Join(dir, "missing"),
		empty:                         "holds no token",
	} {
		if _, err := parse(t, nil, "--wake-token-file="+file); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--wake-token-file=%s: %v, want an error containing %q", file, err, want)
		}
	}
}
