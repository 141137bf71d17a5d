package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// KindElastiService is the ElastiService's kind, as owner references name it.
const KindElastiService = "ElastiService"

// IsElastiServiceRef reports whether ref names an ElastiService of this API
// version: the owner reference the operator puts on every object it
// generates for one.
func IsElastiServiceRef(ref metav1.OwnerReference) bool {
	return ref.Kind == KindElastiService && ref.APIVersion == SchemeGroupVersion.String()
}
