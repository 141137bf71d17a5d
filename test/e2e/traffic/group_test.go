package traffic

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/test/localcluster/realnet"
)

// wakeOrder records, from watches, when each workload of a namespace was
// first seen scaled up and first seen with what it wants ready.
type wakeOrder struct {
	mu            sync.Mutex
	scaled, ready map[string]time.Time
	wanted        map[string]int32
}

func watchWakeOrder(s *scenario, wanted map[string]int32) *wakeOrder {
	s.t.Helper()
	o := &wakeOrder{scaled: map[string]time.Time{}, ready: map[string]time.Time{}, wanted: wanted}
	ctx, cancel := context.WithCancel(context.Background())
	s.t.Cleanup(cancel)
	deps, err := s.e.Kube.AppsV1().Deployments(s.e.NS).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	sets, err := s.e.Kube.AppsV1().StatefulSets(s.e.NS).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	for _, w := range []watch.Interface{deps, sets} {
		go func() {
			defer w.Stop()
			for ev := range w.ResultChan() {
				switch x := ev.Object.(type) {
				case *appsv1.Deployment:
					o.see("Deployment/"+x.Name, *x.Spec.Replicas, x.Status.ReadyReplicas)
				case *appsv1.StatefulSet:
					o.see("StatefulSet/"+x.Name, *x.Spec.Replicas, x.Status.ReadyReplicas)
				}
			}
		}()
	}
	return o
}

func (o *wakeOrder) see(key string, replicas, ready int32) {
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.scaled[key]; !ok && replicas > 0 {
		o.scaled[key] = now
	}
	if _, ok := o.ready[key]; !ok && replicas > 0 && ready >= max(o.wanted[key], 1) {
		o.ready[key] = now
	}
}

func (o *wakeOrder) readyBeforeScaled(t testing.TB, first, second string) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	r, ok1 := o.ready[first]
	sc, ok2 := o.scaled[second]
	if !ok1 || !ok2 {
		t.Fatalf("%s seen Ready: %v; %s seen scaled: %v", first, ok1, second, ok2)
	}
	if !r.Before(sc) {
		t.Errorf("%s was scaled up at %s, before %s was Ready at %s", second, sc.Format(time.StampMicro), first, r.Format(time.StampMicro))
	}
	t.Logf("%s Ready at %s; %s scaled at %s", first, r.Format(time.StampMicro), second, sc.Format(time.StampMicro))
}

// TestOneRequestWakesAGroupInOrder: web names a database StatefulSet and a
// worker in spec.wakeWith. At zero, one GET by web's short name from a
// client pod goes through kube-proxy to the resolver, which holds it while
// the database wakes and is Ready, then the worker, then web, whose new
// pod answers it.
func TestOneRequestWakesAGroupInOrder(t *testing.T) {
	s := newScenario(t)
	s.e.StatefulSet("db", 0)
	s.e.Deployment("worker", 0, nil)
	s.sleep()
	patch := []byte(`{"spec":{"wakeWith":[` +
		`{"apiVersion":"apps/v1","kind":"StatefulSet","name":"db","replicas":2},` +
		`{"apiVersion":"apps/v1","kind":"Deployment","name":"worker"}]}}`)
	if _, err := s.e.Elasti.ElastiV1alpha1().ElastiServices(s.e.NS).Patch(s.ctx, app, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	s.e.Eventually("DependenciesReady=False GroupAsleep", func() (bool, string) {
		es := s.e.Get(app)
		c := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionDependenciesReady)
		return c != nil && c.Reason == elastiv1alpha1.ReasonGroupAsleep, fmtConditions(es)
	})
	order := watchWakeOrder(s, map[string]int32{"StatefulSet/db": 2, "Deployment/worker": 1, "Deployment/" + app: 1})

	s.expectWoken(s.do(realnet.Request{URL: "http://" + app + "/group", Timeout: wakeTimeout}))
	order.readyBeforeScaled(t, "StatefulSet/db", "Deployment/worker")
	order.readyBeforeScaled(t, "Deployment/worker", "Deployment/"+app)
	if got := s.e.Replicas(elastiv1alpha1.KindStatefulSet, "db"); got != 2 {
		t.Errorf("db has %d replicas, want 2", got)
	}
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
	if _, err := s.e.Elasti.ElastiV1alpha1().ElastiServices(s.e.NS).Patch(s.ctx, app, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	s.e.Eventually("DependenciesReady=False GroupAsleep", func() (bool, string) {
		es := s.e.Get(app)
		c := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionDependenciesReady)
		return c != nil && c.Reason == elastiv1alpha1.ReasonGroupAsleep, fmtConditions(es)
	})

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
