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
	var keys []string
	add := func(svc string) {
		if k := es.Namespace + "/" + svc; svc != "" && !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	add(es.Spec.Service)
	for _, p := range es.Status.ResolverPorts {
		add(p.Service)
	}
	return keys, nil
}

// Fronted reports whether an ElastiService fronts svc.
func (f *FrontedIndex) Fronted(svc ServiceRef) bool {
	objs, err := f.indexer.ByIndex(frontedIndex, svc.Namespace+"/"+svc.Name)
	return err == nil && len(objs) > 0
}

// HasSynced reports whether the ElastiService informer has synced.
func (f *FrontedIndex) HasSynced() bool { return f.synced() }
