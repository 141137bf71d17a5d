package controller

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"

	"github.com/elasti-dev/elasti/pkg/directory"
	"github.com/elasti-dev/elasti/pkg/nsbudget"
)

// An ElastiService its namespace's budget refuses (here: one older
// ElastiService already fills a budget of one) gets Ready=False with
// NamespaceBudgetExceeded and a Warning event, and nothing else: no claim,
// no slice, no scale. Forgetting the older one lets it in, and syncs it.
func TestSyncRefusesElastiServicePastItsNamespaceBudget(t *testing.T) {
	f := newFixture(t)
	f.directory = directory.New(nsbudget.Limits{Count: 1})
	es := proxySeed(f)
	es.CreationTimestamp = metav1.NewTime(t0)
	older := newElastiService("old", "old", "old")
	older.CreationTimestamp = metav1.NewTime(t0.Add(-time.Hour))
	budget := f.directory.Budget()
	budget.Observe(older)
	budget.Observe(es)

	f.expectElasti(expectStatusUpdate(expectedStatus(es, "", metav1.ConditionFalse, ReasonNamespaceBudgetExceeded, t0)))
	f.expectEvents("Warning " + ReasonNamespaceBudgetExceeded)
	wantNoError(t, f.run(keyOf(es)))
	if msg := readyMessage(f.lastStatusUpdate()); !strings.Contains(msg, "past its budget of 1 ElastiServices") {
		t.Errorf("message %q", msg)
	}
	if n := f.directory.Len(); n != 0 {
		t.Errorf("%d directory entries for a refused ElastiService", n)
	}

	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	var queued []types.NamespacedName
	c.queue.(*testQueue).add = func(k types.NamespacedName) { queued = append(queued, k) }
	budget.TakeChanged()
	c.onElastiServiceDelete(older)
	if !budget.Admitted(keyOf(es)) {
		t.Fatal("still refused after the older one went")
	}
	if !slices.Contains(queued, keyOf(es)) {
		t.Errorf("queued %v; want the newly admitted %v synced", queued, keyOf(es))
	}
}
