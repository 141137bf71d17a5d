package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/elasti-dev/elasti/pkg/command"
	"github.com/elasti-dev/elasti/pkg/nsinformer"
	"github.com/elasti-dev/elasti/pkg/portalloc"
	"github.com/elasti-dev/elasti/pkg/resolver"
	"github.com/elasti-dev/elasti/pkg/resolver/hold"
	"github.com/elasti-dev/elasti/pkg/waketoken"
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
	// elasti's own: the path of the wake token file, set on both binaries.
	envWakeTokenFile = waketoken.EnvFile
)

type options struct {
	kubeconfig          string
	proxyBindAddress    string
	internalBindAddress string
	routesBindAddress   string
	shutdownGrace       time.Duration
	wakeTokenFile       string
	// wakeToken is nil unless wakeTokenFile is set.
	wakeToken hold.TokenSource
	// kubeAPIQPS and kubeAPIBurst rate the apiserver client of the
	// informers and, in a client of its own, that of direct probing's pod
	// reads.
	kubeAPIQPS   float64
	kubeAPIBurst int
	resolver     resolver.Config
}

// The apiserver client's defaults: a wake of 100 Services at once reads up
// to four starting pods of each (direct probing), 400 reads in a burst.
const (
	defaultKubeAPIQPS   = 100
	defaultKubeAPIBurst = 400
)

func bindFlags(fs *flag.FlagSet, getenv func(string) string) (*options, func() error) {
	e := &command.Env{Getenv: getenv}
	def := resolver.DefaultConfig()
	o := &options{resolver: def}
	r := &o.resolver

	domain := e.String(envClusterDomain, def.ClusterDomain)
	operatorURL := fmt.Sprintf("http://%s.%s.svc.%s:%d",
		e.String(envOperatorServiceName, "elasti-operator-controller-service"),
		e.String(envOperatorNamespace, "elasti"), domain, e.Port(envOperatorPort, 8013))

	fs.StringVar(&o.kubeconfig, "kubeconfig", "", command.KubeconfigUsage)
	fs.Float64Var(&o.kubeAPIQPS, "kube-api-qps", defaultKubeAPIQPS,
		"Sustained requests per second to the apiserver, for the informers and, on a client of their own, for direct probing's pod reads.")
	fs.IntVar(&o.kubeAPIBurst, "kube-api-burst", defaultKubeAPIBurst, "Request burst to the apiserver, for each of the two clients of --kube-api-qps.")
	fs.StringVar(&o.proxyBindAddress, "proxy-bind-address", fmt.Sprintf(":%d", e.Port(envResolverProxyPort, def.ProxyPort)),
		"Address for proxied traffic, where proxy-mode EndpointSlices point (port from env "+envResolverProxyPort+").")
	fs.StringVar(&o.internalBindAddress, "internal-bind-address", fmt.Sprintf(":%d", e.Port(envResolverPort, 8013)),
		"Address of /healthz, /readyz and /metrics (port from env "+envResolverPort+").")
	fs.StringVar(&o.routesBindAddress, "routes-bind-address", ":8014",
		"Address of the per-port-routing port. The manifests name it per-port, which tells the operator this resolver serves per-port routing; it answers 404 to everything (GET /routes is on --internal-bind-address).")
	portRange := fs.String("resolver-port-range", def.PortRange.String(),
		"Ports FIRST-LAST the resolver may listen on for per-port routing; set it to the operator's --resolver-port-range. A port an ElastiService's status records outside it is never opened.")
	fs.DurationVar(&r.FrontDrain, "front-drain", def.FrontDrain,
		"How long the resolver still forwards for a Service after its resolver EndpointSlice is deleted (the switch to serve), for what kube-proxy and ingress controllers send before they follow; after it, a request is answered 404.")
	fs.DurationVar(&o.shutdownGrace, "shutdown-grace", 5*time.Second,
		"On shutdown, how long /readyz fails before the servers stop accepting, so endpoints can update; held requests then wait up to 18 s more for their targets before they get 503.")
	fs.StringVar(&r.OperatorURL, "operator-url", operatorURL, "Base URL of the operator's wake endpoint (from env ELASTI_OPERATOR_*).")
	fs.DurationVar(&r.RequestTimeout, "request-timeout", e.Seconds(envRequestTimeout, def.RequestTimeout), "How long a request is held before a 504 (env "+envRequestTimeout+", seconds).")
	fs.DurationVar(&r.MaxHoldTimeout, "max-hold-timeout", def.MaxHoldTimeout,
		"The longest an ElastiService's spec.hold.timeout may hold a request for its Service; a longer one is cut to this.")
	fs.StringVar(&r.HostHeader, "host-header", e.String(envHeaderForHost, ""), "Header naming the target host instead of Host (env "+envHeaderForHost+").")
	fs.StringVar(&r.ClusterDomain, "cluster-domain", domain, "Cluster DNS domain accepted in hosts (env "+envClusterDomain+").")
	fs.IntVar(&r.PerServiceQueue, "per-service-queue", def.PerServiceQueue, "Requests held at once for one service (an ElastiService's spec.hold.maxRequests replaces it for its Service); more get 503.")
	fs.IntVar(&r.GlobalQueue, "global-queue", def.GlobalQueue, "Requests held at once in all; more get 503.")
	fs.IntVar(&r.PerSourceQueue, "per-source-queue", def.PerSourceQueue,
		"Requests and TCP connections one client address holds at once, for all Services; more get 429 with Retry-After (a connection is closed). "+
			"Behind an ingress controller every client shares its address.")
	fs.Int64Var(&r.MaxHeldBytes, "max-held-bytes", def.MaxHeldBytes,
		"Bytes that held requests keep in memory besides their bodies (headers, HTTP/2 stream windows of bodies that stream, TCP read buffers), all together; past it 503 with Retry-After.")
	fs.DurationVar(&r.SpliceIdleTimeout, "splice-idle-timeout", def.SpliceIdleTimeout,
		"A spliced TCP connection on which no byte moves either way for this long is closed (after between it and twice it).")
	fs.IntVar(&r.MaxConnections, "max-connections", def.MaxConnections,
		"Client connections open at once on the proxy port and every resolver port together; one more is closed as soon as it is accepted.")
	fs.IntVar(&r.MaxConnectionsPerSource, "max-connections-per-source", def.MaxConnectionsPerSource,
		"Of --max-connections, those one client address may keep open; one more from it is closed as soon as it is accepted.")
	fs.Int64Var(&r.MaxRequestBytes, "max-request-bytes", def.MaxRequestBytes,
		"Bytes every HTTP request in flight, held or not, is charged together (headers, HTTP/2 stream window, buffered body, 16 KiB each and 20 KiB more while forwarded); past it 503 with Retry-After. "+
			"HTTP/2 connections may open as many concurrent streams as a namespace's share of it holds at their largest.")
	fs.IntVar(&r.NamespaceShare, "namespace-share", def.NamespaceShare,
		"Percentage of --global-queue, --max-held-bytes and --max-request-bytes that the requests for one namespace's Services may take; past it 503 with Retry-After. 100 turns it off.")
	fs.Func("watch-namespace", "Only serve the Services of these namespaces, comma-separated; set it to the operator's --watch-namespace. Empty serves every namespace.",
		func(v string) error { r.WatchNamespaces = nsinformer.ParseList(v); return nil })
	fs.IntVar(&r.NamespaceBudget.Count, "namespace-budget-count", def.NamespaceBudget.Count,
		"Most ElastiServices of one namespace the resolver keeps and serves, oldest first; set it to the operator's. 0: no bound.")
	fs.Int64Var(&r.NamespaceBudget.Bytes, "namespace-budget-bytes", def.NamespaceBudget.Bytes,
		"Most bytes of spec (as JSON) of the ElastiServices of one namespace the resolver keeps and serves, oldest first; set it to the operator's. 0: no bound.")
	fs.StringVar(&r.ColdStartHeader, "cold-start-header", def.ColdStartHeader,
		`Response header that tells a client how long its request was held while the Service woke; "" turns it off.`)
	fs.Int64Var(&r.MaxBufferedBody, "max-buffered-body", def.MaxBufferedBody,
		"Largest held request body, in bytes, read into memory while the Service wakes; larger and chunked bodies stream to the pod once it is Ready.")
	fs.Int64Var(&r.MaxBufferedBodies, "max-buffered-bodies", def.MaxBufferedBodies,
		"Bytes that all buffered held bodies may take together; past it, bodies stream.")
	fs.DurationVar(&r.OperatorRetryMax, "operator-retry-max", e.Seconds(envOperatorRetry, def.OperatorRetryMax), "Longest wait between wake requests to the operator (env "+envOperatorRetry+").")
	fs.Float64Var(&r.SourceWakeRate, "source-wake-rate", def.SourceWakeRate,
		"Wakes per second one client address may start once its burst is spent; a request over the limit gets 429 with Retry-After. "+
			"Requests for a Service already waking or up cost nothing. Behind an ingress controller every client shares its address. 0 turns the limit off.")
	fs.IntVar(&r.SourceWakeBurst, "source-wake-burst", def.SourceWakeBurst,
		"Wakes one client address may start at once before --source-wake-rate applies. 0 turns the limit off.")
	fs.BoolVar(&r.ProbePods, "probe-pods", def.ProbePods,
		"Forward a held request to a starting pod as soon as the pod passes its own readiness probes (httpGet, tcpSocket, grpc), run by the resolver, "+
			"rather than when its endpoint turns Ready after the kubelet's next check; pods it cannot check the same way (exec probes) wait for Ready. Needs get on pods.")
	fs.BoolVar(&r.WaitingPage, "waiting-page", def.WaitingPage,
		"Answer a browser navigation held for a waking Service with a small page that reloads itself (503, Retry-After) once it has waited --waiting-page-after, "+
			"for every ElastiService whose spec.waitingPage does not disable it; off, only those whose spec.waitingPage enables it. API clients are held as before.")
	fs.DurationVar(&r.WaitingPageAfter, "waiting-page-after", def.WaitingPageAfter,
		"How long a browser navigation is held without a Ready pod before it gets the waiting page, unless spec.waitingPage.after says otherwise; 0: at once. Below --request-timeout.")
	fs.StringVar(&o.wakeTokenFile, waketoken.Flag, e.String(envWakeTokenFile, ""),
		"File holding the wake token(s), one a line, e.g. a mounted Secret key; wake requests carry the first as Authorization: Bearer. "+
			"Re-read when it changes. Empty: none is sent (env "+envWakeTokenFile+").")

	return o, func() error { return o.finish(e, *portRange, def.ProxyPort) }
}

// finish checks what bindFlags bound, once the flags are parsed, and reads
// the wake token file: one error joins every problem, the environment's
// among them.
func (o *options) finish(e *command.Env, portRange string, defProxyPort int) error {
	r := &o.resolver
	if rng, err := portalloc.ParseRange(portRange); err != nil {
		e.Errs = append(e.Errs, fmt.Errorf("--resolver-port-range: %w", err))
	} else if err := rng.ValidateForResolver(int32(portOf(o.proxyBindAddress, defProxyPort))); err != nil {
		e.Errs = append(e.Errs, fmt.Errorf("--resolver-port-range: %w", err))
	} else {
		r.PortRange = rng
	}
	if !strings.HasPrefix(r.OperatorURL, "http://") && !strings.HasPrefix(r.OperatorURL, "https://") {
		e.Errs = append(e.Errs, fmt.Errorf("--operator-url=%q must be an http:// or https:// URL", r.OperatorURL))
	}
	if r.RequestTimeout <= 0 || r.PerServiceQueue < 1 || r.GlobalQueue < r.PerServiceQueue {
		e.Errs = append(e.Errs, fmt.Errorf("request timeout must be positive and 1 <= per-service queue (%d) <= global queue (%d)",
			r.PerServiceQueue, r.GlobalQueue))
	}
	if o.wakeTokenFile != "" {
		// Read now, so a missing or empty file stops the start.
		if tokens, err := waketoken.Load(o.wakeTokenFile); err != nil {
			e.Errs = append(e.Errs, err)
		} else {
			o.wakeToken = tokens
		}
	}
	if r.SourceWakeRate < 0 || r.SourceWakeBurst < 0 {
		e.Errs = append(e.Errs, fmt.Errorf("--source-wake-rate=%v and --source-wake-burst=%d must not be negative (0 turns the limit off)",
			r.SourceWakeRate, r.SourceWakeBurst))
	}
	if r.MaxBufferedBody < 1 || r.MaxBufferedBodies < r.MaxBufferedBody {
		e.Errs = append(e.Errs, fmt.Errorf("--max-buffered-body=%d and --max-buffered-bodies=%d must satisfy 1 <= per body <= all bodies",
			r.MaxBufferedBody, r.MaxBufferedBodies))
	}
	if r.MaxConnectionsPerSource < 1 || r.MaxRequestBytes < 1 || r.NamespaceShare < 1 || r.NamespaceShare > 100 {
		e.Errs = append(e.Errs, fmt.Errorf("--max-connections-per-source=%d and --max-request-bytes=%d must be positive, --namespace-share=%d in 1-100",
			r.MaxConnectionsPerSource, r.MaxRequestBytes, r.NamespaceShare))
	}
	if r.MaxHoldTimeout <= 0 {
		e.Errs = append(e.Errs, fmt.Errorf("--max-hold-timeout=%v must be positive", r.MaxHoldTimeout))
	}
	if r.WaitingPageAfter < 0 || r.WaitingPageAfter >= r.RequestTimeout {
		e.Errs = append(e.Errs, fmt.Errorf("--waiting-page-after=%v must be at least 0 and below --request-timeout=%v", r.WaitingPageAfter, r.RequestTimeout))
	}
	if r.FrontDrain <= 0 {
		e.Errs = append(e.Errs, fmt.Errorf("--front-drain=%v must be positive", r.FrontDrain))
	}
	if r.PerSourceQueue < 1 || r.MaxHeldBytes < 1 || r.SpliceIdleTimeout <= 0 || r.MaxConnections < 1 {
		e.Errs = append(e.Errs, fmt.Errorf("--per-source-queue=%d, --max-held-bytes=%d, --splice-idle-timeout=%v and --max-connections=%d must be positive",
			r.PerSourceQueue, r.MaxHeldBytes, r.SpliceIdleTimeout, r.MaxConnections))
	}
	if o.shutdownGrace < 0 {
		e.Errs = append(e.Errs, fmt.Errorf("--shutdown-grace=%v is negative", o.shutdownGrace))
	}
	if o.kubeAPIQPS <= 0 || o.kubeAPIBurst < 1 {
		e.Errs = append(e.Errs, fmt.Errorf("--kube-api-qps=%v and --kube-api-burst=%d must be positive", o.kubeAPIQPS, o.kubeAPIBurst))
	}
	if err := nsinformer.ValidateList(r.WatchNamespaces); err != nil {
		e.Errs = append(e.Errs, err)
	}
	return errors.Join(e.Errs...)
}

// portOf is the port of a bind address such as ":8012", or def when it
// names none; a malformed address is reported when it is listened on.
func portOf(addr string, def int) int {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return def
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		return def
	}
	return n
}
