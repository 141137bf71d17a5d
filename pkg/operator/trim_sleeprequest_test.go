package operator

import (
	"maps"
	"testing"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

// An ElastiService is cached without its annotations, but for the sleep
// request, which the idle poller reads from the cache.
func TestTrimElastiServiceKeepsOnlyTheSleepRequest(t *testing.T) {
	es := &elastiv1alpha1.ElastiService{ObjectMeta: fullMeta("es")}
	es.Annotations[elastiv1alpha1.AnnotationSleepRequestedAt] = "2026-11-25T08:00:00Z"
	got := trimmed(t, es)
	if want := map[string]string{elastiv1alpha1.AnnotationSleepRequestedAt: "2026-11-25T08:00:00Z"}; !maps.Equal(got.Annotations, want) {
		t.Errorf("annotations %v, want only %v", got.Annotations, want)
	}
	if got.ManagedFields != nil {
		t.Errorf("managedFields kept: %v", got.ManagedFields)
	}
	if plain := trimmed(t, &elastiv1alpha1.ElastiService{ObjectMeta: fullMeta("es")}); plain.Annotations != nil {
		t.Errorf("annotations %v, want none", plain.Annotations)
	}
}
