// Package apiserver holds end-to-end tests that restart the kube-apiserver
// while the operator, run as a process, switches a fleet of Services. A
// restart disturbs every client of the control plane, so the package runs
// a cluster of its own (clustertest.MainPrivate), never a shared one, and
// its tests do not run in parallel.
package apiserver
