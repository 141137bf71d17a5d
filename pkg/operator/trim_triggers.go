package operator

import (
	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/triggers"
)

// trimTriggers keeps of each trigger's metadata only what the trigger's
// parser reads (triggers.TrimMetadata): the schema cannot bound the size of
// every value in it, and a cache that kept metadata whole would let one
// namespace's few hundred megabyte-sized objects take the operator's
// memory. The parser decides the same on what is kept, so an oversized
// metadata is still refused, with the same message.
func trimTriggers(es *elastiv1alpha1.ElastiService) {
	for i := range es.Spec.Triggers {
		t := &es.Spec.Triggers[i]
		t.Metadata = triggers.TrimMetadata(t.Metadata)
	}
}
