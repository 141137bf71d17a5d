package main

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/elasti-dev/elasti/pkg/resolver"
)

// KubeElasti's resolver environment; flags fall back to it.
const (
	envResolverPort        = "ELASTI_RESOLVER_PORT"
	envResolverProxyPort   = "ELASTI_RESOLVER_PROXY_PORT"
	envOperatorNamespace   = "ELASTI_OPERATOR_NAMESPACE"
	envOperatorServiceName = "ELASTI_OPERATOR_SERVICE_NAME"
	envOperatorPort        = "ELASTI_OPERATOR_PORT"
	envClusterDomain       = "KUBERNETES_CLUSTER_DOMAIN"
	envRequestTimeout      = "REQ_TIMEOUT"
	envHeaderForHost       = "HEADER_FOR_HOST"
	envOperatorRetry       = "OPERATOR_RETRY_DURATION"
)

type options struct {
	kubeconfig          string
	proxyBindAddress    string
	internalBindAddress string
	shutdownGrace       time.Duration
	resolver            resolver.Config
}

type env struct {
	getenv func(string) string
	errs   []error
}

func (e *env) str(name, def string) string {
	if v := e.getenv(name); v != "" {
		return v
	}
	return def
}

func (e *env) port(name string, def int) int {
	v := e.getenv(name)
	if v == "" {
		return def
	}
	p, err := strconv.Atoi(v)
	if err != nil || p < 1 || p > 65535 {
		e.errs = append(e.errs, fmt.Errorf("%s=%q is not a TCP port (1-65535)", name, v))
		return def
	}
	return p
}

// seconds reads KubeElasti's whole-second values ("120") and also accepts
// Go durations ("2m").
func (e *env) seconds(name string, def time.Duration) time.Duration {
	v := e.getenv(name)
	if v == "" {
		return def
	}
	if n, err := strconv.Atoi(v); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return d
	}
	e.errs = append(e.errs, fmt.Errorf("%s=%q is neither whole seconds nor a positive Go duration", name, v))
	return def
}

func bindFlags(fs *flag.FlagSet, getenv func(string) string) (*options, func() error) {
	e := &env{getenv: getenv}
	def := resolver.DefaultConfig()
	o := &options{resolver: def}
	r := &o.resolver

	domain := e.str(envClusterDomain, def.ClusterDomain)
	operatorURL := fmt.Sprintf("http://%s.%s.svc.%s:%d",
		e.str(envOperatorServiceName, "elasti-operator-controller-service"),
		e.str(envOperatorNamespace, "elasti"), domain, e.port(envOperatorPort, 8013))

	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "Path to a kubeconfig; in-cluster configuration when empty.")
	fs.StringVar(&o.proxyBindAddress, "proxy-bind-address", fmt.Sprintf(":%d", e.port(envResolverProxyPort, def.ProxyPort)),
		"Address for proxied traffic, where proxy-mode EndpointSlices point (port from env "+envResolverProxyPort+").")
	fs.StringVar(&o.internalBindAddress, "internal-bind-address", fmt.Sprintf(":%d", e.port(envResolverPort, 8013)),
		"Address of /healthz, /readyz and /metrics (port from env "+envResolverPort+").")
	fs.DurationVar(&o.shutdownGrace, "shutdown-grace", 5*time.Second,
		"On shutdown, how long /readyz fails before held requests are answered 503 and the servers stop, so endpoints can update.")
	fs.StringVar(&r.OperatorURL, "operator-url", operatorURL, "Base URL of the operator's scale endpoint (from env ELASTI_OPERATOR_*).")
	fs.DurationVar(&r.RequestTimeout, "request-timeout", e.seconds(envRequestTimeout, def.RequestTimeout), "How long a request is held before a 504 (env "+envRequestTimeout+", seconds).")
	fs.StringVar(&r.HostHeader, "host-header", e.str(envHeaderForHost, ""), "Header naming the target host instead of Host (env "+envHeaderForHost+").")
	fs.StringVar(&r.ClusterDomain, "cluster-domain", domain, "Cluster DNS domain accepted in hosts (env "+envClusterDomain+").")
	fs.IntVar(&r.PerServiceQueue, "per-service-queue", def.PerServiceQueue, "Requests held at once for one service; more get 503.")
	fs.IntVar(&r.GlobalQueue, "global-queue", def.GlobalQueue, "Requests held at once in all; more get 503.")
	fs.DurationVar(&r.OperatorRetryMax, "operator-retry-max", e.seconds(envOperatorRetry, def.OperatorRetryMax), "Longest wait between scale requests to the operator (env "+envOperatorRetry+").")

	finish := func() error {
		if !strings.HasPrefix(r.OperatorURL, "http://") && !strings.HasPrefix(r.OperatorURL, "https://") {
			e.errs = append(e.errs, fmt.Errorf("--operator-url=%q must be an http:// or https:// URL", r.OperatorURL))
		}
		if r.RequestTimeout <= 0 || r.PerServiceQueue < 1 || r.GlobalQueue < r.PerServiceQueue {
			e.errs = append(e.errs, fmt.Errorf("request timeout must be positive and 1 <= per-service queue (%d) <= global queue (%d)",
				r.PerServiceQueue, r.GlobalQueue))
		}
		if o.shutdownGrace < 0 {
			e.errs = append(e.errs, fmt.Errorf("--shutdown-grace=%v is negative", o.shutdownGrace))
		}
		return errors.Join(e.errs...)
	}
	return o, finish
}
