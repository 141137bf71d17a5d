// Package helm tests elasti installed, upgraded and uninstalled with Helm
// from charts/elasti, pushed to a loopback OCI registry as make release
// pushes it, on the real traffic path of test/localcluster/realnet:
// the operator and the resolver run as the chart's pods on the process
// node, clients call Services through CoreDNS and kube-proxy, and a
// dark-Service watcher fails the test on any moment a Service has no
// ready endpoint.
package helm
