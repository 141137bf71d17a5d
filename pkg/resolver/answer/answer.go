package answer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	"github.com/elasti-dev/elasti/pkg/resolver/admission"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
	"github.com/elasti-dev/elasti/pkg/resolver/proberules"
)

// Every answer the resolver writes itself but the waiting page and a
// probe rule's is plain text prefixed by the component.

// Error answers with a plain-text message prefixed by the component.
func Error(w http.ResponseWriter, code int, msg string) {
	http.Error(w, "elasti-resolver: "+msg, code)
}

// Refusal answers a request admission refused: 429 for a client out of
// wakes or over its share of the queue, 503 for a full queue or budget,
// all with Retry-After: the refusal's own for a client out of wakes,
// retryAfter (the resolver's Config.RetryAfter) for the others.
func Refusal(w http.ResponseWriter, svc clusterview.ServiceRef, refused admission.Refusal, retryAfter time.Duration) {
	if refused.Scope == admission.ScopeSource {
		w.Header().Set("Retry-After", RetryAfterSeconds(refused.RetryAfter))
		Error(w, http.StatusTooManyRequests, fmt.Sprintf("this client has woken too many services lately; service %s is asleep, retry later", svc))
		return
	}
	w.Header().Set("Retry-After", RetryAfterSeconds(retryAfter))
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
	Error(w, code, msg)
}

// TimedOut answers a request held for svc until the resolver's
// --request-timeout, timeout, with 504, naming what a wake group waits
// on when waitingOn says.
func TimedOut(w http.ResponseWriter, svc clusterview.ServiceRef, timeout time.Duration, waitingOn string) {
	msg := fmt.Sprintf("timed out after %v waiting for service %s to have a ready pod", timeout, svc)
	if waitingOn != "" {
		msg += "; " + waitingOn
	}
	Error(w, http.StatusGatewayTimeout, msg)
}

// BoundAnswer is what a client past one of a Service's own hold bounds
// (its spec.hold) is told.
type BoundAnswer struct {
	Service clusterview.ServiceRef
	// Reason names the bound: BoundHoldTimeout or BoundHoldMaxRequests.
	Reason string
	// Timeout is the hold's timeout, for HoldTimeout; Limit the held
	// requests' bound, for HoldMaxRequests.
	Timeout time.Duration
	Limit   int
	// WaitingOn is what a wake group waits on, when it does.
	WaitingOn string
	// RetryAfter is when to come back: the rest of the Service's usual
	// cold start.
	RetryAfter time.Duration
}

// The reasons of a BoundAnswer, in its JSON body.
const (
	BoundHoldTimeout     = "HoldTimeout"
	BoundHoldMaxRequests = "HoldMaxRequests"
)

// boundBody is a BoundAnswer as JSON, for a client that accepts it.
type boundBody struct {
	Service           string `json:"service"`
	Reason            string `json:"reason"`
	Message           string `json:"message"`
	RetryAfterSeconds int    `json:"retryAfterSeconds"`
}

// Bound answers a request past one of its Service's own hold bounds: 503
// with Retry-After, and a body that says which bound, as JSON when the
// client accepts application/json and as plain text otherwise.
func Bound(w http.ResponseWriter, req *http.Request, a BoundAnswer) {
	msg := fmt.Sprintf("service %s is still starting after the %v it allows a request to wait (spec.hold.timeout); retry later", a.Service, a.Timeout)
	if a.Reason == BoundHoldMaxRequests {
		msg = fmt.Sprintf("service %s already holds the %d requests it allows to wait while it starts (spec.hold.maxRequests); retry later", a.Service, a.Limit)
	}
	if a.WaitingOn != "" {
		msg += "; " + a.WaitingOn
	}
	retry := RetryAfterSeconds(a.RetryAfter)
	w.Header().Set("Retry-After", retry)
	if !AcceptsJSON(req) {
		Error(w, http.StatusServiceUnavailable, msg)
		return
	}
	seconds, _ := strconv.Atoi(retry)
	body, _ := json.Marshal(boundBody{Service: a.Service.String(), Reason: a.Reason, Message: msg, RetryAfterSeconds: seconds})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write(append(body, '\n'))
}

// AcceptsJSON reports whether req's Accept names application/json (or
// any +json type), in any case, with or without parameters.
func AcceptsJSON(req *http.Request) bool {
	for _, v := range req.Header.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			mt, _, _ := strings.Cut(part, ";")
			mt = strings.ToLower(strings.TrimSpace(mt))
			if mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")) {
				return true
			}
		}
	}
	return false
}

// LookupFailed answers a failed EndpointSource lookup: 404 for a Service
// that does not exist, 503 for one whose endpoints Kubernetes does not
// keep, 502 otherwise.
func LookupFailed(w http.ResponseWriter, logger klog.Logger, svc clusterview.ServiceRef, err error) {
	if errors.Is(err, clusterview.ErrServiceNotFound) {
		logger.V(4).Info("Unknown service")
		Error(w, http.StatusNotFound, fmt.Sprintf("service %s not found", svc))
		return
	}
	if errors.Is(err, clusterview.ErrServiceNotSelectable) {
		// Not the resolver's fault, and a client can ask at will: no
		// error log, and no wake, which could not make it forwardable.
		logger.V(2).Info("Refusing request for a Service whose endpoints Kubernetes does not keep", "err", err)
		Error(w, http.StatusServiceUnavailable, fmt.Sprintf("service %s has no selector or is of type ExternalName; the resolver forwards only to the pods a selector matches", svc))
		return
	}
	logger.Error(err, "Looking up endpoints failed")
	Error(w, http.StatusBadGateway, fmt.Sprintf("cannot resolve service %s", svc))
}

// ShutdownRetryAfter is the Retry-After of the 503 a held request gets
// when its resolver shuts down.
const ShutdownRetryAfter = time.Second

// RetryAfterSeconds is d as a Retry-After value: whole seconds, rounded
// up, at least 1.
func RetryAfterSeconds(d time.Duration) string {
	return strconv.Itoa(max(1, int((d+time.Second-1)/time.Second)))
}

// Probes answers a health checker's request from a probe rule, counting
// the answers.
type Probes struct {
	rules    proberules.Matcher
	answered prometheus.Counter
}

// NewProbes returns the answers of rules, counted in m; nil rules answer
// nothing.
func NewProbes(rules proberules.Matcher, m Metrics) Probes {
	return Probes{rules: rules, answered: m.ProbeResponses}
}

// Answer answers req from a probe rule of svc, which has no Ready
// endpoint, so that a health checker does not wake the target; once the
// target serves, it answers itself. It reports whether it answered.
func (p Probes) Answer(w http.ResponseWriter, req *http.Request, logger klog.Logger, svc clusterview.ServiceRef) bool {
	if p.rules == nil {
		return false
	}
	a, ok := p.rules.MatchProbe(svc, req)
	if !ok {
		return false
	}
	logger.V(4).Info("Answering probe", "method", req.Method, "path", req.URL.Path, "status", a.Status)
	p.answered.Inc()
	w.WriteHeader(a.Status)
	_, _ = io.WriteString(w, a.Body)
	return true
}
