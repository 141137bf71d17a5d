package hold

import (
	"context"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/elasti-dev/elasti/pkg/resolver/admission"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
	"github.com/elasti-dev/elasti/pkg/resolver/directprobe"
)

// Config are the hold's settings, the resolver's Config of the names in
// parentheses.
type Config struct {
	// RequestTimeout bounds a hold (RequestTimeout).
	RequestTimeout time.Duration
	// RetryInitial and RetryMax bound the exponential backoff between wake
	// requests while the operator rejects them or cannot be reached; after
	// an accepted one the next waits RetryMax (OperatorRetryInitial,
	// OperatorRetryMax).
	RetryInitial, RetryMax time.Duration
	// OperatorURL is the operator's base URL, OperatorTimeout bounds one
	// request to it, DialTimeout one connect (OperatorURL,
	// OperatorTimeout, DialTimeout). Only the wake client reads them.
	OperatorURL     string
	OperatorTimeout time.Duration
	DialTimeout     time.Duration
}

// Options are the hold's optional collaborators, and those only Try
// needs; the required ones are New's arguments.
type Options struct {
	// PodView, when set, watches the pods of each Service a hold waits on:
	// a pod the kubelet wrote Ready releases the hold.
	PodView clusterview.PodView
	// Pods, when set, turns direct probing on: a hold is released by a pod
	// that passed its own readiness checks, run by the resolver, before
	// the slices list it Ready (package directprobe), which tells
	// DirectReport what it saw.
	Pods         clusterview.PodGetter
	DirectReport directprobe.Report
	// Admission admits each hold Try makes, and Reports is told how long
	// each released one waited. Try needs both.
	Admission *admission.Admission
	Reports   Reporter
	Metrics   Metrics
	Logger    klog.Logger
}

// WakeFunc asks the operator to wake svc and returns the outcome label
// (WakeClient.Wake is one). ctx ends on shutdown.
type WakeFunc func(ctx context.Context, logger klog.Logger, svc clusterview.ServiceRef) string

// Reporter is told how long a released hold waited (HeldReports is one).
type Reporter interface {
	Report(svc clusterview.ServiceRef, held time.Duration)
}

// Holder is the hold layer. It keeps one waiter per Service that has
// requests or connections waiting for a Ready endpoint; the waiter owns
// the loop that asks the operator to wake the Service, and each wait
// looks again when the EndpointSource's change channel closes. Its lock
// is never held while the informer cache is read.
type Holder struct {
	eps clusterview.EndpointSource
	// view watches the pods of each Service a hold waits on; nil without
	// a pod view (the slices alone).
	view clusterview.PodView
	// direct probes the pods the slices list not ready; nil when direct
	// probing is off.
	direct       *directprobe.Prober
	wake         WakeFunc
	retryInitial time.Duration
	retryMax     time.Duration
	logger       klog.Logger
	// admit, timeout, reports and metrics are Try's.
	admit   *admission.Admission
	timeout time.Duration
	reports Reporter
	metrics Metrics

	// ctx ends on Close; wake loops and waits watch it.
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

// New returns the hold layer: holds look for a Ready endpoint in eps, and
// watch it for a change, while wake loops ask the operator with wake. ctx
// bounds its wake loops, waits and direct probes together with Close.
func New(ctx context.Context, cfg Config, eps clusterview.EndpointSource, wake WakeFunc, opts Options) *Holder {
	h := &Holder{eps: eps, view: opts.PodView, wake: wake, retryInitial: cfg.RetryInitial, retryMax: cfg.RetryMax,
		logger: opts.Logger, admit: opts.Admission, timeout: cfg.RequestTimeout, reports: opts.Reports, metrics: opts.Metrics,
		waiters: map[clusterview.ServiceRef]*waiter{}}
	h.ctx, h.cancel = context.WithCancel(ctx)
	if opts.Pods != nil {
		h.direct = directprobe.NewProber(h.ctx, eps, opts.PodView, opts.Pods, opts.DirectReport, opts.Logger)
	}
	return h
}

// hold is one request's or connection's place in a waiter.
type hold struct {
	h   *Holder
	svc clusterview.ServiceRef
	// leave ends the hold; later calls do nothing.
	leave func()
}

// join registers a hold for svc and makes sure the operator hears of it.
// The caller must call leave.
func (h *Holder) join(svc clusterview.ServiceRef) *hold {
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
func (h *Holder) startLocked(svc clusterview.ServiceRef, w *waiter) bool {
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
// ErrClosed, or a lookup error.
func (hd *hold) wait(ctx context.Context, port string) (clusterview.Backends, error) {
	h := hd.h
	var leaveView func() // the pod view the hold joined, if any
	defer func() {
		if leaveView != nil {
			leaveView()
		}
	}()
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
		viewless := hd.joinView(&leaveView)
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
			retry, stopRetry, unreadRetry = t.C, t.Stop, min(2*unreadRetry, UnreadRetryMax)
		}
		// Without a pod view, join again in a while: the views may have
		// room by then, or the pause after a refusal (an apiserver that
		// restarted refuses while its authorizer starts) has ended.
		var rejoin <-chan time.Time
		stopRejoin := func() bool { return false }
		if viewless {
			t := time.NewTimer(ViewRejoin)
			rejoin, stopRejoin = t.C, t.Stop
		}
		var end error
		select {
		case <-w.slices:
		case <-w.pods:
		case <-w.passed:
		case <-rejoin:
		case <-retry:
		case <-ctx.Done():
			end = ctx.Err()
		case <-h.ctx.Done():
			end = ErrClosed
		}
		stopRetry()
		stopRejoin()
		w.stop()
		if end != nil {
			return clusterview.Backends{}, end
		}
	}
}

// joinView gives the hold a view of its Service's pods unless it has
// one, and reports whether it goes on without: a Join is refused past
// the views' bounds and within the pause after the apiserver refused a
// list or watch, and a view ends under its holds when it is refused or
// given back to a namespace within its share. *leave is the view joined,
// left here when that view ended. No holder view: nothing to join.
func (hd *hold) joinView(leave *func()) (viewless bool) {
	v := hd.h.view
	if v == nil {
		return false
	}
	if *leave != nil {
		if v.HasView(hd.svc) {
			return false
		}
		(*leave)()
		*leave = nil
	}
	l, _ := v.Join(hd.svc)
	if !v.HasView(hd.svc) {
		l()
		return true
	}
	*leave = l
	return false
}

// ViewRejoin is how soon a hold without a pod view joins again.
const ViewRejoin = time.Second

// unreadRetryInitial and UnreadRetryMax bound how soon, and how seldom, a
// hold looks again at Ready addresses no read has vouched for yet: the
// first retry comes once a read could be in, later ones back off to the
// spacing of the namespace's read rate.
const (
	unreadRetryInitial = 100 * time.Millisecond
	UnreadRetryMax     = time.Second
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

// Held returns the holds waiting for svc.
func (h *Holder) Held(svc clusterview.ServiceRef) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w := h.waiters[svc]; w != nil {
		return w.held
	}
	return 0
}

// Context ends when the hold layer closes: what waits on it, a TCP
// connection held or spliced say, is given up then.
func (h *Holder) Context() context.Context { return h.ctx }

// Direct is the prober of direct probing, nil when it is off.
func (h *Holder) Direct() *directprobe.Prober { return h.direct }

// Close ends every wait with ErrClosed and waits for the wake loops.
func (h *Holder) Close() {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.cancel()
	h.wg.Wait()
	if h.direct != nil {
		h.direct.Close()
	}
}
