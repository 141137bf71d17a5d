package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/elasti-dev/elasti/pkg/endpointready"
	versioned "github.com/elasti-dev/elasti/pkg/generated/clientset/versioned"
	elastiinformers "github.com/elasti-dev/elasti/pkg/generated/informers/externalversions"
	"github.com/elasti-dev/elasti/pkg/resolver"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
	"github.com/elasti-dev/elasti/pkg/resolver/proberules"
	"github.com/elasti-dev/elasti/test/localcluster/clustertest"
	"github.com/elasti-dev/elasti/test/testenv"
)

// stack is one test's namespace with the operator and a resolver running.
type stack struct {
	*testenv.Env
	// ResolverURL is the resolver's proxy listener on loopback.
	ResolverURL string
	// ScaleURL is the operator's scale endpoint on loopback.
	ScaleURL string
}

// newStack starts the operator and a resolver for a fresh namespace. The
// idle poller is slowed right down so no test scales anything by accident.
func newStack(t testing.TB) *stack {
	t.Helper()
	return newStackWith(t, nil)
}

// newStackWith is newStack with the resolver's apiserver client
// configuration changed by resolverConfig (when set).
func newStackWith(t testing.TB, resolverConfig func(*rest.Config)) *stack {
	t.Helper()
	podNetwork(t)
	e := testenv.New(t)
	e.Opts.PollingInterval = time.Hour
	e.Opts.WakeSettleWindow = 200 * time.Millisecond
	op := e.StartOperatorReturning()
	scale := httptest.NewServer(op.WakeServer.Handler())
	t.Cleanup(scale.Close)
	e.Resolver(1) // the pods the operator's resolver slice points at
	s := &stack{Env: e, ScaleURL: scale.URL}
	cfg := clustertest.Get(t).RESTConfig()
	if resolverConfig != nil {
		resolverConfig(cfg)
	}
	s.ResolverURL = s.startResolver(t, scale.URL, cfg)
	return s
}

// startResolver runs a resolver in-process, serving HTTP/1.1 and h2c on a
// loopback port and waking targets through operatorURL, until the test
// ends.
func (s *stack) startResolver(t testing.TB, operatorURL string, cfg *rest.Config) string {
	t.Helper()
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background().WithValues("test", t.Name(), "component", "resolver")))
	kubeFactory := informers.NewSharedInformerFactoryWithOptions(kubernetes.NewForConfigOrDie(cfg), 0, informers.WithNamespace(s.NS))
	elastiFactory := elastiinformers.NewSharedInformerFactoryWithOptions(versioned.NewForConfigOrDie(cfg), 0, elastiinformers.WithNamespace(s.NS))
	rc := resolver.DefaultConfig()
	rc.RequestTimeout = 30 * time.Second
	rc.OperatorRetryInitial = 100 * time.Millisecond
	rc.OperatorRetryMax = time.Second
	rc.OperatorURL = operatorURL
	// These tests and benchmarks send to the resolver itself, not through
	// kube-proxy, and some measure its forwarding to a Service that has
	// switched back to serve (FrontedAfterProxy): the drain, held open
	// here for the whole test. test/e2e/traffic checks the real drain.
	rc.FrontDrain = time.Hour
	named, err := clusterview.NewNamedIndex(elastiFactory.Elasti().V1alpha1().ElastiServices())
	if err != nil {
		t.Fatal(err)
	}
	eps, err := clusterview.NewInformerEndpoints(ctx, kubeFactory.Core().V1().Services(), kubeFactory.Discovery().V1().EndpointSlices(), named, rc.FrontDrain)
	if err != nil {
		t.Fatal(err)
	}
	probes, err := proberules.NewIndex(ctx, elastiFactory.Elasti().V1alpha1().ElastiServices())
	if err != nil {
		t.Fatal(err)
	}
	r, err := resolver.New(ctx, rc, resolver.Options{Endpoints: eps, Probes: probes, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	kubeFactory.Start(ctx.Done())
	elastiFactory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), eps.HasSynced, probes.HasSynced) {
		t.Fatal("resolver caches did not sync")
	}
	srv := httptest.NewUnstartedServer(r)
	resolver.ConfigureServer(srv.Config)
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		r.Close()
		cancel()
		kubeFactory.Shutdown()
		elastiFactory.Shutdown()
	})
	return srv.URL
}

// host is the Host header of a Service in the stack's namespace.
func (s *stack) host(service string, port int) string {
	return fmt.Sprintf("%s.%s.svc.cluster.local:%d", service, s.NS, port)
}

// do sends method path through the resolver to service.
func (s *stack) do(t *testing.T, client *http.Client, method, service, path string, body io.Reader) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequest(method, s.ResolverURL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = s.host(service, 80)
	return client.Do(req)
}

// sliceReadyIPs lists, sorted, the serving addresses in the EndpointSlices
// labelled for service, by the rule kube-proxy and the resolver use.
func (s *stack) sliceReadyIPs(service string) []string {
	var ips []string
	for _, sl := range s.SlicesFor(service) {
		for _, ep := range sl.Endpoints {
			if endpointready.Serving(ep) {
				ips = append(ips, ep.Addresses...)
			}
		}
	}
	slices.Sort(ips)
	return ips
}

// decodeEcho reads the backend's echo from resp. Anything else (an error
// page from the resolver, a cut-off body) fails the test with the status
// and the body as received, so the failure says who answered and why.
func decodeEcho(t *testing.T, resp *http.Response) echo {
	t.Helper()
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer (status %d, %d bytes so far: %q): %v", resp.StatusCode, len(body), body, err)
	}
	var got echo
	if err := json.Unmarshal(body, &got); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("not the backend's echo: status %d, body %q (%v)", resp.StatusCode, body, err)
	}
	return got
}
