// Package e2e holds the end-to-end tests that need the resolver in-process:
// the local control plane, the operator and a resolver running together,
// with backends that really answer on pod IPs inside a network namespace
// the test run builds (test/localcluster/podnet). They test the resolver's
// own choices with real informers and pod IPs, leader election and
// shutdown of operator processes (ha_test.go), and the benchmarks that
// make bench runs. Test clients only ever talk to loopback; only the
// resolver dials pod IPs, and those live inside that namespace. Tests of
// the paths real clients take (DNS, ClusterIP, ingress) with elasti from
// manifests/ are in test/e2e/traffic.
package e2e
