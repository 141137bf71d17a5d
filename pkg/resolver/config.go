package resolver

import (
	"cmp"
	"fmt"
	"net/url"
	"time"

	"github.com/elasti-dev/elasti/pkg/nsbudget"
	"github.com/elasti-dev/elasti/pkg/nsinformer"
	"github.com/elasti-dev/elasti/pkg/portalloc"
	"github.com/elasti-dev/elasti/pkg/resolver/admission"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
	"github.com/elasti-dev/elasti/pkg/resolver/forward"
	"github.com/elasti-dev/elasti/pkg/resolver/hold"
	"github.com/elasti-dev/elasti/pkg/resolver/identify"
)

// Defaults for Config. They are elasti's own defaults, not KubeElasti's.
// Where they differ: KubeElasti holds a request for up to 600s
// (REQ_TIMEOUT) where elasti holds it for 120s, and its operator retry
// interval and queue sizes are other values. Set them explicitly (flags or KubeElasti's
// environment) to reproduce a KubeElasti deployment.
const (
	DefaultProxyPort            = portalloc.DefaultProxyPort
	DefaultRequestTimeout       = 120 * time.Second
	DefaultMaxHoldTimeout       = 30 * time.Minute
	DefaultPerServiceQueue      = 1000
	DefaultGlobalQueue          = 2000
	DefaultOperatorURL          = "http://elasti-operator-controller-service.elasti.svc.cluster.local:8013"
	DefaultOperatorTimeout      = 5 * time.Second
	DefaultOperatorRetryInitial = 500 * time.Millisecond
	DefaultOperatorRetryMax     = 10 * time.Second
	DefaultDialTimeout          = 3 * time.Second
	DefaultRetryAfter           = 5 * time.Second
	DefaultColdStartHeader      = "X-Elasti-Cold-Start"
	// The waiting page comes at once: a person sees at once that the
	// Service is starting. spec.waitingPage.after (or this flag) delays
	// it, so that a cold start shorter than the delay shows no page.
	DefaultWaitingPageAfter  = 0 * time.Second
	DefaultMaxBufferedBody   = 64 << 10
	DefaultMaxBufferedBodies = 16 << 20
	// One client address may hold an eighth of the global queue and a
	// quarter of one Service's: it never fills a Service's queue alone,
	// and eight of them are needed to fill every queue. It is generous
	// because an ingress controller's clients all share the controller
	// pod's address.
	DefaultPerSourceQueue    = 250
	DefaultMaxHeldBytes      = 32 << 20
	DefaultSpliceIdleTimeout = 5 * time.Minute
	DefaultMaxConnections    = 4000
	// One client address may keep a quarter of the connections: a pod
	// cannot take them all, and an ingress controller or a SNAT gateway,
	// whose clients all share one address, still gets many.
	DefaultMaxConnectionsPerSource = 1000
	// Every request in flight is charged (requestBytes); 96 MiB holds the
	// full global queue with the held-bytes and buffered-body budgets full
	// (2000 × requestOverheadBytes + MaxHeldBytes + MaxBufferedBodies ≈
	// 79 MiB) and leaves the rest to requests not held.
	DefaultMaxRequestBytes = 96 << 20
	// A namespace may take half of each pool: as much of the global queue
	// as one Service's queue (PerServiceQueue) may, so a namespace with one
	// Service loses nothing, while any one namespace leaves half of every
	// pool to the others.
	DefaultNamespaceShare = 50
)

// The worst case of the defaults: every bound filled at once. The
// figures per item are BenchmarkFilledBounds' (docs/benchmarks.md: heap
// and goroutine stacks after a collection, which it measured at 146-149
// MiB with the connections not held half spliced and half idle):
//
//	GlobalQueue held HTTP/1 requests, each with its
//	  connection, besides the bytes charged for it     2000 × 35 KiB ≈  68 MiB
//	MaxHeldBytes (headers, HTTP/2 stream windows)                     32 MiB
//	MaxBufferedBodies                                                  16 MiB
//	the rest of MaxConnections, all spliced (the
//	  dearest kind of connection not held)             2000 × 20 KiB ≈  39 MiB
//	                                                                  ≈ 155 MiB
//
// MaxRequestBytes (96 MiB) charges every request in flight, held or not,
// about what it costs (BenchmarkFilledBounds' h2-stalled fills: 34 KiB a
// stalled stream, charged 36 KiB); the held requests above take 79 MiB of
// it, so requests not held add at most the 17 MiB left, about 165 MiB in
// all; held requests released by a wake are forwarded past it
// (chargeAnyway), at most GlobalQueue × forwardOverheadBytes ≈ 39 MiB. Filled with stalled HTTP/2 streams instead, the budget measured
// 91 MiB steady and 132 MiB at its peak, the refused streams' garbage
// included.
//
// That leaves about 90 MiB of the manifests' 256Mi limit for the
// informer caches, the runtime and the collector's headroom (the manifests
// set GOMEMLIMIT to the limit, so the collector works harder near it). The
// bounds are per resolver pod: more replicas hold more. Kernel socket
// buffers are not counted here.

// Config tunes the resolver. Zero fields take the defaults above, so a
// partially filled Config is valid.
type Config struct {
	// ProxyPort is the port the command listens on for proxied traffic. The
	// resolver itself does not listen; the field is here so the command has
	// one place for its settings (KubeElasti: ELASTI_RESOLVER_PROXY_PORT).
	ProxyPort int
	// PortRange is where the resolver opens the resolver ports the operator
	// records: a port outside it is never listened on, whatever an
	// ElastiService's status says. It must equal the operator's
	// --resolver-port-range. The zero Range means portalloc.DefaultRange.
	PortRange portalloc.Range
	// RequestTimeout is how long a request may be held waiting for a Ready
	// endpoint before it is answered 504 (KubeElasti: REQ_TIMEOUT).
	RequestTimeout time.Duration
	// MaxHoldTimeout caps an ElastiService's spec.hold.timeout, which
	// otherwise replaces RequestTimeout for its Service. Its default, 30
	// minutes: model servers load in 2 to 8, and a GPU node may take as
	// long again to join.
	MaxHoldTimeout time.Duration
	// PerServiceQueue bounds the requests held for one service; an
	// ElastiService's spec.hold.maxRequests replaces it for its Service,
	// within GlobalQueue and the namespace's share of it.
	PerServiceQueue int
	// GlobalQueue bounds the requests held for all services together.
	GlobalQueue int
	// PerSourceQueue bounds the requests and connections one client
	// address holds at once, for all Services together. Past it a request
	// is answered 429 with Retry-After and a connection is closed: the
	// client itself is over its share, while the others are not.
	PerSourceQueue int
	// MaxHeldBytes bounds the memory that held requests and connections
	// keep besides their count: their headers, the HTTP/2 stream windows of
	// bodies that stream, and the read-ahead buffers of held TCP
	// connections (see heldRequestBytes and heldConnBytes). Past it a
	// request is answered 503 with Retry-After and a connection is closed.
	// Each request's headers are also bounded, by the server, to
	// serverMaxHeaderBytes.
	MaxHeldBytes int64
	// SpliceIdleTimeout closes a spliced TCP connection that moved no byte
	// either way for this long (see splice).
	SpliceIdleTimeout time.Duration
	// MaxConnections bounds the client connections open at once on the
	// proxy port and every resolver port together; one more is closed as
	// soon as it is accepted (see LimitListener).
	MaxConnections int
	// MaxConnectionsPerSource bounds, within MaxConnections, those of one
	// client address; one more from it is closed the same way.
	MaxConnectionsPerSource int
	// MaxRequestBytes bounds the memory of every HTTP request in flight,
	// held or not, HTTP/1 or HTTP/2, from the moment its handler runs
	// until it is answered: its headers, its HTTP/2 stream window, a
	// buffered body, requestOverheadBytes each and forwardOverheadBytes
	// while forwarded (see requestBytes).
	// Past it a request is answered 503 with Retry-After. HTTP/2
	// connections may open as many concurrent streams as a namespace's
	// share of it holds at their largest (see maxConcurrentStreams).
	MaxRequestBytes int64
	// NamespaceShare is the percentage of GlobalQueue, MaxHeldBytes and
	// MaxRequestBytes that the requests for the Services of one namespace
	// may take; past it they are answered 503 with Retry-After, and a TCP
	// connection is closed. It keeps one namespace from starving the
	// others; 100 turns it off.
	NamespaceShare int
	// NamespaceBudget bounds the ElastiServices of one namespace the
	// resolver keeps and serves (see SpecBudget); it must be the
	// operator's.
	NamespaceBudget nsbudget.Limits
	// WatchNamespaces are the namespaces whose Services the resolver
	// serves, the operator's --watch-namespace; empty serves every
	// namespace. An ElastiService of any other namespace is cached as its
	// identity alone (see SpecBudget), so it names no Service, holds no
	// port and vouches for no resolver slice.
	WatchNamespaces []string
	// OperatorURL is the base URL of the operator; wakeapi.Path is
	// appended to it.
	OperatorURL string
	// OperatorTimeout bounds one wake request to the operator.
	OperatorTimeout time.Duration
	// OperatorRetryInitial and OperatorRetryMax bound the exponential backoff
	// between wake requests while the operator rejects them or cannot be
	// reached. After an accepted one the next for a still-held service
	// waits OperatorRetryMax.
	OperatorRetryInitial time.Duration
	OperatorRetryMax     time.Duration
	// ClusterDomain is the suffix accepted after <svc>.<ns>.svc in the Host
	// (KubeElasti: KUBERNETES_CLUSTER_DOMAIN).
	ClusterDomain string
	// HostHeader names a header that carries the target host instead of
	// Host (KubeElasti: HEADER_FOR_HOST). Empty means the Host header. When
	// the named header is absent, Host is used.
	HostHeader string
	// FrontDrain is how long the resolver still forwards for a Service
	// after its last resolver slice is deleted, the switch to serve, so
	// that what kube-proxy and ingress controllers send before they
	// follow gets the pod's answer, not a 404. See NewInformerEndpoints.
	FrontDrain time.Duration
	// DialTimeout bounds a TCP connect to a pod.
	DialTimeout time.Duration
	// RetryAfter is sent in the Retry-After header of overflow answers.
	RetryAfter time.Duration
	// MaxBufferedBody is the largest request body, of known length, that a
	// held request reads into memory before it waits; larger and chunked
	// bodies stream to the pod instead (see body.go).
	MaxBufferedBody int64
	// MaxBufferedBodies bounds the memory all buffered held bodies take
	// together; a body that does not fit streams.
	MaxBufferedBodies int64
	// ColdStartHeader names the response header that tells a client how
	// long its request was held while the Service woke, e.g. "1.204s". It
	// is set only on held responses. Empty turns it off; unlike the other
	// fields it is not defaulted, so a partial Config leaves it off.
	ColdStartHeader string
	// SourceWakeRate and SourceWakeBurst bound the wakes one client address
	// may start: a token bucket per address, holding SourceWakeBurst and
	// refilled at SourceWakeRate a second. A request starts a wake when it
	// is the first one held for a Service; requests that join a wake under
	// way, or reach a Service that is up, cost nothing. A request over the
	// limit is answered 429 with Retry-After (a TCP connection is closed).
	// Either at 0 turns the limit off; like ColdStartHeader they are not
	// defaulted, so a partial Config has no limit.
	SourceWakeRate  float64
	SourceWakeBurst int
	// SourceWakeTracked bounds the client addresses tracked at once; past
	// it the least recently seen is forgotten.
	SourceWakeTracked int
	// ProbePods turns direct probing on (package directprobe): a held request is
	// forwarded to a starting pod as soon as the pod passes its own
	// readiness checks, run by the resolver, rather than when the slices
	// list it Ready after the kubelet's next check. It needs Options.Pods.
	// Like ColdStartHeader it is not defaulted: a partial Config leaves it
	// off, DefaultConfig turns it on.
	ProbePods bool
	// WaitingPage turns the waiting page (package answer) on for every
	// Service whose ElastiService's spec.waitingPage does not turn it off;
	// off, only those whose spec.waitingPage turns it on get it.
	WaitingPage bool
	// WaitingPageAfter is how long a browser navigation is held without a
	// Ready pod before it gets the waiting page, unless its ElastiService's
	// spec.waitingPage.after says otherwise; 0 answers at once.
	WaitingPageAfter time.Duration

	// connectPatience is forward.DefaultConnectPatience unless a test
	// shortens it.
	connectPatience time.Duration
}

// DefaultConfig returns a Config with every field set to its default.
func DefaultConfig() Config {
	return Config{
		ProxyPort:               DefaultProxyPort,
		PortRange:               portalloc.DefaultRange,
		RequestTimeout:          DefaultRequestTimeout,
		MaxHoldTimeout:          DefaultMaxHoldTimeout,
		PerServiceQueue:         DefaultPerServiceQueue,
		GlobalQueue:             DefaultGlobalQueue,
		OperatorURL:             DefaultOperatorURL,
		OperatorTimeout:         DefaultOperatorTimeout,
		OperatorRetryInitial:    DefaultOperatorRetryInitial,
		OperatorRetryMax:        DefaultOperatorRetryMax,
		ClusterDomain:           identify.DefaultClusterDomain,
		DialTimeout:             DefaultDialTimeout,
		FrontDrain:              clusterview.DefaultFrontDrain,
		RetryAfter:              DefaultRetryAfter,
		ColdStartHeader:         DefaultColdStartHeader,
		SourceWakeRate:          admission.DefaultSourceWakeRate,
		SourceWakeBurst:         admission.DefaultSourceWakeBurst,
		SourceWakeTracked:       admission.DefaultSourceWakeTracked,
		ProbePods:               true,
		WaitingPageAfter:        DefaultWaitingPageAfter,
		MaxBufferedBody:         DefaultMaxBufferedBody,
		MaxBufferedBodies:       DefaultMaxBufferedBodies,
		PerSourceQueue:          DefaultPerSourceQueue,
		MaxHeldBytes:            DefaultMaxHeldBytes,
		SpliceIdleTimeout:       DefaultSpliceIdleTimeout,
		MaxConnections:          DefaultMaxConnections,
		MaxConnectionsPerSource: DefaultMaxConnectionsPerSource,
		MaxRequestBytes:         DefaultMaxRequestBytes,
		NamespaceShare:          DefaultNamespaceShare,
		NamespaceBudget:         nsbudget.Defaults(),
	}
}

// complete fills zero fields with defaults and checks the result.
func (c Config) complete() (Config, error) {
	d := DefaultConfig()
	c.ProxyPort = cmp.Or(c.ProxyPort, d.ProxyPort)
	c.PortRange = cmp.Or(c.PortRange, d.PortRange)
	c.RequestTimeout = cmp.Or(c.RequestTimeout, d.RequestTimeout)
	c.MaxHoldTimeout = cmp.Or(c.MaxHoldTimeout, d.MaxHoldTimeout)
	c.PerServiceQueue = cmp.Or(c.PerServiceQueue, d.PerServiceQueue)
	c.GlobalQueue = cmp.Or(c.GlobalQueue, d.GlobalQueue)
	c.OperatorURL = cmp.Or(c.OperatorURL, d.OperatorURL)
	c.OperatorTimeout = cmp.Or(c.OperatorTimeout, d.OperatorTimeout)
	c.OperatorRetryInitial = cmp.Or(c.OperatorRetryInitial, d.OperatorRetryInitial)
	c.OperatorRetryMax = cmp.Or(c.OperatorRetryMax, d.OperatorRetryMax)
	c.ClusterDomain = cmp.Or(c.ClusterDomain, d.ClusterDomain)
	c.DialTimeout = cmp.Or(c.DialTimeout, d.DialTimeout)
	c.FrontDrain = cmp.Or(c.FrontDrain, d.FrontDrain)
	c.RetryAfter = cmp.Or(c.RetryAfter, d.RetryAfter)
	c.SourceWakeTracked = cmp.Or(c.SourceWakeTracked, d.SourceWakeTracked)
	c.MaxBufferedBody = cmp.Or(c.MaxBufferedBody, d.MaxBufferedBody)
	c.MaxBufferedBodies = cmp.Or(c.MaxBufferedBodies, d.MaxBufferedBodies)
	c.PerSourceQueue = cmp.Or(c.PerSourceQueue, d.PerSourceQueue)
	c.MaxHeldBytes = cmp.Or(c.MaxHeldBytes, d.MaxHeldBytes)
	c.SpliceIdleTimeout = cmp.Or(c.SpliceIdleTimeout, d.SpliceIdleTimeout)
	c.MaxConnections = cmp.Or(c.MaxConnections, d.MaxConnections)
	c.MaxConnectionsPerSource = cmp.Or(c.MaxConnectionsPerSource, d.MaxConnectionsPerSource)
	c.MaxRequestBytes = cmp.Or(c.MaxRequestBytes, d.MaxRequestBytes)
	c.NamespaceShare = cmp.Or(c.NamespaceShare, d.NamespaceShare)

	switch {
	case !portalloc.IsPort(c.ProxyPort):
		return c, fmt.Errorf("proxy port %d is not in 1-65535", c.ProxyPort)
	case c.RequestTimeout < 0:
		return c, fmt.Errorf("request timeout %v is negative", c.RequestTimeout)
	case c.MaxHoldTimeout < 0:
		return c, fmt.Errorf("max hold timeout %v is negative", c.MaxHoldTimeout)
	case c.PerServiceQueue < 0:
		return c, fmt.Errorf("per-service queue bound %d is negative", c.PerServiceQueue)
	case c.GlobalQueue < 0:
		return c, fmt.Errorf("global queue bound %d is negative", c.GlobalQueue)
	case c.OperatorTimeout < 0 || c.OperatorRetryInitial < 0 || c.OperatorRetryMax < 0:
		return c, fmt.Errorf("operator timeout and retry intervals must not be negative")
	case c.OperatorRetryMax < c.OperatorRetryInitial:
		return c, fmt.Errorf("operator retry max %v is below the initial interval %v", c.OperatorRetryMax, c.OperatorRetryInitial)
	case c.DialTimeout < 0:
		return c, fmt.Errorf("dial timeout %v is negative", c.DialTimeout)
	case c.WaitingPageAfter < 0:
		return c, fmt.Errorf("waiting page delay %v is negative", c.WaitingPageAfter)
	case c.RetryAfter < 0:
		return c, fmt.Errorf("retry-after %v is negative", c.RetryAfter)
	case c.SourceWakeRate < 0 || c.SourceWakeBurst < 0 || c.SourceWakeTracked < 0:
		return c, fmt.Errorf("source wake rate %v, burst %d and tracked sources %d must not be negative",
			c.SourceWakeRate, c.SourceWakeBurst, c.SourceWakeTracked)
	case c.PerSourceQueue < 0 || c.MaxHeldBytes < 0 || c.SpliceIdleTimeout < 0 || c.MaxConnections < 0:
		return c, fmt.Errorf("per-source queue %d, held header bytes %d, splice idle timeout %v and max connections %d must not be negative",
			c.PerSourceQueue, c.MaxHeldBytes, c.SpliceIdleTimeout, c.MaxConnections)
	case c.MaxConnectionsPerSource < 0 || c.MaxRequestBytes < 0:
		return c, fmt.Errorf("max connections per source %d and max request bytes %d must not be negative", c.MaxConnectionsPerSource, c.MaxRequestBytes)
	case c.NamespaceShare < 0 || c.NamespaceShare > 100:
		return c, fmt.Errorf("namespace share %d%% is not in 1-100", c.NamespaceShare)
	case c.MaxBufferedBody < 0 || c.MaxBufferedBodies < c.MaxBufferedBody:
		return c, fmt.Errorf("buffered body bounds must satisfy 0 <= per body (%d) <= all bodies (%d)", c.MaxBufferedBody, c.MaxBufferedBodies)
	}
	if err := c.PortRange.ValidateForResolver(int32(c.ProxyPort)); err != nil {
		return c, err
	}
	if err := nsinformer.ValidateList(c.WatchNamespaces); err != nil {
		return c, err
	}
	u, err := url.Parse(c.OperatorURL)
	if err != nil {
		return c, fmt.Errorf("operator URL %q: %w", c.OperatorURL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return c, fmt.Errorf("operator URL %q must be an absolute http(s) URL", c.OperatorURL)
	}
	return c, nil
}

// admissionLimits are cfg's bounds, as admission enforces them.
func (cfg Config) admissionLimits() admission.Limits {
	return admission.Limits{PerService: cfg.PerServiceQueue, Global: cfg.GlobalQueue, PerSource: cfg.PerSourceQueue,
		HeldBytes: cfg.MaxHeldBytes, RequestBytes: cfg.MaxRequestBytes, NamespaceShare: cfg.NamespaceShare}
}

// forwardConfig are cfg's settings of forwarding.
func (cfg Config) forwardConfig() forward.Config {
	return forward.Config{ColdStartHeader: cfg.ColdStartHeader, DialTimeout: cfg.DialTimeout,
		ConnectPatience: cfg.connectPatience, SpliceIdleTimeout: cfg.SpliceIdleTimeout}
}

// holdConfig are cfg's settings of the hold and its wake client.
func (cfg Config) holdConfig() hold.Config {
	return hold.Config{RequestTimeout: cfg.RequestTimeout, RetryInitial: cfg.OperatorRetryInitial, RetryMax: cfg.OperatorRetryMax,
		OperatorURL: cfg.OperatorURL, OperatorTimeout: cfg.OperatorTimeout, DialTimeout: cfg.DialTimeout}
}
