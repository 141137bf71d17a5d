package resolver

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"k8s.io/klog/v2"

	"github.com/elasti-dev/elasti/pkg/resolver/admission"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
)

// What the resolver answers itself, rather than a pod: every such answer
// is plain text prefixed by the component.

// httpError answers with a plain-text message prefixed by the component.
func httpError(w http.ResponseWriter, code int, msg string) {
	http.Error(w, "elasti-resolver: "+msg, code)
}

// writeRefusal answers a request admission refused: 429 for a client out
// of wakes or over its share of the queue, 503 for a full queue or
// budget, all with Retry-After.
func (r *Resolver) writeRefusal(w http.ResponseWriter, svc clusterview.ServiceRef, refused admission.Refusal) {
	if refused.Scope == admission.ScopeSource {
		w.Header().Set("Retry-After", retryAfterSeconds(refused.RetryAfter))
		httpError(w, http.StatusTooManyRequests, fmt.Sprintf("this client has woken too many services lately; service %s is asleep, retry later", svc))
		return
	}
	w.Header().Set("Retry-After", retryAfterSeconds(r.cfg.RetryAfter))
	code, msg := http.StatusServiceUnavailable, fmt.Sprintf("too many requests are waiting for service %s to start; retry later", svc)
	switch refused.Scope {
	case admission.ScopeGlobal, admission.ScopeBytes:
		msg = "too many requests are waiting for services to start; retry later"
	case admission.ScopeRequests:
		msg = "too many requests are in flight; retry later"
	case admission.ScopeNamespace:
		msg = fmt.Sprintf("too many requests are in flight for services of namespace %s; retry later", svc.Namespace)
	case admission.ScopeClient:
		code, msg = http.StatusTooManyRequests, fmt.Sprintf("this client has too many requests waiting for services to start; service %s is asleep, retry later", svc)
	}
	httpError(w, code, msg)
}

// lookupFailed answers a failed EndpointSource lookup: 404 for a Service
// that does not exist, 502 otherwise.
func (r *Resolver) lookupFailed(w http.ResponseWriter, logger klog.Logger, svc clusterview.ServiceRef, err error) {
	if errors.Is(err, clusterview.ErrServiceNotFound) {
		logger.V(4).Info("Unknown service")
		httpError(w, http.StatusNotFound, fmt.Sprintf("service %s not found", svc))
		return
	}
	if errors.Is(err, clusterview.ErrServiceNotSelectable) {
		// Not the resolver's fault, and a client can ask at will: no
		// error log, and no wake, which could not make it forwardable.
		logger.V(2).Info("Refusing request for a Service whose endpoints Kubernetes does not keep", "err", err)
		httpError(w, http.StatusServiceUnavailable, fmt.Sprintf("service %s has no selector or is of type ExternalName; the resolver forwards only to the pods a selector matches", svc))
		return
	}
	logger.Error(err, "Looking up endpoints failed")
	httpError(w, http.StatusBadGateway, fmt.Sprintf("cannot resolve service %s", svc))
}

// shutdownRetryAfter is the Retry-After of the 503 a held request gets
// when its resolver shuts down.
const shutdownRetryAfter = time.Second

// retryAfterSeconds is d as a Retry-After value: whole seconds, rounded
// up, at least 1.
func retryAfterSeconds(d time.Duration) string {
	return strconv.Itoa(max(1, int((d+time.Second-1)/time.Second)))
}

// answerProbe answers req from a probe rule of svc, which has no Ready
// endpoint, so that a health checker does not wake the target; once the
// target serves, it answers itself. It reports whether it answered.
func (r *Resolver) answerProbe(w http.ResponseWriter, req *http.Request, logger klog.Logger, svc clusterview.ServiceRef) bool {
	if r.probes == nil {
		return false
	}
	a, ok := r.probes.MatchProbe(svc, req)
	if !ok {
		return false
	}
	logger.V(4).Info("Answering probe", "method", req.Method, "path", req.URL.Path, "status", a.Status)
	r.metrics.ProbeResponses.Inc()
	w.WriteHeader(a.Status)
	_, _ = io.WriteString(w, a.Body)
	return true
}
