// Package proberules answers a health checker for a Service that sleeps,
// so that the check does not wake it: the probeResponse rules of each
// ElastiService, compiled once per generation within a regexp budget, and
// matched against a request by path, method, headers and query. Matching
// is all it does; the resolver writes the answer.
package proberules
