package realnode

import "time"

// SampleReply is the sample app's JSON answer (hack/sampleapp) as its
// clients read it: the pod that served, the app's listen delay, and
// instants in Unix microseconds on the app's own clock.
type SampleReply struct {
	ServedBy    string `json:"servedBy"`
	ListenDelay string `json:"listenDelay"`
	Started     int64  `json:"started"`
	Listening   int64  `json:"listening"`
	FirstReady  int64  `json:"firstReady"`
	Arrived     int64  `json:"arrived"`
	// Early counts the requests that reached the app before its readiness
	// path first answered 200.
	Early int64 `json:"earlyRequests"`
}

// span is the time between two of the app's instants.
func span(from, to int64) time.Duration { return time.Duration(to-from) * time.Microsecond }

// ListenedAfter is how long after its process started the app listened.
func (r SampleReply) ListenedAfter() time.Duration { return span(r.Started, r.Listening) }

// ReadyAfterStart is how long after its process started the readiness
// path first answered 200.
func (r SampleReply) ReadyAfterStart() time.Duration { return span(r.Started, r.FirstReady) }

// ReadyAfterListening is how long after it listened the readiness path
// first answered 200.
func (r SampleReply) ReadyAfterListening() time.Duration { return span(r.Listening, r.FirstReady) }

// BeyondReady is how long after the readiness path first answered 200
// this request arrived: what a cold start added beyond the app's own
// readiness.
func (r SampleReply) BeyondReady() time.Duration { return span(r.FirstReady, r.Arrived) }
