// Package e2e holds the end-to-end tests: the local control plane, the
// operator and the resolver running together, and backends that really
// answer on pod IPs inside a network namespace the test run builds
// (pkg/localcluster/podnet). Test clients only ever talk to loopback; only
// the resolver dials pod IPs, and those live inside that namespace.
package e2e
