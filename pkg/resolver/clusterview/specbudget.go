package clusterview

import (
	"fmt"

	"k8s.io/client-go/tools/cache"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	elastiinformers "github.com/elasti-dev/elasti/pkg/generated/informers/externalversions/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/nsbudget"
	"github.com/elasti-dev/elasti/pkg/scaletarget"
	"github.com/elasti-dev/elasti/pkg/tombstone"
)

// SpecBudget keeps the resolver's ElastiService cache within each
// namespace's budget (pkg/nsbudget, Config.NamespaceBudget), the same
// budget the operator applies: every ElastiService is weighed as the
// apiserver sent it, and one past its namespace's budget is cached as its
// identity alone. It names no Service and holds no port, so no index
// serves it, and the operator, deciding alike, never fronts it.
//
// What is cached is decided when an object arrives. One let back in by a
// deletion in its namespace is cached whole again on its next event,
// which the operator's status write, clearing NamespaceBudgetExceeded,
// brings; one pushed out after it was cached whole (an older one grew, or
// arrived later in the first list) is cut down on the event of the
// operator's status write that sets the condition.
//
// An ElastiService of a namespace outside Config.WatchNamespaces is cut
// down the same way, and is not weighed: the resolver serves no Service
// of that namespace, whatever slices point at it.
type SpecBudget struct {
	tracker *nsbudget.Tracker
	// served are the namespaces served; nil serves every namespace.
	served map[string]bool
}

// NewSpecBudget returns the budget for limits, serving namespaces (all
// when empty). Its Transform goes to the ElastiService informer factory;
// Watch to the informer it makes.
func NewSpecBudget(limits nsbudget.Limits, namespaces []string) *SpecBudget {
	b := &SpecBudget{tracker: nsbudget.NewTracker(limits)}
	if len(namespaces) > 0 {
		b.served = map[string]bool{}
		for _, ns := range namespaces {
			b.served[ns] = true
		}
	}
	return b
}

// Transform is TrimForCache, with the budget and the namespace list.
func (b *SpecBudget) Transform(obj any) (any, error) {
	es, ok := obj.(*elastiv1alpha1.ElastiService)
	if !ok {
		return TrimForCache(obj)
	}
	if b.served == nil || b.served[es.Namespace] {
		b.tracker.Observe(es)
		if b.tracker.Admitted(es.Key()) {
			return TrimForCache(es)
		}
	}
	meta := scaletarget.Identity(es.ObjectMeta)
	meta.CreationTimestamp = es.CreationTimestamp
	return &elastiv1alpha1.ElastiService{TypeMeta: es.TypeMeta, ObjectMeta: meta}, nil
}

// Watch forgets each ElastiService the informer deletes. Call it before
// the informer factory is started.
func (b *SpecBudget) Watch(informer elastiinformers.ElastiServiceInformer) error {
	_, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if es, ok := tombstone.Object[*elastiv1alpha1.ElastiService](obj); ok {
				b.tracker.Forget(es.Key())
			}
		},
	})
	if err != nil {
		return fmt.Errorf("adding ElastiService budget handler: %w", err)
	}
	return nil
}

// Admitted reports whether es's namespace budget admits it.
func (b *SpecBudget) Admitted(es *elastiv1alpha1.ElastiService) bool {
	return b.tracker.Admitted(es.Key())
}
