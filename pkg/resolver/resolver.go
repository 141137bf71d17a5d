package resolver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
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
	// Registerer receives the metrics; nil leaves them unregistered.
	Registerer prometheus.Registerer
	// Dial connects to pods; nil means a net.Dialer with Config.DialTimeout.
	Dial DialFunc
	// OperatorClient posts to the operator; nil means a private client
	// that ignores HTTP proxy environment variables.
	OperatorClient *http.Client
}

// Resolver is the http.Handler for proxied traffic. Create it with New and
// stop it with Close.
type Resolver struct {
	cfg      Config
	eps      EndpointSource
	probes   ProbeMatcher
	fwd      *forwarder
	q        *holdQueue
	metrics  *Metrics
	operator *http.Client
	notifyTo string
	logger   klog.Logger

	// buffered counts the bytes of held request bodies in memory.
	buffered atomic.Int64

	// ctx ends on Close; notification loops and held requests watch it.
	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
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
	client := opts.OperatorClient
	if client == nil {
		client = &http.Client{Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 4,
			IdleConnTimeout:     90 * time.Second,
		}}
	}
	r := &Resolver{
		cfg:      cfg,
		eps:      opts.Endpoints,
		probes:   opts.Probes,
		fwd:      newForwarder(cfg, opts.Dial, metrics, logger),
		q:        newHoldQueue(cfg.PerServiceQueue, cfg.GlobalQueue),
		metrics:  metrics,
		operator: client,
		notifyTo: strings.TrimRight(cfg.OperatorURL, "/") + IncomingRequestPath,
		logger:   logger,
	}
	r.ctx, r.cancel = context.WithCancel(klog.NewContext(ctx, logger))
	return r, nil
}

// Metrics returns the resolver's metrics.
func (r *Resolver) Metrics() *Metrics { return r.metrics }

// Close ends the notification loops, answers 503 to requests still held,
// and waits for the loops to return. Forwarded requests are left to the
// server's Shutdown.
func (r *Resolver) Close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
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

// ServeHTTP implements http.Handler.
func (r *Resolver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	host := req.Host
	if r.cfg.HostHeader != "" {
		if h := req.Header.Get(r.cfg.HostHeader); h != "" {
			host = h
		}
	}
	name, ns, port, err := ParseHost(host, r.cfg.ClusterDomain)
	if err != nil {
		r.logger.V(4).Info("Rejecting request with a bad host", "host", host, "err", err)
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	svc := ServiceRef{Namespace: ns, Name: name}
	logger := r.logger.WithValues("service", svc.kref())

	t, err := r.eps.Lookup(svc, port)
	if err != nil {
		r.lookupFailed(w, logger, svc, err)
		return
	}
	if len(t.Addrs) > 0 {
		r.fwd.serve(w, req, svc, t)
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

	r.hold(w, req, logger, svc, port, t)
}

// hold waits until svc has a Ready endpoint, the timeout passes, the
// client goes away or the resolver closes.
func (r *Resolver) hold(w http.ResponseWriter, req *http.Request, logger klog.Logger, svc ServiceRef, port string, t Target) {
	overflow, start := r.q.acquire(svc)
	if overflow != "" {
		r.metrics.Overflow.WithLabelValues(overflow).Inc()
		logger.V(2).Info("Hold queue full, refusing request", "scope", overflow)
		w.Header().Set("Retry-After", strconv.Itoa(int((r.cfg.RetryAfter+time.Second-1)/time.Second)))
		msg := fmt.Sprintf("too many requests are waiting for service %s to start; retry later", svc)
		if overflow == ScopeGlobal {
			msg = "too many requests are waiting for services to start; retry later"
		}
		httpError(w, http.StatusServiceUnavailable, msg)
		return
	}
	released := false
	release := func() {
		if !released {
			released = true
			r.q.release(svc)
			r.metrics.Queued.Dec()
		}
	}
	defer release()
	r.metrics.Queued.Inc()
	if start {
		r.startNotifier(svc)
	}
	began := time.Now()
	logger.V(4).Info("Holding request until the service has a Ready endpoint", "method", req.Method, "path", req.URL.Path)
	if req.ContentLength > 0 && req.ContentLength <= maxBufferedBody && req.Body != nil && req.Body != http.NoBody &&
		r.reserveBuffer(req.ContentLength) {
		defer r.buffered.Add(-req.ContentLength)
		if err := bufferBody(w, req, began.Add(r.cfg.RequestTimeout)); err != nil {
			// The slot is freed on return; nobody is left to answer.
			logger.V(4).Info("Client went away while its body was read", "err", err)
			return
		}
	}

	timer := time.NewTimer(r.cfg.RequestTimeout)
	defer timer.Stop()
	for {
		select {
		case <-t.Changed:
			var err error
			t, err = r.eps.Lookup(svc, port)
			if err != nil {
				release()
				r.lookupFailed(w, logger, svc, err)
				return
			}
			if len(t.Addrs) > 0 {
				release()
				wait := time.Since(began)
				r.metrics.ColdStartWait.Observe(wait.Seconds())
				logger.V(4).Info("Releasing held request", "waited", wait)
				r.fwd.serve(w, req, svc, t)
				return
			}
			// Endpoints changed but none is Ready (say, they went away
			// again): make sure the operator hears about it.
			if r.q.ensureNotifier(svc) {
				r.startNotifier(svc)
			}
		case <-timer.C:
			r.metrics.Timeouts.Inc()
			logger.V(2).Info("Held request timed out", "timeout", r.cfg.RequestTimeout)
			httpError(w, http.StatusGatewayTimeout, fmt.Sprintf("timed out after %v waiting for service %s to have a ready pod", r.cfg.RequestTimeout, svc))
			return
		case <-req.Context().Done():
			logger.V(4).Info("Client went away while held")
			return
		case <-r.ctx.Done():
			httpError(w, http.StatusServiceUnavailable, fmt.Sprintf("resolver is shutting down while service %s starts; retry", svc))
			return
		}
	}
}

// maxBufferedBody is the largest request body hold reads into memory
// before it waits. Go's HTTP/1.1 server only notices that a client closed
// its connection once the handler has read the body to the end; left
// unread, the body of a held request would keep its slot until
// RequestTimeout after the client left. Reading it first lets the server
// watch the connection again, and the in-memory copy lets the one-time
// dial retry resend it. Bodies larger than this, or of unknown length
// (chunked), are not buffered: they still stream to the pod, and a client
// that leaves while such a request is held is noticed only at
// RequestTimeout. All held bodies together take at most
// maxBufferedBodies; past that, bodies stream as if they were large.
const (
	maxBufferedBody   = 64 << 10
	maxBufferedBodies = 16 << 20
)

// reserveBuffer takes n bytes of the held-body budget if they are free.
func (r *Resolver) reserveBuffer(n int64) bool {
	if r.buffered.Add(n) > maxBufferedBodies {
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
		httpError(w, http.StatusBadGateway, fmt.Sprintf("service %s not found", svc))
		return
	}
	logger.Error(err, "Looking up endpoints failed")
	httpError(w, http.StatusBadGateway, fmt.Sprintf("cannot resolve service %s", svc))
}

// ready reports whether svc has a Ready endpoint on the Service port a
// Host without a port selects: port 80 if the Service has one, else its
// first port. Other ports are not checked.
func (r *Resolver) ready(svc ServiceRef) bool {
	t, err := r.eps.Lookup(svc, "")
	return err == nil && len(t.Addrs) > 0
}

func (r *Resolver) startNotifier(svc ServiceRef) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		r.q.stopNotifying(svc)
		return
	}
	r.wg.Add(1)
	go r.notifyLoop(svc)
}

// notifyLoop tells the operator that svc has held requests: once at
// start, then with exponential backoff while the operator rejects or
// cannot be reached, or every OperatorRetryMax after a success, and at
// once when a request is held again after all were released (the target
// went back to zero while the loop waited). It stops when no request is
// held or svc has a Ready endpoint.
func (r *Resolver) notifyLoop(svc ServiceRef) {
	defer r.wg.Done()
	logger := r.logger.WithValues("service", svc.kref())
	logger.V(2).Info("Notifying operator of held requests")
	backoff := r.cfg.OperatorRetryInitial
	kick := r.q.kicks(svc)
	for {
		if !r.q.continueNotifying(svc, func() bool { return r.ready(svc) }) {
			logger.V(2).Info("Stopped notifying operator")
			return
		}
		wait := r.cfg.OperatorRetryMax
		if outcome := r.notifyOperator(logger, svc); outcome != OutcomeSuccess {
			wait = backoff
			backoff = min(2*backoff, r.cfg.OperatorRetryMax)
		} else {
			backoff = r.cfg.OperatorRetryInitial
		}
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-kick:
			timer.Stop()
		case <-r.ctx.Done():
			timer.Stop()
			r.q.stopNotifying(svc)
			return
		}
	}
}

// incomingRequest is the operator's scale-up request body, field order
// and all: {"count":1,"svc":"<svc>","namespace":"<ns>"}.
type incomingRequest struct {
	Count     int    `json:"count"`
	Svc       string `json:"svc"`
	Namespace string `json:"namespace"`
}

// notifyOperator POSTs once and returns the outcome label.
func (r *Resolver) notifyOperator(logger klog.Logger, svc ServiceRef) string {
	// Three plain fields: Marshal cannot fail.
	body, _ := json.Marshal(incomingRequest{Count: 1, Svc: svc.Name, Namespace: svc.Namespace})
	ctx, cancel := context.WithTimeout(r.ctx, r.cfg.OperatorTimeout)
	defer cancel()
	outcome := OutcomeSuccess
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.notifyTo, bytes.NewReader(body))
	if err != nil {
		outcome = OutcomeUnreachable
	} else {
		req.Header.Set("Content-Type", "application/json")
		var resp *http.Response
		resp, err = r.operator.Do(req)
		if err != nil {
			outcome = OutcomeUnreachable
		} else {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			_ = resp.Body.Close()
			if resp.StatusCode < 200 || resp.StatusCode > 299 {
				outcome = OutcomeRejected
				err = fmt.Errorf("operator answered %s", resp.Status)
			}
		}
	}
	if r.ctx.Err() != nil {
		return outcome // shutting down: neither counted nor logged
	}
	r.metrics.Notifications.WithLabelValues(outcome).Inc()
	if err != nil {
		logger.V(2).Info("Notifying operator failed", "outcome", outcome, "err", err)
	} else {
		logger.V(4).Info("Notified operator")
	}
	return outcome
}
