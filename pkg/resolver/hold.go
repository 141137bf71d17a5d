package resolver

import (
	"context"
	"errors"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// errClosed is what a hold returns when the resolver shuts down.
var errClosed = errors.New("resolver is shutting down")

// holder is the hold layer. It keeps one waiter per Service that has
// requests or connections waiting for a Ready endpoint; the waiter owns
// the loop that asks the operator to wake the Service, and the waits are
// woken by the EndpointSource's change channel. Its lock is never held
// while the informer cache is read.
type holder struct {
	eps          EndpointSource
	notify       func(ctx context.Context, logger klog.Logger, svc ServiceRef) string
	retryInitial time.Duration
	retryMax     time.Duration
	logger       klog.Logger

	// ctx ends on close; notifier loops and waits watch it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	closed  bool
	waiters map[ServiceRef]*waiter
}

// waiter is one Service's entry. It lives while anything is held for the
// Service or its notifier runs.
type waiter struct {
	held      int
	notifying bool
	// misses counts the times a hold saw no Ready endpoint. The notifier
	// stops on a Ready endpoint only if no hold missed one since it
	// looked: the endpoint it saw may have gone again.
	misses uint64
	// kick wakes the notifier from its wait between POSTs when a request
	// is held after every earlier one was released: the Service went back
	// to zero, and the operator must hear of it now.
	kick chan struct{}
}

func newHolder(ctx context.Context, eps EndpointSource, notify func(context.Context, klog.Logger, ServiceRef) string,
	retryInitial, retryMax time.Duration, logger klog.Logger) *holder {
	h := &holder{eps: eps, notify: notify, retryInitial: retryInitial, retryMax: retryMax, logger: logger,
		waiters: map[ServiceRef]*waiter{}}
	h.ctx, h.cancel = context.WithCancel(ctx)
	return h
}

// hold is one request's or connection's place in a waiter.
type hold struct {
	h    *holder
	svc  ServiceRef
	once sync.Once
}

// join registers a hold for svc and makes sure the operator hears of it.
// The caller must call leave.
func (h *holder) join(svc ServiceRef) *hold {
	h.mu.Lock()
	w := h.waiters[svc]
	if w == nil {
		w = &waiter{kick: make(chan struct{}, 1)}
		h.waiters[svc] = w
	}
	if w.held == 0 && w.notifying {
		select {
		case w.kick <- struct{}{}:
		default: // a kick is already pending
		}
	}
	w.held++
	w.misses++
	start := h.startLocked(svc, w)
	h.mu.Unlock()
	if start {
		h.logger.V(2).Info("Notifying operator of held requests", "service", svc.kref())
	}
	return &hold{h: h, svc: svc}
}

// startLocked starts w's notifier unless one runs or the holder closed.
func (h *holder) startLocked(svc ServiceRef, w *waiter) bool {
	if w.notifying || h.closed {
		return false
	}
	w.notifying = true
	h.wg.Add(1)
	go h.notifyLoop(svc, w)
	return true
}

// leave ends the hold; later calls do nothing.
func (hd *hold) leave() {
	hd.once.Do(func() {
		h := hd.h
		h.mu.Lock()
		defer h.mu.Unlock()
		w := h.waiters[hd.svc]
		if w.held--; w.held == 0 && !w.notifying {
			delete(h.waiters, hd.svc)
		}
	})
}

// missed records that the hold saw no Ready endpoint, and restarts the
// notifier if it had stopped (say, endpoints appeared and went again).
func (hd *hold) missed() {
	h := hd.h
	h.mu.Lock()
	defer h.mu.Unlock()
	w := h.waiters[hd.svc]
	w.misses++
	h.startLocked(hd.svc, w)
}

// wait returns port's Ready endpoints once there are some. It ends early
// with ctx's error (the deadline passed or the client left), errClosed, or
// a lookup error.
func (hd *hold) wait(ctx context.Context, port string) (Backends, error) {
	for {
		b, err := hd.h.eps.Lookup(hd.svc, port)
		if err != nil || len(b.Addrs) > 0 {
			return b, err
		}
		hd.missed()
		select {
		case <-b.Changed:
		case <-ctx.Done():
			return Backends{}, ctx.Err()
		case <-hd.h.ctx.Done():
			return Backends{}, errClosed
		}
	}
}

// notifyLoop tells the operator that svc has held requests: at once, then
// with exponential backoff while the operator rejects or cannot be
// reached, or every retryMax after a success, and at once on a kick. It
// stops when nothing is held or svc has a Ready endpoint that no hold
// missed since.
func (h *holder) notifyLoop(svc ServiceRef, w *waiter) {
	defer h.wg.Done()
	logger := h.logger.WithValues("service", svc.kref())
	backoff := h.retryInitial
	for {
		h.mu.Lock()
		seen := w.misses
		h.mu.Unlock()
		ready := h.ready(svc) // outside the lock: reads the informer cache
		h.mu.Lock()
		if w.held == 0 || (ready && w.misses == seen) || h.closed {
			w.notifying = false
			if w.held == 0 {
				delete(h.waiters, svc)
			}
			h.mu.Unlock()
			logger.V(2).Info("Stopped notifying operator")
			return
		}
		h.mu.Unlock()
		if ready {
			continue // a hold missed while we looked: look again
		}
		wait := h.retryMax
		if outcome := h.notify(h.ctx, logger, svc); outcome != OutcomeSuccess {
			wait = backoff
			backoff = min(2*backoff, h.retryMax)
		} else {
			backoff = h.retryInitial
		}
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-w.kick:
			timer.Stop()
		case <-h.ctx.Done():
			timer.Stop()
		}
	}
}

// ready reports whether svc has a Ready endpoint on the port a Host
// without a port selects; the pods of one Service become Ready for all
// their ports at once.
func (h *holder) ready(svc ServiceRef) bool {
	b, err := h.eps.Lookup(svc, "")
	return err == nil && len(b.Addrs) > 0
}

// held returns the holds waiting for svc.
func (h *holder) held(svc ServiceRef) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w := h.waiters[svc]; w != nil {
		return w.held
	}
	return 0
}

// close ends every wait with errClosed and waits for the notifiers.
func (h *holder) close() {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.cancel()
	h.wg.Wait()
}
