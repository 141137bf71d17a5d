package v1alpha1

import "k8s.io/apimachinery/pkg/types"

// Key is the one key an ElastiService goes by: in the controller's queues,
// the directory, the idle poller and the resolver.
func (es *ElastiService) Key() types.NamespacedName {
	return types.NamespacedName{Namespace: es.Namespace, Name: es.Name}
}
