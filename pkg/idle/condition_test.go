package idle

import (
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/generated/clientset/versioned/fake"
	"github.com/elasti-dev/elasti/pkg/triggers"
)

// TestConditionWriterRecordsFailuresAndClearsThem: a failed evaluation
// becomes TriggersEvaluated=False with its reason, written once however
// often it repeats; a clean one turns it True; a fleet that never failed
// gets no condition and no write.
func TestConditionWriterRecordsFailuresAndClearsThem(t *testing.T) {
	es := &elastiv1alpha1.ElastiService{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", Generation: 3}}
	client := fake.NewSimpleClientset(es)
	w := ConditionWriter{Client: client, FieldManager: "test", Clock: clocktesting.NewFakePassiveClock(now)}
	writes := func() int {
		n := 0
		for _, a := range client.Actions() {
			if a.GetVerb() == "update" && a.GetSubresource() == "status" {
				n++
			}
		}
		return n
	}
	get := func() *elastiv1alpha1.ElastiService {
		got, err := client.ElastiV1alpha1().ElastiServices("ns").Get(t.Context(), "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}

	w.Report(t.Context(), get(), nil)
	if n := writes(); n != 0 {
		t.Fatalf("a clean evaluation without a past failure wrote status %d times", n)
	}
	failure := &triggers.Error{Reason: triggers.ReasonBadStatus, Err: errors.New("prometheus answered HTTP 400 Bad Request (bad_data): parse error")}
	w.Report(t.Context(), get(), failure)
	w.Report(t.Context(), get(), failure)
	c := meta.FindStatusCondition(get().Status.Conditions, elastiv1alpha1.ConditionTriggersEvaluated)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != string(triggers.ReasonBadStatus) || c.ObservedGeneration != 3 {
		t.Fatalf("after a failure: %+v", c)
	}
	if n := writes(); n != 1 {
		t.Fatalf("the same failure twice wrote status %d times, want 1", n)
	}
	w.Report(t.Context(), get(), nil)
	c = meta.FindStatusCondition(get().Status.Conditions, elastiv1alpha1.ConditionTriggersEvaluated)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != elastiv1alpha1.ReasonTriggersEvaluated {
		t.Fatalf("after a clean evaluation: %+v", c)
	}
}
