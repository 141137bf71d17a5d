// Package chart holds the tests of charts/elasti, elasti's Helm chart: the
// chart rendered with its default values is manifests/, each option is the
// deploy/ overlay that expresses it, a KubeElasti v0.1.30 values file
// renders unchanged, and values elasti cannot honour are refused with a
// message. The tests run the pinned helm that hack/build-cluster-bins.sh
// builds, and kubectl's kustomize for the overlays.
package chart
