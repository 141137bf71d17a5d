package resolver

import (
	"net/http"
	"time"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/resolver/admission"
	"github.com/elasti-dev/elasti/pkg/resolver/answer"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
	"github.com/elasti-dev/elasti/pkg/resolver/hold"
)

// HoldSpecs gives a Service's own hold bounds, the spec.hold of the
// ElastiService that names it, and that ElastiService's median cold start
// (clusterview.NamedIndex is one). The median is read only for a client
// past a bound, not for every hold.
type HoldSpecs interface {
	Hold(svc clusterview.ServiceRef) *elastiv1alpha1.Hold
	MedianColdStart(svc clusterview.ServiceRef) (time.Duration, bool)
}

// holdBounds are how long a request or connection for one Service may be
// held and how many at once, and what a client past them is told.
type holdBounds struct {
	// timeout and maxHeld are hold.Spec's; maxHeld 0 is the resolver's
	// --per-service-queue.
	timeout time.Duration
	maxHeld int
	// ownTimeout is true when the timeout is the Service's spec.hold's: a
	// client past it gets 503 with Retry-After, as the spec asked, where a
	// client past the resolver's --request-timeout gets 504.
	ownTimeout bool
}

// boundsFor returns svc's hold bounds: the resolver's flags, replaced by
// its ElastiService's spec.hold where that sets them, a timeout cut to
// Config.MaxHoldTimeout. A field the operator refuses (InvalidSpec) is
// left to the flags until it is fixed.
func (r *Resolver) boundsFor(svc clusterview.ServiceRef) holdBounds {
	b := holdBounds{timeout: r.cfg.RequestTimeout}
	if r.bounds == nil {
		return b
	}
	h := r.bounds.Hold(svc)
	if h == nil {
		return b
	}
	if d, ok, err := elastiv1alpha1.ParseHoldTimeout(h.Timeout); ok && err == nil {
		b.timeout, b.ownTimeout = min(d, r.cfg.MaxHoldTimeout), true
	}
	if h.MaxRequests > 0 && elastiv1alpha1.ValidHoldRequests(h.MaxRequests) {
		b.maxHeld = int(h.MaxRequests)
	}
	return b
}

// spec sets s's bounds to b's.
func (b holdBounds) spec(s hold.Spec) hold.Spec {
	s.Timeout, s.MaxHeld = b.timeout, b.maxHeld
	return s
}

// retryAfter is when a client past svc's own bounds, after waited,
// should come back: the rest of the Service's median cold start
// (status.recentColdStarts), or Config.RetryAfter when it records none or
// is past it already.
func (r *Resolver) retryAfter(svc clusterview.ServiceRef, waited time.Duration) time.Duration {
	median, _ := r.bounds.MedianColdStart(svc)
	return answer.RetryAfter(median, waited, r.cfg.RetryAfter)
}

// refuseHeld answers a request admission refused. A Service's own
// maxRequests gets 503 with Retry-After from its cold starts and a body
// that names the bound; every other refusal is answer.Refusal's.
func (r *Resolver) refuseHeld(w http.ResponseWriter, req *http.Request, svc clusterview.ServiceRef, b holdBounds, refused admission.Refusal) {
	if refused.Scope != admission.ScopeService || b.maxHeld == 0 {
		answer.Refusal(w, svc, refused, r.cfg.RetryAfter)
		return
	}
	answer.Bound(w, req, answer.BoundAnswer{Service: svc, Reason: answer.BoundHoldMaxRequests, Limit: b.maxHeld,
		RetryAfter: r.retryAfter(svc, 0)})
}

// timedOut answers a request held until svc's timeout: 503 with
// Retry-After and a body that names the bound when the Service set its
// spec.hold.timeout, 504 otherwise, naming what a wake group waits on if
// it does.
func (r *Resolver) timedOut(w http.ResponseWriter, req *http.Request, svc clusterview.ServiceRef, b holdBounds) {
	var on string
	if r.waiting != nil {
		on = r.waiting.WaitingOn(svc)
	}
	if b.ownTimeout {
		answer.Bound(w, req, answer.BoundAnswer{Service: svc, Reason: answer.BoundHoldTimeout, Timeout: b.timeout,
			WaitingOn: on, RetryAfter: r.retryAfter(svc, b.timeout)})
		return
	}
	answer.TimedOut(w, svc, b.timeout, on)
}
