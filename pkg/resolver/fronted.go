package resolver

import (
	"fmt"
	"slices"

	"k8s.io/client-go/tools/cache"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	elastiinformers "github.com/elasti-dev/elasti/pkg/generated/informers/externalversions/elasti/v1alpha1"
)

// frontedIndex indexes ElastiServices by "<namespace>/<service>" for
// spec.service and every Service status.resolverPorts names.
const frontedIndex = "github.com/elasti-dev/elasti/pkg/resolver:service"

// FrontedIndex tells whether a Service is under an ElastiService: named by
// its spec.service, or still given resolver ports in its status, which is
// how the operator keeps the old Service of a move of spec.service fronted
// until the move completes. A request for any other Service is answered
// 404 at once: it must neither wake anything nor take a hold slot for the
// request timeout.
type FrontedIndex struct {
	indexer cache.Indexer
	synced  cache.InformerSynced
}

// NewFrontedIndex adds its index to the ElastiService informer. Call it
// before the informer factory is started.
func NewFrontedIndex(informer elastiinformers.ElastiServiceInformer) (*FrontedIndex, error) {
	inf := informer.Informer()
	if _, exists := inf.GetIndexer().GetIndexers()[frontedIndex]; !exists {
		if err := inf.AddIndexers(cache.Indexers{frontedIndex: indexByFrontedService}); err != nil {
			return nil, fmt.Errorf("adding ElastiService index: %w", err)
		}
	}
	return &FrontedIndex{indexer: inf.GetIndexer(), synced: inf.HasSynced}, nil
}

func indexByFrontedService(obj any) ([]string, error) {
	es, ok := obj.(*elastiv1alpha1.ElastiService)
	if !ok {
		return nil, nil
	}
	fronted := frontedServices(es)
	keys := make([]string, 0, len(fronted))
	for _, svc := range fronted {
		keys = append(keys, svc.String())
	}
	return keys, nil
}

// frontedServices lists the Services es fronts: spec.service, then each
// other Service status.resolverPorts names (the old ones of a move), once.
func frontedServices(es *elastiv1alpha1.ElastiService) []ServiceRef {
	var out []ServiceRef
	add := func(name string) {
		if svc := (ServiceRef{es.Namespace, name}); name != "" && !slices.Contains(out, svc) {
			out = append(out, svc)
		}
	}
	add(es.Spec.Service)
	for _, p := range es.Status.ResolverPorts {
		add(p.Service)
	}
	return out
}

// Fronted reports whether an ElastiService fronts svc.
func (f *FrontedIndex) Fronted(svc ServiceRef) bool {
	objs, err := f.indexer.ByIndex(frontedIndex, svc.Namespace+"/"+svc.Name)
	return err == nil && len(objs) > 0
}

// HasSynced reports whether the ElastiService informer has synced.
func (f *FrontedIndex) HasSynced() bool { return f.synced() }
