package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

// The not-Ready gauge counts ElastiServices whose Ready condition is
// missing, False or Unknown, and only on the leader.
func TestNotReadyCountsWhatIsNotReady(t *testing.T) {
	withReady := func(status metav1.ConditionStatus) *elastiv1alpha1.ElastiService {
		es := &elastiv1alpha1.ElastiService{}
		es.Status.Conditions = []metav1.Condition{{Type: elastiv1alpha1.ConditionReady, Status: status}}
		return es
	}
	otherOnly := &elastiv1alpha1.ElastiService{}
	otherOnly.Status.Conditions = []metav1.Condition{{Type: "TriggersReady", Status: metav1.ConditionTrue}}
	all := []*elastiv1alpha1.ElastiService{
		withReady(metav1.ConditionTrue), withReady(metav1.ConditionTrue),
		withReady(metav1.ConditionFalse), withReady(metav1.ConditionUnknown),
		{}, otherOnly,
	}
	leading := true
	m := NewOperator()
	m.RegisterNotReady(func() ([]*elastiv1alpha1.ElastiService, error) { return all, nil }, func() bool { return leading })
	want := "# HELP " + NotReadyName + " ElastiServices whose Ready condition is not True (missing, False or Unknown).\n# TYPE " + NotReadyName + " gauge\n"
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want+NotReadyName+" 4\n"), NotReadyName); err != nil {
		t.Error(err)
	}
	leading = false
	if n, err := testutil.GatherAndCount(m.Registry, NotReadyName); err != nil || n != 0 {
		t.Errorf("a follower reports %d series (err %v), want none", n, err)
	}
}
