package main

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/elasti-dev/elasti/pkg/operator"
	"github.com/elasti-dev/elasti/pkg/scaleserver"
)

// Environment variables KubeElasti's deployments set; flags fall back to them.
const (
	envResolverNamespace   = "ELASTI_RESOLVER_NAMESPACE"
	envResolverServiceName = "ELASTI_RESOLVER_SERVICE_NAME"
	envResolverProxyPort   = "ELASTI_RESOLVER_PROXY_PORT"
	envOperatorNamespace   = "ELASTI_OPERATOR_NAMESPACE"
	envOperatorPort        = "ELASTI_OPERATOR_PORT"
	envPollingInterval     = "POLLING_INTERVAL"
	envPrometheusAddress   = "PROMETHEUS_TRIGGER_SERVER_ADDRESS"
	envPrometheusAuth      = "PROMETHEUS_TRIGGER_AUTHORIZATION_HEADER"
)

// options is everything the command line and environment configure.
type options struct {
	kubeconfig             string
	metricsBindAddress     string
	healthProbeBindAddress string
	scaleServerBindAddress string
	leaderElect            bool
	leaderElectNamespace   string
	leaderElectName        string
	leaseDuration          time.Duration
	renewDeadline          time.Duration
	retryPeriod            time.Duration
	metricsSecure          bool
	enableHTTP2            bool
	operator               operator.Options
}

// envDefaults collects environment-derived defaults and the first bad value.
type envDefaults struct {
	getenv func(string) string
	errs   []error
}

func (e *envDefaults) str(name, def string) string {
	if v := e.getenv(name); v != "" {
		return v
	}
	return def
}

func (e *envDefaults) duration(name string, def time.Duration) time.Duration {
	v := e.getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		e.errs = append(e.errs, fmt.Errorf("%s=%q is not a positive Go duration such as 30s", name, v))
		return def
	}
	return d
}

func (e *envDefaults) port(name string, def int32) int32 {
	v := e.getenv(name)
	if v == "" {
		return def
	}
	p, err := strconv.ParseInt(v, 10, 32)
	if err != nil || p < 1 || p > 65535 {
		e.errs = append(e.errs, fmt.Errorf("%s=%q is not a TCP port (1-65535)", name, v))
		return def
	}
	return int32(p)
}

// bindFlags registers every flag on fs with defaults from the environment.
// Bad environment values are returned as an error once flags are parsed.
func bindFlags(fs *flag.FlagSet, getenv func(string) string) (*options, func() error) {
	env := &envDefaults{getenv: getenv}
	def := operator.DefaultOptions()
	o := &options{}
	op := &o.operator
	*op = def

	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "Path to a kubeconfig; in-cluster configuration when empty.")
	fs.StringVar(&o.metricsBindAddress, "metrics-bind-address", ":8080", `Address of the /metrics endpoint; "0" disables it.`)
	fs.StringVar(&o.healthProbeBindAddress, "health-probe-bind-address", ":8081", `Address of /healthz and /readyz; "0" disables them.`)
	fs.StringVar(&o.scaleServerBindAddress, "scale-server-bind-address", fmt.Sprintf(":%d", env.port(envOperatorPort, 8013)),
		"Address of the scale-from-zero endpoint POST "+scaleserver.Path+` the resolver calls (port from env `+envOperatorPort+`); "0" disables it.`)
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "Elect a leader through a Lease so only one replica acts; followers keep warm caches.")
	fs.StringVar(&o.leaderElectNamespace, "leader-elect-namespace", env.str(envOperatorNamespace, "elasti"), "Namespace of the leader-election Lease (env "+envOperatorNamespace+").")
	fs.StringVar(&o.leaderElectName, "leader-elect-lease-name", "elasti-operator-leader", "Name of the leader-election Lease.")
	fs.DurationVar(&o.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "How long followers wait before taking over an unrenewed Lease.")
	fs.DurationVar(&o.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "How long the leader keeps retrying a renewal before it gives up leadership.")
	fs.DurationVar(&o.retryPeriod, "leader-elect-retry-period", 2*time.Second, "How often candidates retry acquiring or renewing the Lease.")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", false, "Accepted for KubeElasti compatibility; serving metrics over TLS is not supported (terminate TLS in front).")
	fs.BoolVar(&o.enableHTTP2, "enable-http2", false, "Accepted for KubeElasti compatibility; the operator's HTTP servers speak HTTP/1.1.")
	fs.StringVar(&op.WatchNamespace, "watch-namespace", "", "Only watch this namespace; empty watches all namespaces.")
	fs.StringVar(&op.ResolverNamespace, "resolver-namespace", env.str(envResolverNamespace, def.ResolverNamespace), "Namespace of the resolver (env "+envResolverNamespace+").")
	fs.StringVar(&op.ResolverService, "resolver-service", env.str(envResolverServiceName, def.ResolverService), "Service in front of the resolver pods (env "+envResolverServiceName+").")
	proxyPort := fs.Int("resolver-proxy-port", int(env.port(envResolverProxyPort, def.ResolverProxyPort)), "Resolver port that proxy-mode EndpointSlices point at (env "+envResolverProxyPort+").")
	qps := fs.Float64("kube-api-qps", float64(def.QPS), "Sustained requests per second to the apiserver.")
	fs.IntVar(&op.Burst, "kube-api-burst", def.Burst, "Request burst to the apiserver.")
	fs.IntVar(&op.ElastiServiceWorkers, "elastiservice-workers", def.ElastiServiceWorkers, "Workers reconciling ElastiServices in parallel.")
	fs.IntVar(&op.TargetWorkers, "scaletarget-workers", def.TargetWorkers, "Workers mapping scale-target events to ElastiServices.")
	fs.IntVar(&op.EndpointSliceWorkers, "endpointslice-workers", def.EndpointSliceWorkers, "Workers mapping EndpointSlice events to ElastiServices.")
	fs.DurationVar(&op.DeletionGrace, "deletion-grace", def.DeletionGrace, "How long a deleted ElastiService keeps the resolver in front while its restored target starts.")
	fs.DurationVar(&op.PollingInterval, "polling-interval", env.duration(envPollingInterval, def.PollingInterval), "How often idle triggers are evaluated (env "+envPollingInterval+").")
	fs.IntVar(&op.PollParallelism, "poll-parallelism", def.PollParallelism, "ElastiServices whose triggers are evaluated at once.")
	fs.DurationVar(&op.QueryTimeout, "prometheus-query-timeout", def.QueryTimeout, "Timeout of each Prometheus query.")
	fs.StringVar(&op.PrometheusServerAddress, "prometheus-server-address", env.str(envPrometheusAddress, ""), "Prometheus used by triggers that set no serverAddress (env "+envPrometheusAddress+").")
	op.PrometheusAuthorizationHeader = env.str(envPrometheusAuth, "")
	fs.DurationVar(&op.ScaleTimeout, "scale-timeout", def.ScaleTimeout, "Timeout of one scale-from-zero call.")
	fs.DurationVar(&op.ResyncPeriod, "resync-period", def.ResyncPeriod, "How often every ElastiService is re-synced to repair unreported drift.")

	finish := func() error {
		op.ResolverProxyPort = int32(*proxyPort)
		if *proxyPort < 1 || *proxyPort > 65535 {
			env.errs = append(env.errs, fmt.Errorf("--resolver-proxy-port=%d is not a TCP port (1-65535)", *proxyPort))
		}
		op.QPS = float32(*qps)
		if o.metricsSecure {
			env.errs = append(env.errs, errors.New("--metrics-secure=true is not supported: serve /metrics over plain HTTP and terminate TLS in front"))
		}
		if o.leaderElect && (o.renewDeadline >= o.leaseDuration || o.retryPeriod >= o.renewDeadline) {
			env.errs = append(env.errs, fmt.Errorf("leader election needs retry-period (%s) < renew-deadline (%s) < lease-duration (%s)",
				o.retryPeriod, o.renewDeadline, o.leaseDuration))
		}
		if err := op.Validate(); err != nil {
			env.errs = append(env.errs, err)
		}
		return errors.Join(env.errs...)
	}
	return o, finish
}

// disabled reports whether a bind address switches its server off, as in
// controller-runtime, whose "0" KubeElasti's chart uses.
func disabled(addr string) bool { return addr == "" || addr == "0" }
