// Package realnode holds the end-to-end tests that run elasti as a user
// installs it, as real containers: manifests/' operator and resolver
// Deployments, with their securityContext, probes, limits and read-only
// root, from images built from this tree, on the bed's real kubelet node
// (package localcluster/realnode), whose pods reach Services through the
// bed's kube-proxy and CoreDNS (package localcluster/realnet).
package realnode
