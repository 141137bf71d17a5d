package operator_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/outcome"
	"github.com/elasti-dev/elasti/test/testenv"
)

// moveBound bounds a move of spec.service on this machine: a pod starts,
// the old Service's slice lists it, then the old Service drains (10 s).
const moveBound = 40 * time.Second

// TestIdlePollerWaitsForAMoveOfSpecService: web is idle and asleep; its
// ElastiService moves to web-v2, which wakes the target. The triggers still
// say idle and the cooldown has long passed, yet the poller leaves the
// target up until the move completes (outcome moving), since scaling it
// down would only have the move wake it again; then it scales it down.
func TestIdlePollerWaitsForAMoveOfSpecService(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	prom := testenv.NewFakePrometheus(t)
	startScaling(e, prom)
	e.Resolver(1)
	e.App("web", 1)
	e.Service("web-v2", "web")
	e.ElastiServiceWith("web", "web", elastiv1alpha1.KindDeployment, "web", func(es *elastiv1alpha1.ElastiService) {
		es.Spec.CooldownPeriod = 1
		es.Spec.MinTargetReplicas = 1
		es.Spec.Triggers = testenv.IdleTrigger("0.5")
	})
	e.WaitReplicas(elastiv1alpha1.KindDeployment, "web", 0)
	e.WaitMode("web", elastiv1alpha1.ModeProxy)

	e.UpdateSpec("web", func(es *elastiv1alpha1.ElastiService) { es.Spec.Service = "web-v2" })
	e.WaitReplicas(elastiv1alpha1.KindDeployment, "web", 1)
	began := time.Now()
	for !moveDone(e) {
		if got := e.Replicas(elastiv1alpha1.KindDeployment, "web"); got != 1 {
			t.Fatalf("the target went to %d replicas %s into the move; the poller must wait for it", got, time.Since(began).Round(time.Millisecond))
		}
		if time.Since(began) > moveBound {
			t.Fatalf("the move did not complete within %s: %s", moveBound, testenv.Describe(e.Get("web")))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("the move completed in %s with the target up", time.Since(began).Round(time.Millisecond))
	if n := testutil.ToFloat64(e.LastOperator.Metrics.IdleEvaluations.WithLabelValues(string(outcome.IdleMoving), "")); n < 1 {
		t.Errorf("the poller reported %v moving verdicts; it should have looked during the move", n)
	}
	e.WaitReplicas(elastiv1alpha1.KindDeployment, "web", 0)
}

// moveDone reports whether web's ElastiService let go of Service web.
func moveDone(e *testenv.Env) bool {
	e.T.Helper()
	_, sliceErr := e.ResolverSlice("web")
	_, privErr := e.PrivateService("web")
	for _, p := range e.Get("web").Status.ResolverPorts {
		if p.Service != "web-v2" {
			return false
		}
	}
	return apierrors.IsNotFound(sliceErr) && apierrors.IsNotFound(privErr)
}
