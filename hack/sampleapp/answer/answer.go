// Package answer is the sample app's JSON answer (hack/sampleapp), shared by
// the app, which writes it, and the demo and the cold-start gate, which
// read it: the pod that served, the app's settings, and instants in Unix
// microseconds on the app's own clock.
package answer

import (
	"strings"
	"time"
)

// Reply is what the sample app answers on every path but its readiness
// path and /metrics.
type Reply struct {
	ServedBy string `json:"servedBy"`
	Host     string `json:"host"`
	Path     string `json:"path"`
	// ListenDelay and NotReadyFor are the app's settings.
	ListenDelay string `json:"listenDelay"`
	NotReadyFor string `json:"notReadyFor"`
	Started     int64  `json:"started"`
	Listening   int64  `json:"listening"`
	FirstReady  int64  `json:"firstReady"`
	// FirstReadyBy is whose check got the first readiness 200 (CheckerOf).
	FirstReadyBy string `json:"firstReadyBy"`
	Arrived      int64  `json:"arrived"`
	// Early counts the requests that reached the app before its readiness
	// path first answered 200.
	Early int64 `json:"earlyRequests"`
}

// Whose readiness check it was, by its User-Agent: the kubelet sends
// kube-probe/<major>.<minor>, the resolver's direct probe kube-probe/elasti.
const (
	CheckedByKubelet  = "kubelet"
	CheckedByResolver = "resolver"
	CheckedByOther    = "other"
)

// CheckerOf says whose readiness check a User-Agent is.
func CheckerOf(userAgent string) string {
	switch {
	case userAgent == "kube-probe/elasti":
		return CheckedByResolver
	case strings.HasPrefix(userAgent, "kube-probe/"):
		return CheckedByKubelet
	default:
		return CheckedByOther
	}
}

// span is the time between two of the app's instants.
func span(from, to int64) time.Duration { return time.Duration(to-from) * time.Microsecond }

// ListenedAfter is how long after its process started the app listened.
func (r Reply) ListenedAfter() time.Duration { return span(r.Started, r.Listening) }

// ReadyAfterStart is how long after its process started the readiness
// path first answered 200.
func (r Reply) ReadyAfterStart() time.Duration { return span(r.Started, r.FirstReady) }

// ReadyAfterListening is how long after it listened the readiness path
// first answered 200.
func (r Reply) ReadyAfterListening() time.Duration { return span(r.Listening, r.FirstReady) }

// BeyondReady is how long after the readiness path first answered 200
// this request arrived: what a cold start added beyond the app's own
// readiness.
func (r Reply) BeyondReady() time.Duration { return span(r.FirstReady, r.Arrived) }
