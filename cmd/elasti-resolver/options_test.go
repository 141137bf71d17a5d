package main

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"

	"github.com/elasti-dev/elasti/pkg/command"
	"github.com/elasti-dev/elasti/pkg/command/commandtest"
)

func parse(t *testing.T, env map[string]string, args ...string) (*options, error) {
	t.Helper()
	return command.Parse(flag.NewFlagSet("test", flag.ContinueOnError), bindFlags, func(k string) string { return env[k] }, args)
}

func TestKubeElastiResolverEnvironment(t *testing.T) {
	o, err := parse(t, map[string]string{
		"ELASTI_OPERATOR_SERVICE_NAME": "op-svc", "ELASTI_OPERATOR_NAMESPACE": "ops", "ELASTI_OPERATOR_PORT": "9013",
		"KUBERNETES_CLUSTER_DOMAIN": "corp.local", "REQ_TIMEOUT": "120", "HEADER_FOR_HOST": "X-Envoy-Decorator-Operation",
		"ELASTI_RESOLVER_PROXY_PORT": "8012", "ELASTI_RESOLVER_PORT": "8013",
	})
	if err != nil {
		t.Fatal(err)
	}
	r := o.resolver
	if r.OperatorURL != "http://op-svc.ops.svc.corp.local:9013" || r.RequestTimeout != 120*time.Second ||
		r.HostHeader != "X-Envoy-Decorator-Operation" || r.ClusterDomain != "corp.local" ||
		o.proxyBindAddress != ":8012" || o.internalBindAddress != ":8013" {
		t.Errorf("parsed %+v proxy %q internal %q", r, o.proxyBindAddress, o.internalBindAddress)
	}
}

func TestDefaultsNeedNoEnvironment(t *testing.T) {
	o, err := parse(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.resolver.OperatorURL != "http://elasti-operator-controller-service.elasti.svc.cluster.local:8013" || o.proxyBindAddress != ":8012" {
		t.Errorf("defaults %+v %q", o.resolver, o.proxyBindAddress)
	}
	// Generous enough for an ingress controller, whose clients share its
	// address.
	if o.resolver.SourceWakeRate != 10 || o.resolver.SourceWakeBurst != 100 {
		t.Errorf("wake limit %v/s, burst %d; want 10/s and 100", o.resolver.SourceWakeRate, o.resolver.SourceWakeBurst)
	}
}

func TestSourceWakeLimitFlags(t *testing.T) {
	o, err := parse(t, nil, "--source-wake-rate=0.5", "--source-wake-burst=20")
	if err != nil || o.resolver.SourceWakeRate != 0.5 || o.resolver.SourceWakeBurst != 20 {
		t.Errorf("parsed %v/s burst %d, err %v; want 0.5/s and 20", o.resolver.SourceWakeRate, o.resolver.SourceWakeBurst, err)
	}
	for _, flag := range []string{"--source-wake-rate=0", "--source-wake-burst=0"} {
		if _, err := parse(t, nil, flag); err != nil {
			t.Errorf("%s (the limit off) was refused: %v", flag, err)
		}
	}
}

func TestResourceBoundFlags(t *testing.T) {
	o, err := parse(t, nil, "--per-source-queue=50", "--max-held-bytes=1048576", "--splice-idle-timeout=1m", "--max-connections=800")
	r := o.resolver
	if err != nil || r.PerSourceQueue != 50 || r.MaxHeldBytes != 1<<20 || r.SpliceIdleTimeout != time.Minute || r.MaxConnections != 800 {
		t.Errorf("parsed %d, %d, %v, %d, err %v", r.PerSourceQueue, r.MaxHeldBytes, r.SpliceIdleTimeout, r.MaxConnections, err)
	}
	o, err = parse(t, nil, "--max-connections-per-source=10", "--max-request-bytes=2097152", "--namespace-share=25")
	r = o.resolver
	if err != nil || r.MaxConnectionsPerSource != 10 || r.MaxRequestBytes != 2<<20 || r.NamespaceShare != 25 {
		t.Errorf("parsed %d, %d, %d, err %v", r.MaxConnectionsPerSource, r.MaxRequestBytes, r.NamespaceShare, err)
	}
}

// The waiting page is off unless asked for, and then shown at once; a
// delay holds it back.
func TestWaitingPageFlags(t *testing.T) {
	o, err := parse(t, nil)
	if err != nil || o.resolver.WaitingPage || o.resolver.WaitingPageAfter != 0 {
		t.Errorf("defaults: on %v after %v, err %v; want off, 0", o.resolver.WaitingPage, o.resolver.WaitingPageAfter, err)
	}
	o, err = parse(t, nil, "--waiting-page", "--waiting-page-after=1500ms")
	if err != nil || !o.resolver.WaitingPage || o.resolver.WaitingPageAfter != 1500*time.Millisecond {
		t.Errorf("parsed on %v after %v, err %v; want on, 1.5s", o.resolver.WaitingPage, o.resolver.WaitingPageAfter, err)
	}
}

func TestBadResolverInput(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{map[string]string{"REQ_TIMEOUT": "soon"}, nil, "REQ_TIMEOUT"},
		{map[string]string{"ELASTI_RESOLVER_PROXY_PORT": "0"}, nil, "ELASTI_RESOLVER_PROXY_PORT"},
		{nil, []string{"--operator-url=operator:8013"}, "http://"},
		{nil, []string{"--per-service-queue=0"}, "per-service queue"},
		{nil, []string{"--source-wake-rate=-1"}, "--source-wake-rate=-1"},
		{nil, []string{"--source-wake-burst=-5"}, "--source-wake-burst=-5"},
		{nil, []string{"--max-buffered-body=0"}, "--max-buffered-body=0"},
		{nil, []string{"--max-buffered-body=2048", "--max-buffered-bodies=1024"}, "per body <= all bodies"},
		{nil, []string{"--per-source-queue=0"}, "--per-source-queue=0"},
		{nil, []string{"--max-held-bytes=0"}, "--max-held-bytes=0"},
		{nil, []string{"--splice-idle-timeout=0s"}, "--splice-idle-timeout=0s"},
		{nil, []string{"--max-connections=-1"}, "--max-connections=-1"},
		{nil, []string{"--max-connections-per-source=0"}, "--max-connections-per-source=0"},
		{nil, []string{"--max-request-bytes=0"}, "--max-request-bytes=0"},
		{nil, []string{"--namespace-share=0"}, "--namespace-share=0"},
		{nil, []string{"--namespace-share=101"}, "--namespace-share=101"},
		{nil, []string{"--waiting-page-after=-1s"}, "--waiting-page-after=-1s"},
		{nil, []string{"--waiting-page-after=2m", "--request-timeout=2m"}, "below --request-timeout"},
		{nil, []string{"--watch-namespace=team,Team_B"}, `"Team_B" is not a namespace name`},
		{nil, []string{"--watch-namespace=team,,b"}, `"" is not a namespace name`},
		{nil, []string{"--watch-namespace=team,team"}, `names "team" twice`},
		{nil, []string{"--kube-api-qps=0"}, "--kube-api-qps=0"},
		{nil, []string{"--kube-api-burst=0"}, "--kube-api-burst=0"},
	} {
		if _, err := parse(t, c.env, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("env %v args %v: %v, want an error mentioning %q", c.env, c.args, err, c.want)
		}
	}
}

// --watch-namespace takes the operator's list, with the same spelling.
func TestWatchNamespaceFlag(t *testing.T) {
	o, err := parse(t, nil)
	if err != nil || o.resolver.WatchNamespaces != nil {
		t.Errorf("default: %v, %v; want every namespace (nil)", o.resolver.WatchNamespaces, err)
	}
	o, err = parse(t, nil, "--watch-namespace= team , shop")
	if err != nil || !slices.Equal(o.resolver.WatchNamespaces, []string{"team", "shop"}) {
		t.Errorf("parsed %q, %v; want [team shop]", o.resolver.WatchNamespaces, err)
	}
}

// -h says what the resolver does, then lists its own flags, then klog's.
func TestHelpSummaryThenOwnFlagsThenKlogFlags(t *testing.T) {
	commandtest.CheckHelp(t, "elasti-resolver", summary, bindFlags)
}

// docs/reference/resolver.md's table documents every flag the resolver defines, and no other.
func TestFlagReferenceListsEveryFlag(t *testing.T) {
	commandtest.CheckReadmeFlagTable(t, "../../docs/reference/resolver.md", "# The resolver's flags", bindFlags)
}

// No token is sent unless a file is named, by flag or environment; a named
// file must hold a token at start.
func TestWakeTokenFile(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	o, err := parse(t, nil)
	if err != nil || o.wakeToken != nil {
		t.Fatalf("by default a wake token is sent (%v, err %v); KubeElasti's operator expects none", o.wakeToken, err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "token")
	if err := os.WriteFile(path, []byte("s3cr3t\nolder\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		env  map[string]string
		args []string
	}{
		{nil, []string{"--wake-token-file=" + path}},
		{map[string]string{"ELASTI_WAKE_TOKEN_FILE": path}, nil},
	} {
		o, err := parse(t, c.env, c.args...)
		if err != nil {
			t.Fatalf("env %v args %v: %v", c.env, c.args, err)
		}
		if o.wakeToken == nil || o.wakeToken.Current(ctx) != "s3cr3t" {
			t.Errorf("env %v args %v: not sending the first token of %s", c.env, c.args, path)
		}
	}
	missing := filepath.Join(dir, "missing")
	if _, err := parse(t, nil, "--wake-token-file="+missing); err == nil || !strings.Contains(err.Error(), "--wake-token-file="+missing) {
		t.Errorf("missing file: %v, want an error naming it", err)
	}
	if _, err := parse(t, map[string]string{"ELASTI_WAKE_TOKEN_FILE": dir}, nil...); err == nil {
		t.Error("a directory was accepted as the token file")
	}
}
