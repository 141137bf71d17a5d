// Package v1alpha1 is the elasti.truefoundry.com/v1alpha1 API: the
// ElastiService resource. Field names and JSON match KubeElasti v0.1.30 so
// existing manifests apply unchanged.
//
// +k8s:deepcopy-gen=package
// +groupName=elasti.truefoundry.com
package v1alpha1
