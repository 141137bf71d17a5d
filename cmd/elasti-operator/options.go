package main

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/elasti-dev/elasti/pkg/command"
	"github.com/elasti-dev/elasti/pkg/nsinformer"
	"github.com/elasti-dev/elasti/pkg/operator"
	"github.com/elasti-dev/elasti/pkg/portalloc"
	"github.com/elasti-dev/elasti/pkg/triggers"
	"github.com/elasti-dev/elasti/pkg/wakeserver"
	"github.com/elasti-dev/elasti/pkg/waketoken"
)

// Environment variables KubeElasti's deployments set; flags fall back to them.
const (
	envResolverNamespace   = "ELASTI_RESOLVER_NAMESPACE"
	envResolverServiceName = "ELASTI_RESOLVER_SERVICE_NAME"
	envResolverProxyPort   = "ELASTI_RESOLVER_PROXY_PORT"
	envOperatorNamespace   = "ELASTI_OPERATOR_NAMESPACE"
	envOperatorPort        = "ELASTI_OPERATOR_PORT"
	envOperatorDeployment  = "ELASTI_OPERATOR_DEPLOYMENT_NAME"
	envPollingInterval     = "POLLING_INTERVAL"
	envPrometheusAddress   = "PROMETHEUS_TRIGGER_SERVER_ADDRESS"
	envPrometheusAuth      = "PROMETHEUS_TRIGGER_AUTHORIZATION_HEADER"
	// elasti's own: the path of the wake token file, set on both binaries.
	envWakeTokenFile = waketoken.EnvFile
	// elasti's own: the servers triggers may query.
	envPrometheusAllowed = "ELASTI_PROMETHEUS_ALLOWED_SERVERS"
	// elasti's own: the tenant and identity headers triggers may send to
	// the default server.
	envPrometheusTenantHeaders = "ELASTI_PROMETHEUS_TENANT_HEADERS_ALLOWED"
)

// options is everything the command line and environment configure.
type options struct {
	kubeconfig             string
	metricsBindAddress     string
	healthProbeBindAddress string
	wakeServerBindAddress  string
	leaderElect            bool
	leaderElectNamespace   string
	leaderElectName        string
	leaseDuration          time.Duration
	renewDeadline          time.Duration
	retryPeriod            time.Duration
	metricsSecure          bool
	enableHTTP2            bool
	profiling              bool
	wakeTokenFile          string
	// releaseAll runs the one-shot release of helm uninstall's pre-delete
	// hook instead of the operator (release.go).
	releaseAll         bool
	releaseTimeout     time.Duration
	operatorDeployment string
	operator           operator.Options
}

// The leader-election timings. A leader that cannot renew its Lease
// within the renew deadline gives up leadership and the process exits 1,
// so the kubelet restarts it; with one replica (manifests/) nothing acts
// until the new container, under a new identity, outwaits the old Lease.
// Kubernetes' components use 15s, 10s and 2s. On the real node, with the
// elasti pods short of CPU while 999 ElastiServices at the largest specs
// arrived, renewals came up to 10.1s apart (2s when idle), then one
// missed the deadline: the previous container logged "Failed to renew
// lease" (context deadline exceeded while reading the response), "Failed
// to release lease" and "Exiting on error" err="lost leadership", exit
// code 1, and its successor waited 42s for the Lease. A busy operator on
// a slow apiserver keeps leading with 45s. An unclean death of the leader
// is taken over after 60s, which the resolver absorbs: it holds requests
// and retries its scale request for up to REQ_TIMEOUT (120s in
// manifests/). A clean exit releases the Lease at once.
const (
	defaultLeaseDuration = 60 * time.Second
	defaultRenewDeadline = 45 * time.Second
	defaultRetryPeriod   = 5 * time.Second
)

// bindFlags registers every flag on fs with defaults from the environment.
// Bad environment values are returned as an error once flags are parsed.
func bindFlags(fs *flag.FlagSet, getenv func(string) string) (*options, func() error) {
	env := &command.Env{Getenv: getenv}
	def := operator.DefaultOptions()
	o := &options{}
	o.operator = def
	bindServerFlags(fs, o, env)
	raw := bindResolverFlags(fs, &o.operator, env, def)
	bindWorkFlags(fs, o, env, def, &raw)
	bindReleaseFlags(fs, o, env)
	return o, func() error { return o.finish(env, raw) }
}

// rawFlags are the flags that need parsing or converting once fs is parsed.
type rawFlags struct {
	watchNamespaces *string
	proxyPort       *int
	portRange       *string
	qps             *float64
	allowedServers  *string
	tenantHeaders   *string
}

// bindServerFlags: the operator's own servers, leader election, and the
// flags KubeElasti's chart passes.
func bindServerFlags(fs *flag.FlagSet, o *options, env *command.Env) {
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", command.KubeconfigUsage)
	fs.StringVar(&o.metricsBindAddress, "metrics-bind-address", ":8080", `Address of the /metrics endpoint; "0" disables it.`)
	fs.StringVar(&o.healthProbeBindAddress, "health-probe-bind-address", ":8081", `Address of /healthz and /readyz; "0" disables them.`)
	fs.StringVar(&o.wakeServerBindAddress, "scale-server-bind-address", fmt.Sprintf(":%d", env.Port(envOperatorPort, 8013)),
		"Address of the scale-from-zero endpoint POST "+wakeserver.Path+` the resolver calls (port from env `+envOperatorPort+`); "0" disables it.`)
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "Elect a leader through a Lease so only one replica acts; followers keep warm caches.")
	fs.StringVar(&o.leaderElectNamespace, "leader-elect-namespace", env.String(envOperatorNamespace, "elasti"), "Namespace of the leader-election Lease (env "+envOperatorNamespace+").")
	fs.StringVar(&o.leaderElectName, "leader-elect-lease-name", "elasti-operator-leader", "Name of the leader-election Lease.")
	fs.DurationVar(&o.leaseDuration, "leader-elect-lease-duration", defaultLeaseDuration, "How long followers wait before taking over an unrenewed Lease.")
	fs.DurationVar(&o.renewDeadline, "leader-elect-renew-deadline", defaultRenewDeadline, "How long the leader keeps retrying a renewal before it gives up leadership.")
	fs.DurationVar(&o.retryPeriod, "leader-elect-retry-period", defaultRetryPeriod, "How often candidates retry acquiring or renewing the Lease.")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", false, "Accepted for KubeElasti compatibility; serving metrics over TLS is not supported (terminate TLS in front).")
	fs.BoolVar(&o.enableHTTP2, "enable-http2", false, "Accepted for KubeElasti compatibility; the operator's HTTP servers speak HTTP/1.1.")
	fs.BoolVar(&o.profiling, "profiling", false, "Serve Go's net/http/pprof profiles under /debug/pprof/ on the metrics address (--metrics-bind-address).")
}

// bindResolverFlags: what the operator fronts Services with, the resolver
// and its ports.
func bindResolverFlags(fs *flag.FlagSet, op *operator.Options, env *command.Env, def operator.Options) rawFlags {
	watchNamespaces := fs.String("watch-namespace", "", "Only watch these namespaces, comma-separated (one informer each, so Roles in them suffice); empty watches all namespaces.")
	fs.StringVar(&op.ResolverNamespace, "resolver-namespace", env.String(envResolverNamespace, def.ResolverNamespace), "Namespace of the resolver (env "+envResolverNamespace+").")
	fs.StringVar(&op.ResolverService, "resolver-service", env.String(envResolverServiceName, def.ResolverService), "Service in front of the resolver pods (env "+envResolverServiceName+").")
	proxyPort := fs.Int("resolver-proxy-port", env.Port(envResolverProxyPort, int(def.ResolverProxyPort)), "Resolver port that proxy-mode EndpointSlices point at when they route by Host (env "+envResolverProxyPort+").")
	portRange := fs.String("resolver-port-range", def.ResolverPortRange.String(),
		"Ports FIRST-LAST from which every fronted Service port gets a resolver port of its own (per-port routing). "+
			"The default avoids well-known and common application ports, Istio's 15000-15090, the NodePort range 30000-32767 "+
			"and Linux's ephemeral range 32768-60999; it must not contain the resolver's ports 8012-8014 or the proxy port.")
	fs.IntVar(&op.ResolverPortQuota.PerOwner, "resolver-ports-per-elastiservice", def.ResolverPortQuota.PerOwner,
		"Most resolver ports one ElastiService may hold (its Service's TCP ports, and an old Service's during a move); "+
			"past it the Service is reached through Host routing on the proxy port. 0: no bound.")
	fs.IntVar(&op.ResolverPortQuota.PerNamespace, "resolver-ports-per-namespace", def.ResolverPortQuota.PerNamespace,
		"Most resolver ports the ElastiServices of one namespace may hold together; "+
			"past it an ElastiService is reached through Host routing on the proxy port. 0: no bound.")
	fs.IntVar(&op.NamespaceBudget.Count, "namespace-budget-count", def.NamespaceBudget.Count,
		"Most ElastiServices of one namespace that are served; past it the newest get NamespaceBudgetExceeded. "+
			"Give the resolver the same value. 0: no bound.")
	fs.Int64Var(&op.NamespaceBudget.Bytes, "namespace-budget-bytes", def.NamespaceBudget.Bytes,
		"Most bytes of spec (as JSON) of the ElastiServices of one namespace that are served; past it the newest get NamespaceBudgetExceeded. "+
			"Give the resolver the same value. 0: no bound.")
	return rawFlags{watchNamespaces: watchNamespaces, proxyPort: proxyPort, portRange: portRange}
}

// bindWorkFlags: the apiserver client, the workers, idle polling and
// triggers, wakes.
func bindWorkFlags(fs *flag.FlagSet, o *options, env *command.Env, def operator.Options, raw *rawFlags) {
	op := &o.operator
	raw.qps = fs.Float64("kube-api-qps", float64(def.QPS), "Sustained requests per second to the apiserver.")
	fs.IntVar(&op.Burst, "kube-api-burst", def.Burst, "Request burst to the apiserver.")
	fs.IntVar(&op.ElastiServiceWorkers, "elastiservice-workers", def.ElastiServiceWorkers, "Workers reconciling ElastiServices in parallel.")
	fs.IntVar(&op.TargetWorkers, "scaletarget-workers", def.TargetWorkers, "Workers mapping scale-target events to ElastiServices.")
	fs.IntVar(&op.EndpointSliceWorkers, "endpointslice-workers", def.EndpointSliceWorkers, "Workers mapping EndpointSlice events to ElastiServices.")
	fs.DurationVar(&op.DeletionGrace, "deletion-grace", def.DeletionGrace, "How long a deleted ElastiService keeps the resolver in front while its restored target starts.")
	fs.DurationVar(&op.PollingInterval, "polling-interval", env.Duration(envPollingInterval, def.PollingInterval), "How often idle triggers are evaluated (env "+envPollingInterval+").")
	fs.IntVar(&op.PollParallelism, "poll-parallelism", def.PollParallelism, "ElastiServices whose triggers are evaluated at once.")
	fs.DurationVar(&op.QueryTimeout, "prometheus-query-timeout", def.QueryTimeout, "Timeout of each Prometheus query.")
	fs.StringVar(&op.PrometheusServerAddress, "prometheus-server-address", env.String(envPrometheusAddress, ""), "Prometheus used by triggers that set no serverAddress (env "+envPrometheusAddress+").")
	op.PrometheusAuthorizationHeader = env.String(envPrometheusAuth, "")
	raw.allowedServers = fs.String("prometheus-allowed-servers", env.String(envPrometheusAllowed, ""),
		"Comma-separated URL prefixes (scheme://host[:port][/path]) of the only Prometheus servers triggers may query besides "+
			"--prometheus-server-address; a trigger naming another is refused before any request. Empty: any server (env "+envPrometheusAllowed+").")
	raw.tenantHeaders = fs.String("prometheus-tenant-headers-allowed", env.String(envPrometheusTenantHeaders, ""),
		"Comma-separated header names that choose a tenant or identity (Authorization, X-Scope-OrgID, Cookie, ...) which triggers may "+
			"nonetheless send to --prometheus-server-address, a server every namespace shares; \"*\" allows all, as KubeElasti. "+
			"Empty: a trigger setting one on the default server is refused with InvalidMetadata (env "+envPrometheusTenantHeaders+").")
	fs.DurationVar(&op.WakeTimeout, "scale-timeout", def.WakeTimeout, "Timeout of one scale-from-zero call.")
	fs.DurationVar(&op.ResyncPeriod, "resync-period", def.ResyncPeriod, "How often every ElastiService is re-synced to repair unreported drift.")
	fs.StringVar(&o.wakeTokenFile, waketoken.Flag, env.String(envWakeTokenFile, ""),
		"File holding the wake token(s), one a line, e.g. a mounted Secret key; the scale endpoint then answers 401 to requests without "+
			"Authorization: Bearer <one of them>. Re-read when it changes. Empty: no token required (env "+envWakeTokenFile+").")
}

// bindReleaseFlags: --release-all, helm uninstall's pre-delete hook.
func bindReleaseFlags(fs *flag.FlagSet, o *options, env *command.Env) {
	fs.BoolVar(&o.releaseAll, "release-all", false,
		"Do not run the operator: release every ElastiService and exit, as helm uninstall's pre-delete hook does. "+
			"Stops the operator Deployment (--operator-deployment), takes its leader-election Lease, hands every Service back to its "+
			"target's own pods (scaled up to minTargetReplicas, a ready pod, then the resolver slice and private Service removed) "+
			"and removes elasti's finalizer; the ElastiServices stay. Exits non-zero, with the operator started again, if a "+
			"target has no ready pod within --release-timeout.")
	fs.DurationVar(&o.releaseTimeout, "release-timeout", 4*time.Minute, "How long --release-all waits for every target to serve.")
	fs.StringVar(&o.operatorDeployment, "operator-deployment", env.String(envOperatorDeployment, "elasti-operator-controller-manager"),
		"The operator Deployment, in --leader-elect-namespace, that --release-all stops first; empty stops none (env "+envOperatorDeployment+").")
}

// finish converts and checks what bindFlags bound, once fs is parsed: one
// error joins every problem, the environment's among them.
func (o *options) finish(env *command.Env, raw rawFlags) error {
	op := &o.operator
	op.ResolverProxyPort = int32(*raw.proxyPort)
	if !portalloc.IsPort(*raw.proxyPort) {
		env.Errs = append(env.Errs, fmt.Errorf("--resolver-proxy-port=%d is not a TCP port (1-65535)", *raw.proxyPort))
	}
	if r, err := portalloc.ParseRange(*raw.portRange); err != nil {
		env.Errs = append(env.Errs, fmt.Errorf("--resolver-port-range: %w", err))
	} else {
		op.ResolverPortRange = r
	}
	op.WatchNamespaces = nsinformer.ParseList(*raw.watchNamespaces)
	op.QPS = float32(*raw.qps)
	if list, err := triggers.ParseServerPrefixes(*raw.allowedServers); err != nil {
		env.Errs = append(env.Errs, fmt.Errorf("--prometheus-allowed-servers: %w", err))
	} else {
		op.PrometheusAllowedServers = list
	}
	if h, err := triggers.ParseTenantHeaders(*raw.tenantHeaders); err != nil {
		env.Errs = append(env.Errs, fmt.Errorf("--prometheus-tenant-headers-allowed: %w", err))
	} else {
		op.PrometheusTenantHeaders = h
	}
	if o.wakeTokenFile != "" {
		// Read now, so a missing or empty file stops the start.
		if tokens, err := waketoken.Load(o.wakeTokenFile); err != nil {
			env.Errs = append(env.Errs, err)
		} else {
			op.WakeTokens = tokens
		}
	}
	if o.metricsSecure {
		env.Errs = append(env.Errs, errors.New("--metrics-secure=true is not supported: serve /metrics over plain HTTP and terminate TLS in front"))
	}
	if o.leaderElect && (o.renewDeadline >= o.leaseDuration || o.retryPeriod >= o.renewDeadline) {
		env.Errs = append(env.Errs, fmt.Errorf("leader election needs retry-period (%s) < renew-deadline (%s) < lease-duration (%s)",
			o.retryPeriod, o.renewDeadline, o.leaseDuration))
	}
	if o.releaseAll && o.releaseTimeout <= 0 {
		env.Errs = append(env.Errs, fmt.Errorf("--release-timeout=%s must be positive", o.releaseTimeout))
	}
	if err := op.Validate(); err != nil {
		env.Errs = append(env.Errs, err)
	}
	return errors.Join(env.Errs...)
}

// disabled reports whether a bind address switches its server off, as in
// controller-runtime, whose "0" KubeElasti's chart uses.
func disabled(addr string) bool { return addr == "" || addr == "0" }
