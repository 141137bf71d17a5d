package controller

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	core "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

// pendingReplicas is a Replicas observer that says whether a group wake is
// under way.
type pendingReplicas struct {
	seenReplicas
	pending bool
}

func (p *pendingReplicas) Pending(types.NamespacedName, *elastiv1alpha1.ElastiServiceStatus) bool {
	return p.pending
}

// One sync takes a group's wake one step: the first dependency below what
// it wants is scaled once all before it are Ready, the target last; the
// DependenciesReady condition names what the wake waits on.
func TestSyncAdvancesAGroupWake(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pending bool
		target  int32
		// db and worker: spec.replicas and ready replicas.
		db, dbReady, worker, workerReady int32
		// scaled is the scale writes, as "resource/name=replicas".
		scaled, reason, message string
	}{
		{"asleep, no wake: nothing", false, 0, 0, 0, 0, 0, "", elastiv1alpha1.ReasonGroupAsleep, "asleep"},
		{"a wake: the database first", true, 0, 0, 0, 0, 0, "statefulsets/db=2", elastiv1alpha1.ReasonDependencyNotReady,
			`dependency 1 of 2, StatefulSet "db", has 0/2 replicas ready`},
		{"database scaled, not Ready: wait", true, 0, 2, 1, 0, 0, "", elastiv1alpha1.ReasonDependencyNotReady, "has 1/2"},
		{"database Ready: the worker", true, 0, 2, 2, 0, 0, "deployments/worker=1", elastiv1alpha1.ReasonDependencyNotReady,
			`dependency 2 of 2, Deployment "worker", has 0/1`},
		{"all Ready: the target", true, 0, 2, 2, 1, 1, "deployments/web=2", elastiv1alpha1.ReasonDependenciesReady, "All 2"},
		{"target up by hand: the group follows", false, 2, 0, 0, 0, 0, "statefulsets/db=2", elastiv1alpha1.ReasonDependencyNotReady, `"db"`},
		{"target up, all Ready: nothing", false, 2, 2, 2, 1, 1, "", elastiv1alpha1.ReasonDependenciesReady, "All 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			es := proxySeed(f)
			es.Spec.WakeWith = []elastiv1alpha1.Dependency{
				{APIVersion: "apps/v1", Kind: elastiv1alpha1.KindStatefulSet, Name: "db", Replicas: 2},
				{APIVersion: "apps/v1", Kind: elastiv1alpha1.KindDeployment, Name: "worker"},
			}
			scaleUp(f, "web", tc.target)
			db := newStatefulSet("db", tc.db)
			db.Status.ReadyReplicas = tc.dbReady
			worker := newDeployment("worker", tc.worker)
			worker.Status.ReadyReplicas = tc.workerReady
			f.statefulSets = append(f.statefulSets, db)
			f.deployments = append(f.deployments, worker)
			_, ctx := ktesting.NewTestContext(t)
			f.replicasObserver = &pendingReplicas{pending: tc.pending}
			c := f.newController(ctx)
			_ = c.syncElastiService(ctx, es.Key()) // serve waits on endpoints; only the group matters here

			var scaled []string
			var status *elastiv1alpha1.ElastiService
			for _, a := range f.kubeClient.Actions() {
				if p, ok := a.(core.PatchAction); ok && p.GetSubresource() == "scale" {
					scaled = append(scaled, fmt.Sprintf("%s/%s=%s", p.GetResource().Resource, p.GetName(),
						strings.TrimSuffix(strings.TrimPrefix(string(p.GetPatch()), `{"spec":{"replicas":`), "}}")))
				}
			}
			for _, a := range f.elastiClient.Actions() {
				if u, ok := a.(core.UpdateAction); ok && u.GetSubresource() == "status" {
					status = u.GetObject().(*elastiv1alpha1.ElastiService)
				}
			}
			if got := strings.Join(scaled, " "); got != tc.scaled {
				t.Errorf("scaled %q, want %q", got, tc.scaled)
			}
			if status == nil {
				t.Fatal("no status write")
			}
			cond := meta.FindStatusCondition(status.Status.Conditions, elastiv1alpha1.ConditionDependenciesReady)
			if cond == nil || cond.Reason != tc.reason || !strings.Contains(cond.Message, tc.message) {
				t.Errorf("DependenciesReady = %+v, want reason %s and a message with %q", cond, tc.reason, tc.message)
			}
		})
	}
}

// Without spec.wakeWith there is no DependenciesReady condition, and one
// left from an earlier spec goes.
func TestSyncWithoutGroupHasNoDependenciesCondition(t *testing.T) {
	f := newFixture(t)
	es := proxySeed(f)
	meta.SetStatusCondition(&es.Status.Conditions, metav1.Condition{Type: elastiv1alpha1.ConditionDependenciesReady,
		Status: metav1.ConditionTrue, Reason: elastiv1alpha1.ReasonDependenciesReady})
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	_ = c.syncElastiService(ctx, es.Key())
	for _, a := range f.elastiClient.Actions() {
		if u, ok := a.(core.UpdateAction); ok && u.GetSubresource() == "status" {
			got := u.GetObject().(*elastiv1alpha1.ElastiService)
			if meta.FindStatusCondition(got.Status.Conditions, elastiv1alpha1.ConditionDependenciesReady) != nil {
				t.Errorf("DependenciesReady kept without spec.wakeWith: %+v", got.Status.Conditions)
			}
			return
		}
	}
	t.Fatal("no status write")
}
