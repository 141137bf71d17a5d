package resolver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/elasti-dev/elasti/pkg/connlimit"
	"github.com/elasti-dev/elasti/pkg/resolver/admission"
	"github.com/elasti-dev/elasti/pkg/resolver/answer"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
	"github.com/elasti-dev/elasti/pkg/resolver/directprobe"
	"github.com/elasti-dev/elasti/pkg/resolver/forward"
	"github.com/elasti-dev/elasti/pkg/resolver/hold"
	"github.com/elasti-dev/elasti/pkg/resolver/identify"
	"github.com/elasti-dev/elasti/pkg/resolver/proberules"
)

// Options are the resolver's collaborators.
type Options struct {
	// Endpoints is required.
	Endpoints clusterview.EndpointSource
	// Probes is optional; without it no request is answered by a rule.
	Probes proberules.Matcher
	// Named is optional; with it, a request for a Service the resolver is
	// not in front of waits frontGrace for a resolver slice only when an
	// ElastiService names the Service, and is answered 404 at once
	// otherwise. Without it every such request is answered 404 at once.
	Named clusterview.Namer
	// Waiting is optional; with it, a hold that times out names what the
	// wake waits on, a dependency of a wake group (NamedIndex is one).
	Waiting interface {
		WaitingOn(clusterview.ServiceRef) string
	}
	// Pages is optional; with it, an ElastiService's spec.waitingPage
	// turns the waiting page on or off for its Service (package answer).
	// Without it Config.WaitingPage alone decides.
	Pages answer.PageSwitch
	// Holds is optional; with it, an ElastiService's spec.hold bounds the
	// holds of its Service (holdbounds.go). Without it the flags alone do.
	Holds HoldSpecs
	// Registerer receives the metrics; nil leaves them unregistered.
	Registerer prometheus.Registerer
	// Dial connects to pods; nil means a net.Dialer with Config.DialTimeout.
	Dial forward.DialFunc
	// OperatorClient posts wake requests to the operator; nil means a
	// private client that ignores HTTP proxy environment variables.
	OperatorClient *http.Client
	// Pods reads the pods that direct probing checks (package directprobe); direct
	// probing is on when it is set and Config.ProbePods is true.
	Pods clusterview.PodGetter
	// PodView, when set, watches the pods of each Service a request is
	// held for: a pod the kubelet wrote Ready releases the hold without
	// waiting for the EndpointSlice controller, and every address the
	// slices give is checked against the pods (clusterview.VouchedEndpoints).
	// Without it the slices alone are read, as unit tests do.
	PodView clusterview.PodView
	// WakeToken, when set, gives the token every wake request carries
	// (see pkg/waketoken). Nil sends none, as KubeElasti's resolver.
	WakeToken hold.TokenSource
	// Clock is the time the wake limit per client address reads; nil
	// means the real clock.
	Clock clock.PassiveClock
}

// Resolver is the http.Handler for proxied traffic. Create it with New and
// stop it with Close. This file holds the order of the layers, for HTTP
// (serveService) and for TCP (serveConn); the layers are mapped in the
// package doc (doc.go).
type Resolver struct {
	cfg Config
	// eps is the Options' EndpointSource, vouched for by the pod view
	// when there is one; hosts identifies a Service from the Host, by
	// the EndpointSource's ClusterIP index too if it has one.
	eps   clusterview.EndpointSource
	hosts identify.Hosts
	// view is Options.PodView, nil without one.
	view    clusterview.PodView
	probes  proberules.Matcher
	named   clusterview.Namer
	waiting interface {
		WaitingOn(clusterview.ServiceRef) string
	}
	pages   answer.PageSwitch
	bounds  HoldSpecs
	admit   *admission.Admission
	holds   *hold.Holder
	held    *hold.HeldReports
	fwd     *forward.Forwarder
	metrics *Metrics
	logger  klog.Logger

	// conns bounds the client connections of the proxy port and the
	// resolver ports together.
	conns *connlimit.Limiter
	// buffered counts the bytes of held request bodies in memory (body.go).
	buffered atomic.Int64
	// canned writes the probe rules' answers, page the waiting page.
	canned answer.Probes
	page   *answer.Pages
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
	wakes := admission.NewWakeLimiter(cfg.SourceWakeRate, cfg.SourceWakeBurst, cfg.SourceWakeTracked)
	var clk clock.PassiveClock = clock.RealClock{}
	if opts.Clock != nil {
		clk = opts.Clock
	}
	metrics, err := NewMetrics(opts.Registerer, wakes.Sources)
	if err != nil {
		return nil, fmt.Errorf("resolver metrics: %w", err)
	}
	logger := klog.FromContext(ctx).WithName("resolver")
	eps := opts.Endpoints
	if opts.PodView != nil {
		eps = clusterview.VouchedEndpoints{EndpointSource: eps, View: opts.PodView}
	}
	clusterIPs, _ := opts.Endpoints.(identify.ClusterIPIndex)
	waker := hold.NewWakeClient(cfg.holdConfig(), opts.OperatorClient, opts.WakeToken, metrics.Hold)
	held := hold.NewHeldReports(ctx, waker, logger)
	holdOpts := hold.Options{PodView: opts.PodView, Reports: held, Metrics: metrics.Hold, Logger: logger,
		Admission: admission.New(cfg.admissionLimits(), wakes, clk, metrics.Hold.Queued)}
	if cfg.ProbePods {
		holdOpts.Pods = opts.Pods
	}
	holdOpts.DirectReport = directprobe.Report{
		FellBack: func(reason string) { metrics.DirectProbe.DirectProbeFallbacks.WithLabelValues(reason).Inc() },
		Lead:     func(d time.Duration) { metrics.DirectProbe.DirectProbeLead.Observe(d.Seconds()) },
	}
	return &Resolver{
		cfg:     cfg,
		eps:     eps,
		hosts:   identify.Hosts{Header: cfg.HostHeader, ClusterDomain: cfg.ClusterDomain, ClusterIPs: clusterIPs},
		view:    opts.PodView,
		probes:  opts.Probes,
		named:   opts.Named,
		waiting: opts.Waiting,
		pages:   opts.Pages,
		bounds:  opts.Holds,
		admit:   holdOpts.Admission,
		holds:   hold.New(klog.NewContext(ctx, logger), cfg.holdConfig(), eps, waker.Wake, holdOpts),
		held:    held,
		fwd:     forward.New(cfg.forwardConfig(), eps, opts.Dial, metrics.Forward, logger),
		conns:   connlimit.New(cfg.MaxConnections, cfg.MaxConnectionsPerSource, metrics.Admission.Connections, metrics.Admission.ConnectionsRefused),
		metrics: metrics,
		logger:  logger,
		canned:  answer.NewProbes(opts.Probes, metrics.Answer),
		page:    answer.NewPages(cfg.WaitingPageAfter, metrics.Answer),
	}, nil
}

// Metrics returns the resolver's metrics.
func (r *Resolver) Metrics() *Metrics { return r.metrics }

// Close ends the wake loops, answers 503 to requests still held, and
// waits for the loops to return. Forwarded requests are left to the
// server's Shutdown.
func (r *Resolver) Close() {
	r.holds.Close()
	r.held.Close()
	r.fwd.CloseIdle()
}

// serveService is the HTTP path, once identify (package identify) has
// named the Service: front, then forward at once when svc has a Ready endpoint
// on port (a Service port number, or "" for the default port); else a
// probe answer, or hold, then forward.
func (r *Resolver) serveService(w http.ResponseWriter, req *http.Request, svc clusterview.ServiceRef, port string) {
	logger := r.logger.WithValues("service", svc.KRef())
	// Charged before anything waits, and given back when the request is
	// answered: the front grace, a hold and a pod that stalls all keep
	// the request in memory.
	uncharge, refused := r.admit.Charge(svc.Namespace, requestBytes(req))
	if refused.Scope != "" {
		r.countRefusal(hold.Spec{Protocol: admission.ProtocolHTTP, Client: req.RemoteAddr, Logger: logger}, refused)
		answer.Refusal(w, svc, refused, r.cfg.RetryAfter)
		return
	}
	defer uncharge()
	if !clusterview.AwaitFront(req.Context(), r.eps, r.named, svc) {
		logger.V(4).Info("Refusing request for a Service the resolver is not in front of")
		r.metrics.Answer.NotInFront.WithLabelValues(admission.ProtocolHTTP).Inc()
		answer.Error(w, http.StatusNotFound, fmt.Sprintf("service %s is not asleep behind elasti; call it directly", svc))
		return
	}
	b, err := r.lookupToForward(req.Context(), svc, port)
	if err != nil {
		answer.LookupFailed(w, logger, svc, err)
		return
	}
	if len(b.Addrs) > 0 {
		r.forward(w, req, logger, svc, port, b, 0)
		return
	}
	if r.canned.Answer(w, req, logger, svc) {
		return
	}
	r.holdRequest(w, req, logger, svc, port)
}

// viewListWait bounds how long a request about to be forwarded without a
// hold waits for the pod view's first list of its Service: one label-
// selected list, milliseconds on a healthy apiserver.
const viewListWait = 2 * time.Second

// lookupToForward is Lookup for a request or connection that may be
// forwarded without a hold. When the slices list a Ready endpoint and the
// pod view does not have svc's pods whole (no hold in the last
// podViewLinger), it joins the view and waits for its first list, so the
// addresses are vouched for as a held request's are (clusterview.VouchedEndpoints): a forged
// Ready endpoint is no shortcut past the check. The wait is for the
// first request after a quiet spell only; a Service with no view to make
// (past the bounds, no selector) waits for nothing: its addresses are
// vouched for by reads of their pods (vouchByName).
func (r *Resolver) lookupToForward(ctx context.Context, svc clusterview.ServiceRef, port string) (clusterview.Backends, error) {
	b, err := r.eps.Lookup(svc, port)
	if err != nil || len(b.Addrs) == 0 || r.view == nil {
		return b, err
	}
	if _, whole := r.view.Pods(svc); whole {
		return b, nil
	}
	leave, listed := r.view.Join(svc)
	defer leave()
	timer := time.NewTimer(viewListWait)
	defer timer.Stop()
	select {
	case <-listed:
	case <-timer.C:
	case <-ctx.Done():
	}
	return r.eps.Lookup(svc, port)
}

// forward sends req on to a pod, charging the request budget
// forwardOverheadBytes more while it does: past the budget it is answered
// 503 instead, unless it was held (waited > 0): the requests a wake
// releases all go on (see chargeAnyway).
func (r *Resolver) forward(w http.ResponseWriter, req *http.Request, logger klog.Logger, svc clusterview.ServiceRef, port string, b clusterview.Backends, waited time.Duration) {
	if waited > 0 {
		defer r.admit.ChargeAnyway(svc.Namespace, forwardOverheadBytes)()
		r.serveOrHold(w, req, logger, svc, port, b, waited)
		return
	}
	uncharge, refused := r.admit.Charge(svc.Namespace, forwardOverheadBytes)
	if refused.Scope != "" {
		r.countRefusal(hold.Spec{Protocol: admission.ProtocolHTTP, Client: req.RemoteAddr, Logger: logger}, refused)
		answer.Refusal(w, svc, refused, r.cfg.RetryAfter)
		return
	}
	defer uncharge()
	r.serveOrHold(w, req, logger, svc, port, b, waited)
}

// holdRequest holds req with Try (package hold), its body read into memory
// first when it may be (body.go), and answers what Try leaves to it: a
// refusal (package answer), 504 at the request timeout (503 at a Service's
// own, holdbounds.go), 503 when the resolver shuts down, and an early
// answer (waitpage.go): to a browser the waiting page, to a client that
// asks the wake status.
func (r *Resolver) holdRequest(w http.ResponseWriter, req *http.Request, logger klog.Logger, svc clusterview.ServiceRef, port string) {
	// The body budget is asked first: a body that does not fit streams,
	// and what a streaming body keeps in memory is charged on admission.
	buffer := r.bufferable(req) && r.reserveBuffer(req.ContentLength)
	if buffer {
		defer r.buffered.Add(-req.ContentLength)
		// The buffered body is charged to the request budget too; when
		// its namespace's share has no room for it, it streams.
		uncharge, refused := r.admit.Charge(svc.Namespace, req.ContentLength)
		if buffer = refused.Scope == ""; buffer {
			defer uncharge()
		}
	}
	bounds := r.boundsFor(svc)
	s := bounds.spec(hold.Spec{Service: svc, Port: port, Protocol: admission.ProtocolHTTP, Client: req.RemoteAddr,
		Bytes: heldRequestBytes(req, buffer), Logger: logger})
	early := r.earlyAnswerFor(req, svc)
	ctx, cancel := r.holdContext(req.Context(), early)
	defer cancel()
	began := time.Now()
	if buffer {
		s.WhileHeld = func(ctx context.Context, _ context.CancelFunc) (func(), error) {
			deadline, _ := ctx.Deadline()
			return nil, bufferBody(w, req, deadline)
		}
	}
	paged := false
	if early.due() {
		done := r.holds.ProbeAcrossPages(svc, pageProbeLinger)
		defer func() { done(paged) }()
	}
	err := r.holds.Try(ctx, s,
		func(refused admission.Refusal) {
			r.countRefusal(s, refused)
			r.refuseHeld(w, req, svc, bounds, refused)
		},
		func(b clusterview.Backends, waited time.Duration) {
			if early.due() {
				r.page.Forget(svc)
			}
			r.forward(w, req, logger, svc, port, b, waited)
		})
	switch {
	case err == nil:
	case errors.Is(err, errEarlyAnswer):
		paged = true
		r.answerEarly(w, req, logger, svc, port, early, began)
	case errors.Is(err, context.DeadlineExceeded):
		r.timedOut(w, req, svc, bounds)
	case errors.Is(err, hold.ErrClosed):
		// Another resolver pod, or by then the woken pod itself, takes the
		// retry: this one left the endpoints during its shutdown grace.
		w.Header().Set("Retry-After", answer.RetryAfterSeconds(answer.ShutdownRetryAfter))
		answer.Error(w, http.StatusServiceUnavailable, fmt.Sprintf("resolver is shutting down while service %s starts; retry", svc))
	default:
		answer.LookupFailed(w, logger, svc, err)
	}
}

// serveConn is the TCP path of a resolver port, once the port listeners
// (package identify) have named the Service: front, hold while the Service
// has no Ready endpoint, with the same admission, wake and timeout as an
// HTTP request, then splice to a pod (package forward). A client that waits
// gets no answer on failure, only a closed connection. When drop ends, c
// is given up at once, held or spliced.
func (r *Resolver) serveConn(drop context.Context, c *forward.PeekedConn, route identify.Route) {
	defer func() { _ = c.Close() }()
	svc, port := route.Service, strconv.Itoa(int(route.Port))
	logger := r.logger.WithValues("service", svc.KRef(), "port", route.Port)
	bounds := r.boundsFor(svc)
	ctx, cancel := context.WithTimeout(r.holds.Context(), bounds.timeout)
	defer cancel()
	defer context.AfterFunc(drop, cancel)()

	if !clusterview.AwaitFront(ctx, r.eps, r.named, svc) {
		r.metrics.Answer.NotInFront.WithLabelValues(admission.ProtocolTCP).Inc()
		logger.V(4).Info("Closing connection for a Service the resolver is not in front of")
		return
	}
	b, err := r.lookupToForward(ctx, svc, port)
	if err != nil {
		logger.V(2).Info("Closing connection: cannot resolve service", "err", err)
		return
	}
	if len(b.Addrs) > 0 {
		// Pods that went away before one accepted: held like any
		// connection for a Service with no Ready endpoint (rehold.go).
		if err := r.fwd.Splice(ctx, drop, c, logger, svc, port, b, 0); errors.Is(err, forward.ErrEndpointsGone) {
			r.holdConn(ctx, drop, c, logger, svc, port, bounds)
		}
		return
	}
	r.holdConn(ctx, drop, c, logger, svc, port, bounds)
}

// holdConn holds c, for svc's port, with try (package hold), and splices
// it once a pod is ready. It is serveConn's hold, a function of its own
// so that a connection spliced at once does not carry the hold's frame
// on its stack for as long as it is spliced: a goroutine's stack is kept
// at its largest, and the splice runs at the bottom of this one.
func (r *Resolver) holdConn(ctx, drop context.Context, c *forward.PeekedConn, logger klog.Logger, svc clusterview.ServiceRef, port string, bounds holdBounds) {
	s := bounds.spec(hold.Spec{Service: svc, Port: port, Protocol: admission.ProtocolTCP, Client: c.RemoteAddr().String(),
		Bytes: heldConnBytes(c), Logger: logger,
		WhileHeld: func(_ context.Context, cancel context.CancelFunc) (func(), error) {
			return forward.WatchClientClose(c, cancel), nil
		}})
	splice := func(b clusterview.Backends, held time.Duration) {
		if err := r.fwd.Splice(ctx, drop, c, logger, svc, port, b, held); err != nil {
			logger.Info("Closing held connection: the service's Ready pods went away before one accepted it", "err", err)
		}
	}
	// A refused connection is closed on return; that is its answer.
	err := r.holds.Try(ctx, s, func(refused admission.Refusal) { r.countRefusal(s, refused) }, splice)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		// An HTTP client is told (504); a TCP client sees only the close,
		// so the resolver's log says why (issue 39: TCP gives up as HTTP
		// does). elasti_resolver_queue_timeouts_total counts both.
		logger.Info("Closing held connection: no pod was Ready within the hold's timeout", "timeout", bounds.timeout, "client", s.Client)
	case err != nil:
		logger.V(4).Info("Held connection ended", "err", err)
	}
}

// countRefusal counts and logs a refused admission, of an HTTP request
// or a TCP connection alike.
func (r *Resolver) countRefusal(s hold.Spec, refused admission.Refusal) {
	if refused.Scope == admission.ScopeSource {
		r.metrics.Admission.WakeRateLimited.WithLabelValues(s.Protocol).Inc()
		s.Logger.V(2).Info("Client started too many wakes, refusing", "protocol", s.Protocol, "client", s.Client, "retryAfter", refused.RetryAfter)
		return
	}
	r.metrics.Admission.Overflow.WithLabelValues(refused.Scope).Inc()
	s.Logger.V(2).Info("Hold bound reached, refusing", "protocol", s.Protocol, "scope", refused.Scope, "client", s.Client)
}
