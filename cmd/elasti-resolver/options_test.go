package main

import (
	"flag"
	"strings"
	"testing"
	"time"

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
	} {
		if _, err := parse(t, c.env, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("env %v args %v: %v, want an error mentioning %q", c.env, c.args, err, c.want)
		}
	}
}

// -h says what the resolver does, then lists its own flags, then klog's.
func TestHelpSummaryThenOwnFlagsThenKlogFlags(t *testing.T) {
	commandtest.CheckHelp(t, "elasti-resolver", summary, bindFlags)
}

// The README's resolver table documents every flag the resolver defines.
func TestReadmeFlagTableListsEveryFlag(t *testing.T) {
	commandtest.CheckReadmeFlagTable(t, "../../README.md", "## The resolver", bindFlags)
}
