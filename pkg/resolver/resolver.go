package resolver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
)

// Options are the resolver's collaborators.
type Options struct {
	// Endpoints is required.
	Endpoints EndpointSource
	// Probes is optional; without it no request is answered by a rule.
	Probes ProbeMatcher
	// Named is optional; with it, a request for a Service the resolver is
	// not in front of waits frontGrace for a resolver slice only when an
	// ElastiService names the Service, and is answered 404 at once
	// otherwise. Without it every such request is answered 404 at once.
	Named interface{ Named(ServiceRef) bool }
	// Registerer receives the metrics; nil leaves them unregistered.
	Registerer prometheus.Registerer
	// Dial connects to pods; nil means a net.Dialer with Config.DialTimeout.
	Dial DialFunc
	// OperatorClient posts to the operator; nil means a private client
	// that ignores HTTP proxy environment variables.
	OperatorClient *http.Client
	// WakeToken, when set, gives the token every POST to the operator
	// carries (see pkg/waketoken). Nil sends none, as KubeElasti's
	// resolver.
	WakeToken TokenSource
}

// TokenSource returns the current wake token; it is asked before every
// POST, so a rotated token is sent as soon as it is read.
type TokenSource interface {
	Current(ctx context.Context) string
}

// Resolver is the http.Handler for proxied traffic. Create it with New and
// stop it with Close. The layers a request passes are mapped in the
// package doc (doc.go).
type Resolver struct {
	cfg     Config
	eps     EndpointSource
	probes  ProbeMatcher
	named   interface{ Named(ServiceRef) bool }
	admit   *admission
	holds   *holder
	fwd     *forwarder
	dial    DialFunc
	metrics *Metrics
	logger  klog.Logger

	// conns bounds the client connections of the proxy port and the
	// resolver ports together.
	conns *connLimit
	// buffered counts the bytes of held request bodies in memory.
	buffered atomic.Int64
}

// New returns a Resolver. ctx carries the logger and bounds the
// resolver's background work together with Close.
func New(ctx context.Context, cfg Config, opts Options) (*Resolver, error) {
	cfg, err := cfg.complete()
	if err != nil {
		return nil, fmt.Errorf("resolver config: %w", err)
	}
	if opts.Endpoints == nil {
		return nil, errors.New("resolver: an EndpointSource is required")
	}
	metrics, err := NewMetrics(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("resolver metrics: %w", err)
	}
	logger := klog.FromContext(ctx).WithName("resolver")
	dial := opts.Dial
	if dial == nil {
		dial = (&net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second}).DialContext
	}
	dial = countFailures(dial, metrics.ConnectFailures)
	notifier := newOperatorNotifier(cfg, opts.OperatorClient, opts.WakeToken, metrics)
	wakes := newWakeLimiter(cfg.SourceWakeRate, cfg.SourceWakeBurst, cfg.SourceWakeTracked, metrics.WakeRateSources)
	return &Resolver{
		cfg:    cfg,
		eps:    opts.Endpoints,
		probes: opts.Probes,
		named:  opts.Named,
		admit: newAdmission(admissionLimits{perService: cfg.PerServiceQueue, global: cfg.GlobalQueue,
			perSource: cfg.PerSourceQueue, heldBytes: cfg.MaxHeldBytes}, wakes, metrics.Queued),
		holds:   newHolder(klog.NewContext(ctx, logger), opts.Endpoints, notifier.notify, cfg.OperatorRetryInitial, cfg.OperatorRetryMax, logger),
		fwd:     newForwarder(cfg, dial, opts.Endpoints, metrics, logger),
		dial:    dial,
		conns:   newConnLimit(cfg.MaxConnections, metrics.Connections, metrics.ConnectionsRefused),
		metrics: metrics,
		logger:  logger,
	}, nil
}

// Metrics returns the resolver's metrics.
func (r *Resolver) Metrics() *Metrics { return r.metrics }

// Close ends the notification loops, answers 503 to requests still held,
// and waits for the loops to return. Forwarded requests are left to the
// server's Shutdown.
func (r *Resolver) Close() {
	r.holds.close()
	r.fwd.closeIdle()
}

// ConfigureServer makes srv speak HTTP/1.1 and HTTP/2 cleartext with prior
// knowledge (h2c, as gRPC clients use) on the same port.
func ConfigureServer(srv *http.Server) {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv.Protocols = p
}

// ServeHTTP implements http.Handler for the shared proxy port, where the
// Host names the Service.
func (r *Resolver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	svc, port, err := r.identifyHost(req)
	if err != nil {
		r.logger.V(4).Info("Rejecting request with a bad host", "host", req.Host, "err", err)
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	r.serveService(w, req, svc, port)
}

// serveService forwards req to port of svc, holding it first while svc
// has no Ready endpoint. port is a Service port number, or "" for the
// default port.
func (r *Resolver) serveService(w http.ResponseWriter, req *http.Request, svc ServiceRef, port string) {
	logger := r.logger.WithValues("service", svc.kref())
	if !r.inFront(req.Context(), svc) {
		logger.V(4).Info("Refusing request for a Service the resolver is not in front of")
		r.metrics.NotInFront.WithLabelValues(ProtocolHTTP).Inc()
		httpError(w, http.StatusNotFound, fmt.Sprintf("service %s is not asleep behind elasti; call it directly", svc))
		return
	}
	b, err := r.eps.Lookup(svc, port)
	if err != nil {
		r.lookupFailed(w, logger, svc, err)
		return
	}
	if len(b.Addrs) > 0 {
		r.fwd.serve(w, req, svc, port, b, 0)
		return
	}

	// No Ready endpoint: a health checker's probe is answered here, so it
	// does not wake the target. Once the target serves, it answers itself.
	if r.probes != nil {
		if a, ok := r.probes.MatchProbe(svc, req); ok {
			logger.V(4).Info("Answering probe", "method", req.Method, "path", req.URL.Path, "status", a.Status)
			r.metrics.ProbeResponses.Inc()
			w.WriteHeader(a.Status)
			_, _ = io.WriteString(w, a.Body)
			return
		}
	}
	r.holdHTTP(w, req, logger, svc, port)
}

// inFront reports whether the resolver is in front of svc, so that it may
// forward to it. For a Service an ElastiService names it waits up to
// frontGrace for the resolver slice, which kube-proxy may have acted on
// before this resolver's informer saw it.
func (r *Resolver) inFront(ctx context.Context, svc ServiceRef) bool {
	in, changed := r.eps.Front(svc)
	if in || r.named == nil || !r.named.Named(svc) {
		return in
	}
	grace := time.NewTimer(frontGrace)
	defer grace.Stop()
	for {
		select {
		case <-changed:
			if in, changed = r.eps.Front(svc); in {
				return true
			}
		case <-grace.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// holdHTTP admits req, holds it until svc has a Ready endpoint and
// forwards it, or answers why not: 429 when its client has started too
// many wakes or holds its share of the queue, 503 when the queues or the
// held-bytes budget are full or the resolver shuts down, 504 at the
// request timeout.
func (r *Resolver) holdHTTP(w http.ResponseWriter, req *http.Request, logger klog.Logger, svc ServiceRef, port string) {
	// The body budget is asked first: a body that does not fit streams,
	// and what a streaming body keeps in memory is charged on admission.
	buffer := r.bufferable(req) && r.reserveBuffer(req.ContentLength)
	if buffer {
		defer r.buffered.Add(-req.ContentLength)
	}
	release, refused := r.admit.admit(svc, sourceOf(req.RemoteAddr), heldRequestBytes(req, buffer))
	if refused.scope != "" {
		r.refuse(w, logger, req.RemoteAddr, svc, refused)
		return
	}
	defer release()
	hd := r.holds.join(svc)
	defer hd.leave()

	began := time.Now()
	logger.V(4).Info("Holding request until the service has a Ready endpoint", "method", req.Method, "path", req.URL.Path)
	deadline := began.Add(r.cfg.RequestTimeout)
	if buffer {
		if err := bufferBody(w, req, deadline); err != nil {
			// The slot is freed on return; nobody is left to answer.
			logger.V(4).Info("Client went away while its body was read", "err", err)
			return
		}
	}

	ctx, cancel := context.WithDeadline(req.Context(), deadline)
	defer cancel()
	b, err := hd.wait(ctx, port)
	switch {
	case err == nil:
		hd.leave()
		release()
		wait := time.Since(began)
		r.metrics.ColdStartWait.Observe(wait.Seconds())
		logger.V(4).Info("Releasing held request", "waited", wait)
		r.fwd.serve(w, req, svc, port, b, wait)
	case errors.Is(err, context.DeadlineExceeded):
		r.metrics.Timeouts.Inc()
		logger.V(2).Info("Held request timed out", "timeout", r.cfg.RequestTimeout)
		httpError(w, http.StatusGatewayTimeout, fmt.Sprintf("timed out after %v waiting for service %s to have a ready pod", r.cfg.RequestTimeout, svc))
	case errors.Is(err, context.Canceled):
		logger.V(4).Info("Client went away while held")
	case errors.Is(err, errClosed):
		// Another resolver pod, or by then the woken pod itself, takes the
		// retry: this one left the endpoints during its shutdown grace.
		w.Header().Set("Retry-After", retryAfterSeconds(shutdownRetryAfter))
		httpError(w, http.StatusServiceUnavailable, fmt.Sprintf("resolver is shutting down while service %s starts; retry", svc))
	default:
		r.lookupFailed(w, logger, svc, err)
	}
}

// refuse answers a request admission refused: 429 for a client out of
// wakes or over its share of the queue, 503 for a full queue or budget,
// all with Retry-After.
func (r *Resolver) refuse(w http.ResponseWriter, logger klog.Logger, client string, svc ServiceRef, refused refusal) {
	if refused.scope == ScopeSource {
		r.metrics.WakeRateLimited.WithLabelValues(ProtocolHTTP).Inc()
		logger.V(2).Info("Client started too many wakes, refusing request", "client", client, "retryAfter", refused.retryAfter)
		w.Header().Set("Retry-After", retryAfterSeconds(refused.retryAfter))
		httpError(w, http.StatusTooManyRequests, fmt.Sprintf("this client has woken too many services lately; service %s is asleep, retry later", svc))
		return
	}
	r.metrics.Overflow.WithLabelValues(refused.scope).Inc()
	logger.V(2).Info("Hold queue full, refusing request", "scope", refused.scope, "client", client)
	w.Header().Set("Retry-After", retryAfterSeconds(r.cfg.RetryAfter))
	code, msg := http.StatusServiceUnavailable, fmt.Sprintf("too many requests are waiting for service %s to start; retry later", svc)
	switch refused.scope {
	case ScopeGlobal, ScopeBytes:
		msg = "too many requests are waiting for services to start; retry later"
	case ScopeClient:
		code, msg = http.StatusTooManyRequests, fmt.Sprintf("this client has too many requests waiting for services to start; service %s is asleep, retry later", svc)
	}
	httpError(w, code, msg)
}

// shutdownRetryAfter is the Retry-After of the 503 a held request gets
// when its resolver shuts down.
const shutdownRetryAfter = time.Second

// retryAfterSeconds is d as a Retry-After value: whole seconds, rounded
// up, at least 1.
func retryAfterSeconds(d time.Duration) string {
	return strconv.Itoa(max(1, int((d+time.Second-1)/time.Second)))
}

// bufferable reports whether hold may read req's body into memory before
// it waits: a body of known length up to Config.MaxBufferedBody. Go's
// HTTP/1.1 server only notices that a client closed its connection once
// the handler has read the body to the end; left unread, the body of a
// held request would keep its slot until
// RequestTimeout after the client left. Reading it first lets the server
// watch the connection again, and the in-memory copy lets the one-time
// dial retry resend it. Bodies larger than that, or of unknown length
// (chunked), are not buffered: they stay in the kernel's socket buffers
// (HTTP/2: at most serverMaxReceiveBufferPerStream per stream) and stream
// to the pod once it is Ready, and a client that leaves while such a
// request is held is noticed only at RequestTimeout. All held bodies
// together take at most Config.MaxBufferedBodies (see reserveBuffer);
// past that, bodies stream as if they were large.
func (r *Resolver) bufferable(req *http.Request) bool {
	return req.ContentLength > 0 && req.ContentLength <= r.cfg.MaxBufferedBody && req.Body != nil && req.Body != http.NoBody
}

// reserveBuffer takes n bytes of the held-body budget if they are free.
func (r *Resolver) reserveBuffer(n int64) bool {
	if r.buffered.Add(n) > r.cfg.MaxBufferedBodies {
		r.buffered.Add(-n)
		return false
	}
	return true
}

// bufferBody reads req's body, of known length, into memory by deadline
// and replaces it with a re-readable copy. An error means the client went
// away (or sent too slowly).
func bufferBody(w http.ResponseWriter, req *http.Request, deadline time.Time) error {
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(deadline) == nil {
		// Cleared right after the read: while the request is held the
		// server's background read watches the connection, and a deadline
		// expiring there would look like the client leaving.
		defer func() { _ = rc.SetReadDeadline(time.Time{}) }()
	}
	b, err := io.ReadAll(io.LimitReader(req.Body, req.ContentLength+1))
	if err != nil {
		return err
	}
	if int64(len(b)) != req.ContentLength {
		return fmt.Errorf("body has %d bytes, Content-Length says %d", len(b), req.ContentLength)
	}
	req.Body = io.NopCloser(bytes.NewReader(b))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	return nil
}

func (r *Resolver) lookupFailed(w http.ResponseWriter, logger klog.Logger, svc ServiceRef, err error) {
	if errors.Is(err, ErrServiceNotFound) {
		logger.V(4).Info("Unknown service")
		httpError(w, http.StatusNotFound, fmt.Sprintf("service %s not found", svc))
		return
	}
	logger.Error(err, "Looking up endpoints failed")
	httpError(w, http.StatusBadGateway, fmt.Sprintf("cannot resolve service %s", svc))
}

const (
	// serverMaxHeaderBytes bounds a request's headers. Go's default is
	// 1 MiB, and every held request keeps its headers in memory for up to
	// the request timeout, GlobalQueue of them at once; together they are
	// bounded by Config.MaxHeldBytes.
	serverMaxHeaderBytes = 64 << 10
	// serverIdleTimeout closes keep-alive connections left idle this long.
	// Without it (and with no ReadTimeout, which would cut off streaming
	// bodies) idle client connections are never closed and accumulate.
	serverIdleTimeout = 2 * time.Minute
	// serverMaxReceiveBufferPerStream is the HTTP/2 flow-control window of
	// one request body. The server buffers what a client sends within it
	// before the handler reads, and a held request's handler does not read
	// a large body until the pod is Ready: Go's default of 1 MiB would let
	// GlobalQueue held streams pin 2 GiB. The resolver is in the path only
	// while a Service wakes, so the smaller window costs little. Admission
	// charges each held stream whose body streams this window (see
	// heldRequestBytes).
	serverMaxReceiveBufferPerStream = 64 << 10
)

// NewServer returns an HTTP server for proxied traffic on addr: HTTP/1.1
// and h2c, with bounds fit for holding many requests.
func NewServer(addr string, h http.Handler) *http.Server {
	srv := &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: 30 * time.Second,
		MaxHeaderBytes:    serverMaxHeaderBytes,
		IdleTimeout:       serverIdleTimeout,
		HTTP2:             &http.HTTP2Config{MaxReceiveBufferPerStream: serverMaxReceiveBufferPerStream},
	}
	ConfigureServer(srv)
	return srv
}
