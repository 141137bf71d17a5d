package operator_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/controller"
	"github.com/elasti-dev/elasti/pkg/idle"
	"github.com/elasti-dev/elasti/test/testenv"
)

func dependency(kind, name string, replicas int32) elastiv1alpha1.Dependency {
	return elastiv1alpha1.Dependency{APIVersion: elastiv1alpha1.APIVersionApps, Kind: kind, Name: name, Replicas: replicas}
}

func groupCondition(e *testenv.Env, name string) (*metav1.Condition, string) {
	es := e.Get(name)
	c := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionDependenciesReady)
	desc := testenv.Describe(es)
	if c != nil {
		desc += fmt.Sprintf("; DependenciesReady=%s/%s: %s", c.Status, c.Reason, c.Message)
	}
	return c, desc
}

// One request wakes a database StatefulSet, then a worker, then the app,
// each Ready before the next is scaled; the app's sleep then puts the
// worker and the database back to sleep.
func TestGroupWakesInDependencyOrder(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	prom := testenv.NewFakePrometheus(t)
	scaleURL := startScaling(e, prom)
	e.Resolver(1)
	e.StatefulSet("db", 0)
	e.Deployment("worker", 0, nil)
	e.App("app", 0)
	log := e.WatchWakeOrder(map[string]int32{"StatefulSet/db": 2, "Deployment/worker": 1, "Deployment/app": 2})
	e.ElastiServiceWith("app", "app", elastiv1alpha1.KindDeployment, "app", func(es *elastiv1alpha1.ElastiService) {
		es.Spec.CooldownPeriod = 3
		es.Spec.Triggers = testenv.IdleTrigger("0.5")
		es.Spec.WakeWith = []elastiv1alpha1.Dependency{
			dependency(elastiv1alpha1.KindStatefulSet, "db", 2),
			dependency(elastiv1alpha1.KindDeployment, "worker", 0),
		}
	})
	e.WaitMode("app", elastiv1alpha1.ModeProxy)
	e.Eventually("DependenciesReady=False GroupAsleep", func() (bool, string) {
		c, desc := groupCondition(e, "app")
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == elastiv1alpha1.ReasonGroupAsleep, desc
	})

	code, body := testenv.Post(t, scaleURL, testenv.WakeBody("app", e.NS))
	if code != http.StatusOK || !strings.Contains(body, `StatefulSet \"db\"`) {
		t.Fatalf("wake: %d %s", code, body)
	}
	e.WaitMode("app", elastiv1alpha1.ModeServe)
	e.Eventually("DependenciesReady=True", func() (bool, string) {
		c, desc := groupCondition(e, "app")
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == elastiv1alpha1.ReasonDependenciesReady, desc
	})
	log.ReadyBeforeScaled(t, "StatefulSet/db", "Deployment/worker")
	log.ReadyBeforeScaled(t, "Deployment/worker", "Deployment/app")
	if got := e.Replicas(elastiv1alpha1.KindStatefulSet, "db"); got != 2 {
		t.Errorf("db has %d replicas, want the 2 of wakeWith", got)
	}
	for _, reason := range []string{controller.ReasonDependencyScaled, controller.ReasonGroupTargetWoken} {
		e.Eventually("a "+reason+" event", func() (bool, string) { return e.HasEvent("app", reason) })
	}

	// Idle again: the app sleeps behind the resolver, then its group.
	e.WaitReplicas(elastiv1alpha1.KindDeployment, "app", 0)
	e.WaitMode("app", elastiv1alpha1.ModeProxy)
	e.WaitReplicas(elastiv1alpha1.KindDeployment, "worker", 0)
	e.WaitReplicas(elastiv1alpha1.KindStatefulSet, "db", 0)
	e.Eventually("a DependencyScaledToZero event", func() (bool, string) { return e.HasEvent("app", idle.ReasonDependencyScaledToZero) })
}

// A database two ElastiServices share sleeps only once both are asleep.
func TestSharedDependencySleepsOnlyWhenAllAreIdle(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	prom := testenv.NewFakePrometheus(t)
	startScaling(e, prom)
	e.Resolver(1)
	e.StatefulSet("db", 1)
	e.App("shop", 1)
	e.App("blog", 1)
	db := []elastiv1alpha1.Dependency{dependency(elastiv1alpha1.KindStatefulSet, "db", 1)}
	e.ElastiServiceWith("shop", "shop", elastiv1alpha1.KindDeployment, "shop", func(es *elastiv1alpha1.ElastiService) {
		es.Spec.CooldownPeriod = 2
		es.Spec.Triggers = testenv.IdleTrigger("0.5")
		es.Spec.WakeWith = db
	})
	e.ElastiServiceWith("blog", "blog", elastiv1alpha1.KindDeployment, "blog", func(es *elastiv1alpha1.ElastiService) {
		es.Spec.CooldownPeriod = 600 // awake for the whole test unless asked to sleep
		es.Spec.Triggers = testenv.IdleTrigger("0.5")
		es.Spec.WakeWith = db
	})

	e.WaitReplicas(elastiv1alpha1.KindDeployment, "shop", 0)
	e.WaitMode("shop", elastiv1alpha1.ModeProxy)
	// The poller looks at the asleep shop every 200ms: blog keeps db up.
	e.HoldsReplicas(elastiv1alpha1.KindStatefulSet, "db", 1, 2*time.Second)
	if got := e.Replicas(elastiv1alpha1.KindDeployment, "blog"); got != 1 {
		t.Fatalf("blog has %d replicas, want 1", got)
	}

	// Now blog sleeps too (kubectl elasti sleep's annotation): db follows.
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, elastiv1alpha1.AnnotationSleepRequestedAt, time.Now().UTC().Format(time.RFC3339))
	if _, err := e.Elasti.ElastiV1alpha1().ElastiServices(e.NS).Patch(e.Ctx(), "blog", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.WaitReplicas(elastiv1alpha1.KindDeployment, "blog", 0)
	e.WaitReplicas(elastiv1alpha1.KindStatefulSet, "db", 0)
}

// A dependency that never becomes Ready holds the wake: the condition names
// it with its counts, and the target stays at zero.
func TestDependencyNeverReadyHoldsTheTarget(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	scaleURL := startScaling(e, nil)
	e.Resolver(1)
	e.Deployment("cache", 0, func(d *appsv1.Deployment) {
		// No node matches: its pod stays Pending, never Ready.
		d.Spec.Template.Spec.NodeSelector = map[string]string{"elasti.test/nowhere": "true"}
	})
	e.App("app", 0)
	e.ElastiServiceWith("app", "app", elastiv1alpha1.KindDeployment, "app", func(es *elastiv1alpha1.ElastiService) {
		es.Spec.WakeWith = []elastiv1alpha1.Dependency{dependency(elastiv1alpha1.KindDeployment, "cache", 1)}
	})
	e.WaitMode("app", elastiv1alpha1.ModeProxy)

	code, body := testenv.Post(t, scaleURL, testenv.WakeBody("app", e.NS))
	if code != http.StatusOK || !strings.Contains(body, `Deployment \"cache\", has 0/1 replicas ready`) {
		t.Fatalf("wake: %d %s", code, body)
	}
	e.WaitReplicas(elastiv1alpha1.KindDeployment, "cache", 1)
	e.Eventually("DependenciesReady=False naming cache", func() (bool, string) {
		c, desc := groupCondition(e, "app")
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == elastiv1alpha1.ReasonDependencyNotReady &&
			strings.Contains(c.Message, `Deployment "cache", has 0/1 replicas ready`), desc
	})
	e.HoldsReplicas(elastiv1alpha1.KindDeployment, "app", 0, 3*time.Second)
	// The resolver asks again while it holds: still not past cache.
	testenv.Post(t, scaleURL, testenv.WakeBody("app", e.NS))
	e.HoldsReplicas(elastiv1alpha1.KindDeployment, "app", 0, 6*time.Second)
}

// Deleting an ElastiService whose group sleeps brings the whole group back
// up, its dependencies with its target: nothing it slept is left dark.
func TestDeletionBringsTheGroupBackUp(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	startScaling(e, nil)
	e.Resolver(1)
	e.StatefulSet("db", 0)
	e.App("app", 0)
	e.ElastiServiceWith("app", "app", elastiv1alpha1.KindDeployment, "app", func(es *elastiv1alpha1.ElastiService) {
		es.Spec.WakeWith = []elastiv1alpha1.Dependency{dependency(elastiv1alpha1.KindStatefulSet, "db", 2)}
	})
	e.WaitMode("app", elastiv1alpha1.ModeProxy)
	if err := e.Elasti.ElastiV1alpha1().ElastiServices(e.NS).Delete(e.Ctx(), "app", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.WaitReplicas(elastiv1alpha1.KindStatefulSet, "db", 2)
	e.WaitReplicas(elastiv1alpha1.KindDeployment, "app", 2)
	e.Eventually("the ElastiService to be gone", func() (bool, string) {
		_, err := e.Elasti.ElastiV1alpha1().ElastiServices(e.NS).Get(e.Ctx(), "app", metav1.GetOptions{})
		return err != nil && strings.Contains(err.Error(), "not found"), fmt.Sprint(err)
	})
}
