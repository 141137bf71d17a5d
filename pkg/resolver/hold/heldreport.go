package hold

import (
	"context"
	"sync"
	"time"

	utilcache "k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/klog/v2"

	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
)

const (
	// heldReportSpacing is the least time between two reports of one
	// Service's held requests: a wake's held requests are released
	// together, and the first, which waited longest, is the one reported.
	heldReportSpacing = 10 * time.Second
	// maxHeldReported bounds the Services remembered as just reported.
	maxHeldReported = 4096
	// heldReportGather is how long a report waits for the rest of its
	// wake's releases, to send the longest wait: they are released
	// together, each on its own goroutine, in no set order.
	heldReportGather = 100 * time.Millisecond
)

// HeldReports tells the operator how long held requests waited
// (WakeClient.reportHeld), for the ElastiService's status.lastHeld, which
// `kubectl elasti status` shows as what clients waited: the scale-up to
// the kubelet's Ready (lastColdStart) is not what a client waits when the
// resolver's own readiness check passes first. A report never delays a
// request, and a failed one is only logged.
type HeldReports struct {
	operator *WakeClient
	// ctx ends with close: a report still under way then is dropped.
	ctx    context.Context
	cancel context.CancelFunc
	logger klog.Logger

	// reported holds the Services reported within heldReportSpacing.
	reported *utilcache.LRUExpireCache
	mu       sync.Mutex
	// pending holds the longest wait of each report being gathered.
	pending map[clusterview.ServiceRef]time.Duration
	stopped bool
	wg      sync.WaitGroup
}

// NewHeldReports returns the reports sent through w. ctx bounds them
// together with Close.
func NewHeldReports(ctx context.Context, w *WakeClient, logger klog.Logger) *HeldReports {
	ctx, cancel := context.WithCancel(ctx)
	return &HeldReports{operator: w, ctx: ctx, cancel: cancel, logger: logger, reported: utilcache.NewLRUExpireCache(maxHeldReported),
		pending: map[clusterview.ServiceRef]time.Duration{}}
}

// Report tells the operator that a request held for svc waited held,
// or longer if another of the same wake did (heldReportGather), unless
// svc was reported within heldReportSpacing.
func (h *HeldReports) Report(svc clusterview.ServiceRef, held time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if longest, gathering := h.pending[svc]; gathering {
		h.pending[svc] = max(longest, held)
		return
	}
	if _, recent := h.reported.Get(svc); recent || h.stopped || len(h.pending) >= maxHeldReported {
		return
	}
	h.pending[svc] = held
	h.reported.Add(svc, struct{}{}, heldReportSpacing)
	h.wg.Go(func() {
		gathered := time.NewTimer(heldReportGather)
		defer gathered.Stop()
		select {
		case <-gathered.C:
		case <-h.ctx.Done():
			return
		}
		h.mu.Lock()
		longest := h.pending[svc]
		delete(h.pending, svc)
		h.mu.Unlock()
		if err := h.operator.reportHeld(h.ctx, svc, longest); err != nil {
			h.logger.V(2).Info("Could not report a held request to the operator", "service", svc.KRef(), "held", longest, "err", err)
		}
	})
}

// Close refuses further reports, drops those under way and waits for
// them to return.
func (h *HeldReports) Close() {
	h.mu.Lock()
	h.stopped = true
	h.mu.Unlock()
	h.cancel()
	h.wg.Wait()
}
