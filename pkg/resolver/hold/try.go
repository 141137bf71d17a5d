package hold

import (
	"cmp"
	"context"
	"errors"
	"time"

	"k8s.io/klog/v2"

	"github.com/elasti-dev/elasti/pkg/resolver/admission"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
)

// ErrClosed is what a hold returns when the resolver shuts down.
var ErrClosed = errors.New("resolver is shutting down")

// Spec is what a caller of Try says of the request or connection it
// holds.
type Spec struct {
	Service clusterview.ServiceRef
	Port    string
	// Protocol is admission.ProtocolHTTP or admission.ProtocolTCP, for the metrics.
	Protocol string
	// Client is the remote address, host:port; admission counts its host.
	Client string
	// Bytes is charged against the resolver's Config.MaxHeldBytes while
	// held (see its heldRequestBytes and heldConnBytes).
	Bytes  int64
	Logger klog.Logger
	// WhileHeld, when set, runs once the hold is admitted and joined,
	// before it waits: HTTP reads a small body in (the resolver's body.go), TCP watches
	// for a client that resets (forward.WatchClientClose). ctx is the hold's, and
	// cancel ends it. A non-nil stop is called as the wait ends; an error
	// ends the hold at once, unanswered: the client left.
	WhileHeld func(ctx context.Context, cancel context.CancelFunc) (stop func(), err error)
	// Timeout and MaxHeld are the Service's own bounds (its
	// spec.hold): how long it is held, and how many of its Service's are
	// held at once; zero takes Config.RequestTimeout and the admission's
	// per-Service bound.
	Timeout time.Duration
	MaxHeld int
}

// Try is the hold step of a request or connection whose Service has no
// Ready endpoint, shared by HTTP and TCP. As in Knative's activator (its
// throttler's Try), one call covers admit and hold: it takes a slot
// (package admission), joins the Service's waiter, which asks the
// operator to wake the Service, waits up to its timeout for a
// Ready endpoint on port, gives the slot back and calls ready with the
// endpoints and the time waited. When admission refuses, it calls
// refuse, which counts and answers the refusal.
//
// It returns nil when ready or refuse ran or the client left; otherwise
// why the wait ended, for the caller to answer: context.DeadlineExceeded
// (counted as a timeout), the cause ctx ended with when it is not ctx's
// own error (a deadline of the caller's given a cause, as the waiting
// page's), ErrClosed, or the EndpointSource's error.
func (h *Holder) Try(ctx context.Context, s Spec, refuse func(admission.Refusal), ready func(b clusterview.Backends, waited time.Duration)) error {
	release, refused := h.admit.Admit(s.Service, s.MaxHeld, admission.SourceOf(s.Client), s.Bytes)
	if refused.Scope != "" {
		refuse(refused)
		return nil
	}
	defer release()
	hd := h.join(s.Service)
	defer hd.leave()

	began := time.Now()
	s.Logger.V(4).Info("Holding until the service has a Ready endpoint", "protocol", s.Protocol)
	timeout := cmp.Or(s.Timeout, h.timeout)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var stop func()
	if s.WhileHeld != nil {
		var err error
		if stop, err = s.WhileHeld(ctx, cancel); err != nil {
			// The slot is freed on return; nobody is left to answer.
			s.Logger.V(4).Info("Client went away before the wait", "err", err)
			return nil
		}
	}
	b, err := hd.wait(ctx, s.Port)
	if stop != nil {
		stop()
	}
	switch {
	case err == nil:
	case ctx.Err() != nil && !errors.Is(context.Cause(ctx), ctx.Err()):
		return context.Cause(ctx)
	case errors.Is(err, context.DeadlineExceeded):
		h.metrics.Timeouts.Inc()
		s.Logger.V(2).Info("Hold timed out", "protocol", s.Protocol, "timeout", timeout)
		return err
	case errors.Is(err, context.Canceled):
		s.Logger.V(4).Info("Hold ended: the client went away or the connection was dropped")
		return nil
	default:
		return err
	}
	hd.leave()
	release()
	readyBy := ReleasedByEndpointReady
	switch {
	case b.Probed:
		readyBy = ReleasedByDirectProbe
	case b.FromPods:
		readyBy = ReleasedByPodReady
	}
	h.metrics.HeldReleases.WithLabelValues(readyBy).Inc()
	waited := time.Since(began)
	h.metrics.ColdStartWait.Observe(waited.Seconds())
	h.reports.Report(s.Service, waited)
	// readyBy says which view released it: a slow cold start's evidence
	// tells the EndpointSlice controller's lag from the pod view's.
	s.Logger.V(4).Info("Releasing hold", "waited", waited, "readyBy", readyBy)
	ready(b, waited)
	return nil
}

// ProbeAcrossPages keeps svc's direct checks going for a request that
// may get the waiting page: it joins the prober before the hold, and
// done lets go, linger later when the request was paged, at once
// otherwise. Without direct probing it does nothing.
func (h *Holder) ProbeAcrossPages(svc clusterview.ServiceRef, linger time.Duration) (done func(paged bool)) {
	if h.direct == nil {
		return func(bool) {}
	}
	leave := h.direct.Join(svc)
	return func(paged bool) {
		if paged {
			time.AfterFunc(linger, leave)
			return
		}
		leave()
	}
}
