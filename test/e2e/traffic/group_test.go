package traffic

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/test/localcluster/realnet"
)

// TestOneRequestWakesAGroupInOrder: web names a database StatefulSet and a
// worker in spec.wakeWith. At zero, one GET by web's short name from a
// client pod goes through kube-proxy to the resolver, which holds it while
// the database wakes and is Ready, then the worker, then web, whose new
// pod answers it.
func TestOneRequestWakesAGroupInOrder(t *testing.T) {
	sideBySideScenario(t)
	s := newScenario(t)
	s.e.StatefulSet("db", 0)
	s.e.Deployment("worker", 0, nil)
	s.sleep()
	patch := []byte(`{"spec":{"wakeWith":[` +
		`{"apiVersion":"apps/v1","kind":"StatefulSet","name":"db","replicas":2},` +
		`{"apiVersion":"apps/v1","kind":"Deployment","name":"worker"}]}}`)
	s.wakeWith(patch)
	order := s.e.WatchWakeOrder(map[string]int32{"StatefulSet/db": 2, "Deployment/worker": 1, "Deployment/" + app: 1})

	s.expectWoken(s.do(realnet.Request{URL: "http://" + app + "/group", Timeout: wakeTimeout}))
	order.ReadyBeforeScaled(t, "StatefulSet/db", "Deployment/worker")
	order.ReadyBeforeScaled(t, "Deployment/worker", "Deployment/"+app)
	if got := s.e.Replicas(elastiv1alpha1.KindStatefulSet, "db"); got != 2 {
		t.Errorf("db has %d replicas, want 2", got)
	}
}

// wakeWith merge-patches the sleeping app's ElastiService with patch, its
// spec.wakeWith, and waits until its DependenciesReady says the group
// sleeps.
func (s *scenario) wakeWith(patch []byte) {
	s.t.Helper()
	if _, err := s.e.Elasti.ElastiV1alpha1().ElastiServices(s.e.NS).Patch(s.ctx, app, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		s.t.Fatal(err)
	}
	s.e.Eventually("DependenciesReady=False GroupAsleep", func() (bool, string) {
		es := s.e.Get(app)
		c := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionDependenciesReady)
		return c != nil && c.Reason == elastiv1alpha1.ReasonGroupAsleep, fmtConditions(es)
	})
}

func fmtConditions(es *elastiv1alpha1.ElastiService) string {
	var out string
	for _, c := range es.Status.Conditions {
		out += c.Type + "=" + string(c.Status) + " " + c.Reason + ": " + c.Message + "; "
	}
	return out
}

// TestDependencyNeverReadyEndsTheHoldNamingIt: web's group names a cache
// whose pod can never be scheduled. A request by web's short name is held
// while the cache is scaled and never Ready; web is never scaled, and when
// the resolver's hold times out its 504 names the cache and its counts, as
// the DependenciesReady condition does.
func TestDependencyNeverReadyEndsTheHoldNamingIt(t *testing.T) {
	s := newScenario(t)
	s.setResolverArgs("--request-timeout=8s")
	s.e.Deployment("cache", 0, func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.NodeSelector = map[string]string{"elasti.test/nowhere": "true"}
	})
	s.sleep()
	patch := []byte(`{"spec":{"wakeWith":[{"apiVersion":"apps/v1","kind":"Deployment","name":"cache"}]}}`)
	s.wakeWith(patch)

	const naming = `Deployment "cache", has 0/1 replicas ready`
	resp := s.do(realnet.Request{URL: "http://" + app + "/never", Timeout: 30 * time.Second})
	if resp.Status != 504 || !strings.Contains(resp.Body, naming) {
		t.Fatalf("want a 504 naming the cache, got %s", resp)
	}
	t.Logf("the hold ended: %d %s", resp.Status, strings.TrimSpace(resp.Body))
	es := s.e.Get(app)
	c := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionDependenciesReady)
	if c == nil || c.Reason != elastiv1alpha1.ReasonDependencyNotReady || !strings.Contains(c.Message, naming) {
		t.Errorf("DependenciesReady: %s", fmtConditions(es))
	}
	if got := s.e.Replicas(elastiv1alpha1.KindDeployment, "cache"); got != 1 {
		t.Errorf("cache has %d replicas, want 1", got)
	}
	if got := s.e.Replicas(elastiv1alpha1.KindDeployment, app); got != 0 {
		t.Errorf("web was woken past a dependency that is not Ready: %d replicas", got)
	}
}
