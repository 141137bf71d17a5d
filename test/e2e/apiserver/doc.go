// Package apiserver holds end-to-end tests that restart the kube-apiserver
// while the operator, run as a process, switches a fleet of Services. A
// restart disturbs every client of the control plane, so the package runs
// a cluster of its own (clustertest.MainPrivate), never a shared one, and
// its tests do not run in parallel.
//
// After a restart kube-controller-manager stays behind for up to minutes
// (its watches and per-object retries back off), so a test that needs a
// cluster that keeps up with new pods must run before any that restarts
// it: Go runs them in source order, and -count=N repeats the package's
// tests in that order on the same cluster, where the second round starts
// on a cluster that may still be catching up.
package apiserver
