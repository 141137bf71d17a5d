package idle

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/generated/clientset/versioned/fake"
	"github.com/elasti-dev/elasti/pkg/scaletarget"
	"github.com/elasti-dev/elasti/pkg/triggers"
)

// TestConditionWriterRecordsFailuresAndClearsThem: a failed evaluation
// becomes TriggersEvaluated=False with its reason, written once however
// often it repeats; a clean one turns it True; a fleet that never failed
// gets no condition and no write.
func TestConditionWriterRecordsFailuresAndClearsThem(t *testing.T) {
	es := &elastiv1alpha1.ElastiService{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", Generation: 3}}
	w, writes, get := conditionWriterOf(t, es)

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

// conditionWriterOf is a ConditionWriter over a fake clientset holding es
// (ns/web), with how many status writes it made and es as it is now.
func conditionWriterOf(t *testing.T, es *elastiv1alpha1.ElastiService) (w ConditionWriter, writes func() int, get func() *elastiv1alpha1.ElastiService) {
	client := fake.NewSimpleClientset(es)
	w = ConditionWriter{Client: client, FieldManager: "test", Clock: clocktesting.NewFakePassiveClock(now)}
	writes = func() int {
		n := 0
		for _, a := range client.Actions() {
			if a.GetVerb() == "update" && a.GetSubresource() == "status" {
				n++
			}
		}
		return n
	}
	get = func() *elastiv1alpha1.ElastiService {
		got, err := client.ElastiV1alpha1().ElastiServices("ns").Get(t.Context(), "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	return w, writes, get
}

// TestConditionWriterReportsTheHPA: HPAFound follows how the named HPA
// relates to the target, written once per change, and goes away with
// spec.autoscaler; an ElastiService without an HPA gets no write.
func TestConditionWriterReportsTheHPA(t *testing.T) {
	es := &elastiv1alpha1.ElastiService{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", Generation: 2},
		Spec: elastiv1alpha1.ElastiServiceSpec{Autoscaler: &elastiv1alpha1.AutoscalerSpec{Type: elastiv1alpha1.AutoscalerTypeHPA, Name: "web-hpa"}}}
	w, writes, get := conditionWriterOf(t, es)
	cond := func() *metav1.Condition {
		return meta.FindStatusCondition(get().Status.Conditions, elastiv1alpha1.ConditionHPAFound)
	}

	w.ReportHPA(t.Context(), get(), scaletarget.HPANotFound)
	w.ReportHPA(t.Context(), get(), scaletarget.HPANotFound)
	if c := cond(); c == nil || c.Status != metav1.ConditionFalse || c.Reason != elastiv1alpha1.ReasonHPANotFound || !strings.Contains(c.Message, "web-hpa") {
		t.Fatalf("named HPA missing: %+v", c)
	}
	if n := writes(); n != 1 {
		t.Fatalf("the same answer twice wrote status %d times, want 1", n)
	}
	w.ReportHPA(t.Context(), get(), scaletarget.HPAOtherTarget)
	if c := cond(); c == nil || c.Status != metav1.ConditionFalse || c.Reason != elastiv1alpha1.ReasonHPAScalesAnotherTarget {
		t.Fatalf("HPA of another workload: %+v", c)
	}
	w.ReportHPA(t.Context(), get(), scaletarget.HPAOwns)
	if c := cond(); c == nil || c.Status != metav1.ConditionTrue || c.Reason != elastiv1alpha1.ReasonHPAOwnsTarget {
		t.Fatalf("HPA that owns the target: %+v", c)
	}
	w.ReportHPA(t.Context(), get(), scaletarget.HPANone)
	if c := cond(); c != nil {
		t.Fatalf("no HPA named, yet %+v", c)
	}
	before := writes()
	w.ReportHPA(t.Context(), get(), scaletarget.HPANone)
	if n := writes(); n != before {
		t.Fatalf("without an HPA named and no condition, status was written %d times", n-before)
	}
}
