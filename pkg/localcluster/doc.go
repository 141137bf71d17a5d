// Package localcluster runs a real Kubernetes control plane on loopback:
// etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok,
// built from the Go module proxy by hack/build-cluster-bins.sh and cached
// outside the repository.
//
// kwok manages one fake node whose pods become Ready with 10.244.x.y IPs.
// Those IPs are not loopback, because the apiserver refuses loopback
// addresses in EndpointSlices. Nothing here connects to them or to Service
// ClusterIPs; only the pod network namespace built by the resolver harness
// makes pod IPs reachable.
package localcluster
