// Package answer is what the resolver answers itself, rather than a pod:
// the plain-text refusals and failures (400, 404, 429, 502, 503, 504
// are written with Error), a probe rule's canned answer, and the waiting
// page a browser gets while its Service wakes. It decides nothing: the
// layers above say when to answer, this package says how, and counts the
// answers it writes (Metrics).
package answer
