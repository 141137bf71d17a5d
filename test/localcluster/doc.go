// Package localcluster runs a real Kubernetes control plane on loopback:
// etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok,
// built from the Go module proxy by hack/build-cluster-bins.sh (with
// kube-proxy, CoreDNS and Traefik for package realnet) and cached outside
// the repository.
//
// kwok manages one fake node, tainted as kwok recommends, whose pods become
// Ready with 10.244.x.y IPs. Those IPs are not loopback, because the
// apiserver refuses loopback addresses in EndpointSlices. Nothing in this
// package connects to them or to Service ClusterIPs: only the network
// namespaces that podnet and realnet build make them reachable, inside
// those namespaces.
package localcluster
