package hold

import (
	"time"

	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
)

// wakeLoop asks the operator to wake svc while it has held requests: at once, then
// with exponential backoff while the operator rejects or cannot be
// reached, or every retryMax after a success, and at once on a kick or
// when a hold joined since it last asked and nothing is held (a waiting
// page: the Service may have gone back to zero; such joins are bounded by
// admission's per-client wake rate). It
// stops when nothing is held and no hold joined since it last asked, or
// when svc has a Ready endpoint that no hold missed since.
//
// Every hold is asked for, even one that ended before the loop looked: a
// waiting page answered at once, or a client that gave up, leaves before
// this goroutine runs or while it pauses, and the operator must still hear
// that the Service was asked for, or every reload of the page would race
// the same way and the Service would never wake.
func (h *Holder) wakeLoop(svc clusterview.ServiceRef, w *waiter) {
	defer h.wg.Done()
	logger := h.logger.WithValues("service", svc.KRef())
	backoff := h.retryInitial
	// w.joins when the loop last asked. A loop starts only after a join, so
	// joins is at least 1 and the first look asks.
	var askedFor uint64
	for {
		h.mu.Lock()
		seen := w.misses
		h.mu.Unlock()
		ready := h.ready(svc) // outside the lock: reads the informer cache
		h.mu.Lock()
		if (w.held == 0 && w.joins == askedFor) || (ready && w.misses == seen) || h.closed {
			w.waking = false
			if w.held == 0 {
				delete(h.waiters, svc)
			}
			h.mu.Unlock()
			logger.V(2).Info("Stopped asking the operator to wake the service")
			return
		}
		joins := w.joins
		h.mu.Unlock()
		if ready {
			continue // a hold missed while we looked: look again
		}
		askedFor = joins // a hold that joins from here on is asked for again
		wait := h.retryMax
		if outcome := h.wake(h.ctx, logger, svc); outcome != OutcomeSuccess {
			wait = backoff
			backoff = min(2*backoff, h.retryMax)
		} else {
			backoff = h.retryInitial
		}
		h.mu.Lock()
		left := w.held == 0
		h.mu.Unlock()
		if left {
			continue // nothing to pause for: the loop ends unless a hold joined meanwhile
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
func (h *Holder) ready(svc clusterview.ServiceRef) bool {
	b, err := h.eps.Lookup(svc, "")
	return err == nil && len(b.Addrs) > 0
}
