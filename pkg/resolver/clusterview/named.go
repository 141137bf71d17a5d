package clusterview

import (
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	elastiinformers "github.com/elasti-dev/elasti/pkg/generated/informers/externalversions/elasti/v1alpha1"
)

// namedIndex indexes ElastiServices by "<namespace>/<service>" for
// spec.service and every Service status.resolverPorts names.
const namedIndex = "github.com/elasti-dev/elasti/pkg/resolver:service"

// NamedIndex tells whether an ElastiService names a Service: by its
// spec.service, or by resolver ports still kept in its status, which is
// how the operator keeps the old Service of a move of spec.service under
// the resolver until the move completes. A request for a Service no
// ElastiService names is answered 404 at once; one for a named Service
// that the resolver is not in front of (see [FrontSource]) waits a moment
// for the resolver slice the operator may have just written.
type NamedIndex struct {
	indexer cache.Indexer
	synced  cache.InformerSynced
}

// NewNamedIndex adds its index to the ElastiService informer. Call it
// before the informer factory is started.
func NewNamedIndex(informer elastiinformers.ElastiServiceInformer) (*NamedIndex, error) {
	inf := informer.Informer()
	if _, exists := inf.GetIndexer().GetIndexers()[namedIndex]; !exists {
		if err := inf.AddIndexers(cache.Indexers{namedIndex: indexByNamedService}); err != nil {
			return nil, fmt.Errorf("adding ElastiService index: %w", err)
		}
	}
	return &NamedIndex{indexer: inf.GetIndexer(), synced: inf.HasSynced}, nil
}

// NewMemoryNamedIndex returns a NamedIndex over a store the caller fills
// with ElastiServices, without an informer: for tests, and for callers
// that have no apiserver.
func NewMemoryNamedIndex() (*NamedIndex, cache.Indexer) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{namedIndex: indexByNamedService})
	return &NamedIndex{indexer: idx}, idx
}

func indexByNamedService(obj any) ([]string, error) {
	es, ok := obj.(*elastiv1alpha1.ElastiService)
	if !ok {
		return nil, nil
	}
	named := NamedServices(es)
	keys := make([]string, 0, len(named))
	for _, svc := range named {
		keys = append(keys, svc.String())
	}
	return keys, nil
}

// NamedServices lists the Services es names: spec.service, then each
// other Service status.resolverPorts names (the old ones of a move), once.
func NamedServices(es *elastiv1alpha1.ElastiService) []ServiceRef {
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

// Controls implements SliceControllers: ref is the cached ElastiService
// of svc's namespace with ref's name and UID, and it is served: an
// ElastiService of a namespace outside Config.WatchNamespaces, or past
// its namespace's budget, is cached without its spec (SpecBudget).
//
// The ElastiService need not name svc now: a move of spec.service keeps
// the old Service's resolver slice, under the same ElastiService, until
// a pod serves it (pkg/controller/move.go), and the resolver must front
// the old Service till then. A slice fronts only a Service of its own
// namespace, so whoever writes one can aim only at that namespace's
// Services.
func (f *NamedIndex) Controls(ref metav1.OwnerReference, svc ServiceRef) bool {
	if !elastiv1alpha1.IsElastiServiceRef(ref) {
		return false
	}
	obj, ok, err := f.indexer.GetByKey(svc.Namespace + "/" + ref.Name)
	if err != nil || !ok {
		return false
	}
	es, isES := obj.(*elastiv1alpha1.ElastiService)
	return isES && es.UID == ref.UID && es.Spec.Service != ""
}

// Named reports whether an ElastiService names svc.
func (f *NamedIndex) Named(svc ServiceRef) bool {
	objs, err := f.indexer.ByIndex(namedIndex, svc.Namespace+"/"+svc.Name)
	return err == nil && len(objs) > 0
}

// WaitingOn says what a wake of svc waits on, when the ElastiService whose
// spec.service it is has a group (spec.wakeWith) and a dependency not
// Ready: its DependenciesReady condition's message, as the operator wrote
// it. Empty otherwise.
func (f *NamedIndex) WaitingOn(svc ServiceRef) string {
	for _, es := range f.naming(svc) {
		if c := waitingConditions(es.Status.Conditions); c != nil {
			return fmt.Sprintf("ElastiService %s/%s: %s", es.Namespace, es.Name, c[0].Message)
		}
	}
	return ""
}

// WaitingPage returns the spec.waitingPage of the ElastiService whose
// spec.service svc is, nil when it has none (see PageSwitch).
func (f *NamedIndex) WaitingPage(svc ServiceRef) *elastiv1alpha1.WaitingPage {
	if es := f.naming(svc); len(es) > 0 {
		return es[0].Spec.WaitingPage
	}
	return nil
}

// Hold returns the spec.hold of the ElastiService whose spec.service svc
// is, nil when it has none.
func (f *NamedIndex) Hold(svc ServiceRef) *elastiv1alpha1.Hold {
	if es := f.naming(svc); len(es) > 0 {
		return es[0].Spec.Hold
	}
	return nil
}

// MedianColdStart returns the median cold start that ElastiService
// records (status.recentColdStarts); false when it has none or records
// none.
func (f *NamedIndex) MedianColdStart(svc ServiceRef) (time.Duration, bool) {
	if es := f.naming(svc); len(es) > 0 {
		return es[0].Status.MedianColdStart()
	}
	return 0, false
}

// naming returns the cached ElastiServices whose spec.service is svc.
func (f *NamedIndex) naming(svc ServiceRef) []*elastiv1alpha1.ElastiService {
	objs, err := f.indexer.ByIndex(namedIndex, svc.Namespace+"/"+svc.Name)
	if err != nil {
		return nil
	}
	var out []*elastiv1alpha1.ElastiService
	for _, obj := range objs {
		if es, ok := obj.(*elastiv1alpha1.ElastiService); ok && es.Spec.Service == svc.Name {
			out = append(out, es)
		}
	}
	return out
}

// HasSynced reports whether the ElastiService informer has synced.
func (f *NamedIndex) HasSynced() bool { return f.synced() }
