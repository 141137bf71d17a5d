package v1alpha1

import (
	"fmt"
	"time"
)

// Hold is spec.hold: how long the resolver may hold a request for this
// Service while it wakes, and how many it may hold at once. An app that
// loads a model for minutes needs more than the resolver-wide defaults
// (--request-timeout, --per-service-queue); a Service whose clients
// should hear early that it sleeps needs less. Past either bound the
// client gets 503 with Retry-After and a body that says which bound it
// met. Each field omitted takes the resolver's flag; the resolver caps
// both with its own bounds: a timeout at its --max-hold-timeout, and the
// requests at its --global-queue and the namespace's share of it.
// KubeElasti has no such field; omitted, nothing changes.
type Hold struct {
	// Timeout, a Go duration such as 10m, of more than 0 and at most
	// MaxHoldTimeout, is how long one request may be held.
	Timeout string `json:"timeout,omitempty"`
	// MaxRequests, 1 to MaxHoldRequests, is how many requests may be
	// held for this Service at once, by each resolver replica.
	MaxRequests int32 `json:"maxRequests,omitempty"`
}

// MaxHoldTimeout bounds spec.hold.timeout: model servers load in 2 to 8
// minutes, a GPU node may take as long again to join, and a client that
// waits longer than an hour is better told to come back.
const MaxHoldTimeout = time.Hour

// MaxHoldTimeoutLength bounds spec.hold.timeout's text; the CRD schema's
// maxLength repeats it.
const MaxHoldTimeoutLength = 32

// MaxHoldRequests bounds spec.hold.maxRequests; the CRD schema's maximum
// repeats it. The resolver's global and per-namespace bounds cap it
// further.
const MaxHoldRequests = 100000

// ParseHoldTimeout reads spec.hold.timeout: ok is false when it is
// omitted; an error when it is no duration above 0 and at most
// MaxHoldTimeout.
func ParseHoldTimeout(s string) (d time.Duration, ok bool, err error) {
	return parseSpecDuration(s, MaxHoldTimeoutLength, "90s or 10m",
		func(d time.Duration) bool { return d > 0 && d <= MaxHoldTimeout },
		fmt.Sprintf("must be above 0s and at most %v", MaxHoldTimeout))
}

// ValidHoldRequests reports whether n is a spec.hold.maxRequests the
// resolver takes: 0 (omitted) or 1 to MaxHoldRequests.
func ValidHoldRequests(n int32) bool {
	return n >= 0 && n <= MaxHoldRequests
}
