package controller

import (
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/group"
	"github.com/elasti-dev/elasti/pkg/scaletarget"
)

func indexElastiServiceByService(obj any) ([]string, error) {
	es, ok := obj.(*elastiv1alpha1.ElastiService)
	if !ok || es.Spec.Service == "" {
		return nil, nil
	}
	return []string{es.Namespace + "/" + es.Spec.Service}, nil
}

func indexElastiServiceByTarget(obj any) ([]string, error) {
	es, ok := obj.(*elastiv1alpha1.ElastiService)
	if !ok {
		return nil, nil
	}
	return []string{targetIndexKey(scaletarget.RefFor(es))}, nil
}

// indexElastiServiceByDependency finds the ElastiServices whose
// spec.wakeWith names a workload, keyed as the target index is.
func indexElastiServiceByDependency(obj any) ([]string, error) {
	es, ok := obj.(*elastiv1alpha1.ElastiService)
	if !ok || len(es.Spec.WakeWith) == 0 {
		return nil, nil
	}
	keys := make([]string, 0, len(es.Spec.WakeWith))
	for _, d := range es.Spec.WakeWith {
		keys = append(keys, targetIndexKey(group.RefOf(es.Namespace, d)))
	}
	return keys, nil
}

func targetIndexKey(r scaletarget.Ref) string { return r.Namespace + "/" + r.Kind + "/" + r.Name }

func indexSliceByService(obj any) ([]string, error) {
	slice, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return nil, nil
	}
	if svc := slice.Labels[discoveryv1.LabelServiceName]; svc != "" {
		return []string{slice.Namespace + "/" + svc}, nil
	}
	return nil, nil
}

// indexByOwnerElastiService finds generated objects by their owner, so
// objects left behind by an earlier spec.service can be cleaned up.
func indexByOwnerElastiService(obj any) ([]string, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, nil
	}
	var keys []string
	for _, key := range ownerElastiServices(m) {
		keys = append(keys, key.Namespace+"/"+key.Name)
	}
	return keys, nil
}
