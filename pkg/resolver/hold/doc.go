// Package hold is the hold layer: a request or connection whose Service
// has no Ready endpoint waits here (Holder.Try), admitted within
// admission's bounds, while one wake loop per Service asks the operator
// to wake it (WakeClient, coalesced, with capped exponential backoff),
// until an endpoint is Ready, the pod view sees the kubelet's Ready, or
// a starting pod passes its own readiness checks (package directprobe).
// It tells the operator how long the released ones waited (HeldReports).
// What the caller answers when a hold ends without a pod is the caller's.
package hold
