// Package traffic tests elasti on the paths real clients take: a client
// pod calls a Service by its DNS name (full or short) or ClusterIP through
// a real kube-proxy, or through an ingress controller that reads
// EndpointSlices. The operator and the resolver run as the pods of
// manifests/, on the local cluster's process node, so the manifests are
// under test too. The test bed is test/localcluster/realnet.
package traffic
