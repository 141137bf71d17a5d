package triggers

import (
	"errors"
	"fmt"
)

// Reason is a bounded, machine-readable cause, safe as a metric label or a
// condition reason. It never holds a URL, a query or an error string, which
// would give a label an unbounded number of values.
type Reason string

// Reasons an evaluation fails.
const (
	// ReasonInvalidMetadata: a trigger's type or metadata cannot be used.
	ReasonInvalidMetadata Reason = "InvalidMetadata"
	// ReasonUnreachable: no HTTP answer, such as a refused connection or an
	// unknown host.
	ReasonUnreachable Reason = "Unreachable"
	// ReasonTimeout: Prometheus did not answer within the query timeout.
	ReasonTimeout Reason = "Timeout"
	// ReasonCanceled: the caller gave up, usually because the operator is
	// shutting down; not Prometheus's fault.
	ReasonCanceled Reason = "Canceled"
	// ReasonBadStatus: an HTTP status outside 2xx and 3xx.
	ReasonBadStatus Reason = "BadStatus"
	// ReasonRedirected: a 3xx. Redirects are not followed, so that a
	// trigger's server cannot send the operator to another one.
	ReasonRedirected Reason = "Redirected"
	// ReasonServerNotAllowed: the trigger's server is neither the default
	// one nor in --prometheus-allowed-servers; nothing was sent to it.
	ReasonServerNotAllowed Reason = "ServerNotAllowed"
	// ReasonBadResponse: a body that is not a Prometheus API answer, or
	// holds a value that is not a number.
	ReasonBadResponse Reason = "BadResponse"
	// ReasonQueryFailed: Prometheus answered with status "error", typically
	// for a query it cannot parse or run.
	ReasonQueryFailed Reason = "QueryFailed"
	// ReasonEmptyResult: the query matched no series. Treating that as 0
	// would scale a service to zero because its metrics went missing.
	ReasonEmptyResult Reason = "EmptyResult"
	// ReasonMultipleSeries: the query returned several series, so there is
	// no single value to compare with the threshold.
	ReasonMultipleSeries Reason = "MultipleSeries"
	// ReasonNotFinite: the value was NaN or infinite.
	ReasonNotFinite Reason = "NotFinite"
	// ReasonPrometheusDown: Prometheus has not been up for the whole
	// cooldown, so its data may have gaps that read as idleness.
	ReasonPrometheusDown Reason = "PrometheusDown"
	// ReasonUnknown: an error that carries no reason.
	ReasonUnknown Reason = "Unknown"
)

// Reasons a successful evaluation gives.
const (
	// ReasonIdle: every trigger is below its threshold.
	ReasonIdle Reason = "Idle"
	// ReasonAboveThreshold: at least one trigger is at or above its
	// threshold.
	ReasonAboveThreshold Reason = "AboveThreshold"
	// ReasonNoTriggers: there is nothing that says the service is idle.
	ReasonNoTriggers Reason = "NoTriggers"
)

// Error is a failure with its Reason. Callers usually wrap it with context;
// ReasonOf still finds it.
type Error struct {
	Reason Reason
	Err    error
}

func (e *Error) Error() string {
	if e.Err == nil {
		return string(e.Reason)
	}
	return e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// ReasonOf returns the Reason carried by err or anything it wraps: "" for a
// nil error and ReasonUnknown for an error without one.
func ReasonOf(err error) Reason {
	if err == nil {
		return ""
	}
	if e, ok := errors.AsType[*Error](err); ok && e.Reason != "" {
		return e.Reason
	}
	return ReasonUnknown
}

func errorf(reason Reason, format string, args ...any) error {
	return &Error{Reason: reason, Err: fmt.Errorf(format, args...)}
}
