package resolver

import (
	"fmt"

	"k8s.io/client-go/tools/cache"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	elastiinformers "github.com/elasti-dev/elasti/pkg/generated/informers/externalversions/elasti/v1alpha1"
)

// frontedIndex indexes ElastiServices by "<namespace>/<spec.service>".
const frontedIndex = "github.com/elasti-dev/elasti/pkg/resolver:service"

// FrontedIndex tells whether a Service is under an ElastiService. A
// request for any other Service is answered 404 at once: it must neither
// wake anything nor take a hold slot for the request timeout.
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
	if !ok || es.Spec.Service == "" {
		return nil, nil
	}
	return []string{es.Namespace + "/" + es.Spec.Service}, nil
}

// Fronted reports whether an ElastiService names svc.
func (f *FrontedIndex) Fronted(svc ServiceRef) bool {
	objs, err := f.indexer.ByIndex(frontedIndex, svc.Namespace+"/"+svc.Name)
	return err == nil && len(objs) > 0
}

// HasSynced reports whether the ElastiService informer has synced.
func (f *FrontedIndex) HasSynced() bool { return f.synced() }
