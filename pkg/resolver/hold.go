package resolver

import (
	"context"
	"errors"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/elasti-dev/elasti/pkg/resolver/admission"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
	"github.com/elasti-dev/elasti/pkg/resolver/directprobe"
)

// errClosed is what a hold returns when the resolver shuts down.
var errClosed = errors.New("resolver is shutting down")

// holdSpec is what a caller of try says of the request or connection it
// holds.
type holdSpec struct {
	svc  clusterview.ServiceRef
	port string
	// protocol is admission.ProtocolHTTP or admission.ProtocolTCP, for the metrics.
	protocol string
	// client is the remote address, host:port; admission counts its host.
	client string
	// bytes is charged against Config.MaxHeldBytes while held (see
	// heldRequestBytes and heldConnBytes).
	bytes  int64
	logger klog.Logger
	// whileHeld, when set, runs once the hold is admitted and joined,
	// before it waits: HTTP reads a small body in (body.go), TCP watches
	// for a client that resets (forward.WatchClientClose). ctx is the hold's, and
	// cancel ends it. A non-nil stop is called as the wait ends; an error
	// ends the hold at once, unanswered: the client left.
	whileHeld func(ctx context.Context, cancel context.CancelFunc) (stop func(), err error)
}

// try is the hold step of a request or connection whose Service has no
// Ready endpoint, shared by HTTP and TCP. As in Knative's activator (its
// throttler's Try), one call covers admit and hold: it takes a slot
// (admit.go), joins the Service's waiter, which asks the operator to wake
// the Service, waits up to Config.RequestTimeout for a Ready endpoint on
// port, gives the slot back and calls ready with the endpoints and the
// time waited. When admission refuses, it counts the refusal and calls
// refuse, which answers the client.
//
// It returns nil when ready or refuse ran or the client left; otherwise
// why the wait ended, for the caller to answer: context.DeadlineExceeded
// (counted as a timeout), errWaitingPage when ctx ended with that cause
// (the caller's own deadline, waitpage.go), errClosed, or the
// EndpointSource's error.
func (r *Resolver) try(ctx context.Context, s holdSpec, refuse func(admission.Refusal), ready func(b clusterview.Backends, waited time.Duration)) error {
	release, refused := r.admit.Admit(s.svc, admission.SourceOf(s.client), s.bytes)
	if refused.Scope != "" {
		r.countRefusal(s, refused)
		refuse(refused)
		return nil
	}
	defer release()
	hd := r.holds.join(s.svc)
	defer hd.leave()

	began := time.Now()
	s.logger.V(4).Info("Holding until the service has a Ready endpoint", "protocol", s.protocol)
	ctx, cancel := context.WithTimeout(ctx, r.cfg.RequestTimeout)
	defer cancel()
	var stop func()
	if s.whileHeld != nil {
		var err error
		if stop, err = s.whileHeld(ctx, cancel); err != nil {
			// The slot is freed on return; nobody is left to answer.
			s.logger.V(4).Info("Client went away before the wait", "err", err)
			return nil
		}
	}
	b, err := hd.wait(ctx, s.port)
	if stop != nil {
		stop()
	}
	switch {
	case err == nil:
	case errors.Is(context.Cause(ctx), errWaitingPage):
		return errWaitingPage
	case errors.Is(err, context.DeadlineExceeded):
		r.metrics.Timeouts.Inc()
		s.logger.V(2).Info("Hold timed out", "protocol", s.protocol, "timeout", r.cfg.RequestTimeout)
		return err
	case errors.Is(err, context.Canceled):
		s.logger.V(4).Info("Hold ended: the client went away or the connection was dropped")
		return nil
	default:
		return err
	}
	hd.leave()
	release()
	switch {
	case b.Probed:
		r.metrics.HeldReleases.WithLabelValues(ReleasedByDirectProbe).Inc()
	case b.FromPods:
		r.metrics.HeldReleases.WithLabelValues(ReleasedByPodReady).Inc()
	default:
		r.metrics.HeldReleases.WithLabelValues(ReleasedByEndpointReady).Inc()
	}
	waited := time.Since(began)
	r.metrics.ColdStartWait.Observe(waited.Seconds())
	r.held.report(s.svc, waited)
	s.logger.V(4).Info("Releasing hold", "waited", waited)
	ready(b, waited)
	return nil
}

// countRefusal counts and logs a refused admission.
func (r *Resolver) countRefusal(s holdSpec, refused admission.Refusal) {
	if refused.Scope == admission.ScopeSource {
		r.metrics.Admission.WakeRateLimited.WithLabelValues(s.protocol).Inc()
		s.logger.V(2).Info("Client started too many wakes, refusing", "protocol", s.protocol, "client", s.client, "retryAfter", refused.RetryAfter)
		return
	}
	r.metrics.Admission.Overflow.WithLabelValues(refused.Scope).Inc()
	s.logger.V(2).Info("Hold bound reached, refusing", "protocol", s.protocol, "scope", refused.Scope, "client", s.client)
}

// holder is the hold layer. It keeps one waiter per Service that has
// requests or connections waiting for a Ready endpoint; the waiter owns
// the loop that asks the operator to wake the Service, and each wait
// looks again when the EndpointSource's change channel closes. Its lock is never held
// while the informer cache is read.
type holder struct {
	eps clusterview.EndpointSource
	// view watches the pods of each Service a hold waits on; nil without
	// a pod view (the slices alone).
	view clusterview.PodView
	// direct probes the pods the slices list not ready; nil when direct
	// probing is off.
	direct       *directprobe.Prober
	wake         func(ctx context.Context, logger klog.Logger, svc clusterview.ServiceRef) string
	retryInitial time.Duration
	retryMax     time.Duration
	logger       klog.Logger

	// ctx ends on close; wake loops and waits watch it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	closed  bool
	waiters map[clusterview.ServiceRef]*waiter
}

// waiter is one Service's entry. It lives while anything is held for the
// Service or its wake loop runs.
type waiter struct {
	held   int
	waking bool
	// misses counts the times a hold saw no Ready endpoint. The wake loop
	// stops on a Ready endpoint only if no hold missed one since it
	// looked: the endpoint it saw may have gone again.
	misses uint64
	// joins counts the holds ever joined. The wake loop ends, with nothing
	// held, only if no hold joined since it last asked: a hold that joins
	// and leaves while the loop pauses (a waiting page answered at once)
	// was never asked for, and the Service may have gone back to zero or
	// the last wake failed.
	joins uint64
	// kick ends the wake loop's pause between wake requests when a
	// request is held after every earlier one was released: the Service
	// went back to zero, and the operator must hear of it now.
	kick chan struct{}
}

// newHolder returns a holder. pods, when not nil, turns direct probing on:
// a hold is released by a pod that passed its own readiness checks, run
// by the resolver, before the slices list it Ready (podprobe.go).
func newHolder(ctx context.Context, eps clusterview.EndpointSource, view clusterview.PodView, wake func(context.Context, klog.Logger, clusterview.ServiceRef) string,
	retryInitial, retryMax time.Duration, pods clusterview.PodGetter, report directprobe.Report, logger klog.Logger) *holder {
	h := &holder{eps: eps, view: view, wake: wake, retryInitial: retryInitial, retryMax: retryMax, logger: logger,
		waiters: map[clusterview.ServiceRef]*waiter{}}
	h.ctx, h.cancel = context.WithCancel(ctx)
	if pods != nil {
		h.direct = directprobe.NewProber(h.ctx, eps, view, pods, report, logger)
	}
	return h
}

// hold is one request's or connection's place in a waiter.
type hold struct {
	h   *holder
	svc clusterview.ServiceRef
	// leave ends the hold; later calls do nothing.
	leave func()
}

// join registers a hold for svc and makes sure the operator hears of it.
// The caller must call leave.
func (h *holder) join(svc clusterview.ServiceRef) *hold {
	h.mu.Lock()
	w := h.waiters[svc]
	if w == nil {
		w = &waiter{kick: make(chan struct{}, 1)}
		h.waiters[svc] = w
	}
	if w.held == 0 && w.waking {
		select {
		case w.kick <- struct{}{}:
		default: // a kick is already pending
		}
	}
	w.held++
	w.joins++
	w.misses++
	start := h.startLocked(svc, w)
	h.mu.Unlock()
	if start {
		h.logger.V(2).Info("Asking the operator to wake the service", "service", svc.KRef())
	}
	hd := &hold{h: h, svc: svc}
	hd.leave = sync.OnceFunc(hd.release)
	return hd
}

// startLocked starts w's wake loop unless one runs or the holder closed.
func (h *holder) startLocked(svc clusterview.ServiceRef, w *waiter) bool {
	if w.waking || h.closed {
		return false
	}
	w.waking = true
	h.wg.Add(1)
	go h.wakeLoop(svc, w)
	return true
}

// release gives the hold's place back; see leave.
func (hd *hold) release() {
	h := hd.h
	h.mu.Lock()
	defer h.mu.Unlock()
	w := h.waiters[hd.svc]
	if w.held--; w.held == 0 && !w.waking {
		delete(h.waiters, hd.svc)
	}
}

// missed records that the hold saw no Ready endpoint, and restarts the
// wake loop if it had stopped (say, endpoints appeared and went again).
func (hd *hold) missed() {
	h := hd.h
	h.mu.Lock()
	defer h.mu.Unlock()
	w := h.waiters[hd.svc]
	w.misses++
	h.startLocked(hd.svc, w)
}

// wait returns port's Ready endpoints once there are some: those the
// slices list, or, with the pod view, the pods the kubelet wrote Ready
// (Backends.FromPods); or, with direct probing, the not-ready endpoints
// whose pod passed its own readiness checks first (Backends.Probed). It
// ends early with ctx's error (the deadline passed or the client left),
// errClosed, or a lookup error.
func (hd *hold) wait(ctx context.Context, port string) (clusterview.Backends, error) {
	h := hd.h
	if h.view != nil {
		leave, _ := h.view.Join(hd.svc)
		defer leave()
	}
	if h.direct != nil {
		leave := h.direct.Join(hd.svc)
		defer leave()
	}
	unreadRetry := unreadRetryInitial
	for {
		// Watch, then read: a change in between closes one of the
		// channels (a slice, a pod of the view, a pod passing its direct
		// check). The watches end with each turn, so nothing stays behind
		// once the hold does.
		w := hd.watch()
		b, err := h.eps.Lookup(hd.svc, port)
		if err != nil || len(b.Addrs) > 0 {
			w.stop()
			return b, err
		}
		if h.direct != nil {
			if addrs := h.direct.Passed(hd.svc, b.Unready); len(addrs) > 0 {
				w.stop()
				b.Addrs, b.Probed = addrs, true
				return b, nil
			}
		}
		hd.missed()
		// Ready addresses waiting on a pod read: the read that would
		// vouch for them may never come in (refused by the namespace's
		// read rate), and then nothing else changes, so look again.
		var retry <-chan time.Time
		stopRetry := func() bool { return false }
		if b.Unread {
			if unreadRetry == unreadRetryInitial {
				h.logger.V(4).Info("Ready addresses wait on reads of their pods", "service", hd.svc.KRef())
			}
			t := time.NewTimer(unreadRetry)
			retry, stopRetry, unreadRetry = t.C, t.Stop, min(2*unreadRetry, unreadRetryMax)
		}
		var end error
		select {
		case <-w.slices:
		case <-w.pods:
		case <-w.passed:
		case <-retry:
		case <-ctx.Done():
			end = ctx.Err()
		case <-h.ctx.Done():
			end = errClosed
		}
		stopRetry()
		w.stop()
		if end != nil {
			return clusterview.Backends{}, end
		}
	}
}

// unreadRetryInitial and unreadRetryMax bound how soon, and how seldom, a
// hold looks again at Ready addresses no read has vouched for yet: the
// first retry comes once a read could be in, later ones back off to the
// spacing of the namespace's read rate.
const (
	unreadRetryInitial = 100 * time.Millisecond
	unreadRetryMax     = time.Second
)

// holdWatch is one turn's watches of a hold: a nil channel is one the
// holder does not have, never closed.
type holdWatch struct {
	slices, pods, passed <-chan struct{}
	stops                []func()
}

func (w holdWatch) stop() {
	for _, s := range w.stops {
		s()
	}
}

func (hd *hold) watch() holdWatch {
	var w holdWatch
	var stop func()
	w.slices, stop = hd.h.eps.Watch(hd.svc)
	w.stops = append(w.stops, stop)
	if hd.h.view != nil {
		w.pods, stop = hd.h.view.Watch(hd.svc)
		w.stops = append(w.stops, stop)
	}
	if hd.h.direct != nil {
		w.passed, stop = hd.h.direct.Watch(hd.svc)
		w.stops = append(w.stops, stop)
	}
	return w
}

// held returns the holds waiting for svc.
func (h *holder) held(svc clusterview.ServiceRef) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w := h.waiters[svc]; w != nil {
		return w.held
	}
	return 0
}

// close ends every wait with errClosed and waits for the wake loops.
func (h *holder) close() {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.cancel()
	h.wg.Wait()
	if h.direct != nil {
		h.direct.Close()
	}
}
