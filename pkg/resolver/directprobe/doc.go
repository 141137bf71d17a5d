// Package directprobe is the readiness layer: while a request is held
// for a Service, it runs a starting pod's own readiness probes the way the
// kubelet runs them (package podcheck), so the hold is released as soon as
// the app answers, not a periodSeconds later when the kubelet checks
// again. It probes only pods a hold waits on, within bounds per Service,
// per namespace and in all, and reads each pod once (its plan), paced per
// namespace.
package directprobe
