// Package kubectl runs the kubectl plugin, bin/kubectl-elasti built from
// cmd/kubectl-elasti, as a user runs it: a process with a kubeconfig,
// against the local control plane's apiserver and an operator watching the
// test's namespace. It checks status, wake and sleep (both make-before-
// break, under a dark-Service watcher), explain, and the errors and exit
// codes of a missing object and of a ServiceAccount without permission,
// kubectl's printers and --as, completion, and status --watch.
package kubectl
