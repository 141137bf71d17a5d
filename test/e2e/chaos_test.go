package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/controller"
	"github.com/elasti-dev/elasti/test/testenv"
)

// chaosRounds is how many times the leader is killed during a fleet-wide
// scale-down, and again during a fleet-wide wake.
const chaosRounds = 5

// The operator scales a fleet to zero by itself and wakes it again, and the
// leader is SIGKILLed at a different moment of each, then replaced at once.
// No Service is ever seen without a ready endpoint, and every new leader
// finishes what the killed one started.
func TestLeaderKilledDuringScaleDownAndWakeLeavesNoServiceDark(t *testing.T) {
	t.Parallel()
	c := newChaos(t, 30)
	dark := c.e.WatchDark(c.names...)
	for round := range chaosRounds {
		c.killDuring(round, "scale-down", c.sleepFleet, c.converged(elastiv1alpha1.ModeProxy, 0))
		c.killDuring(round, "wake", c.wakeFleet, c.converged(elastiv1alpha1.ModeServe, replicas))
	}
	samples, darkServices := dark.Stats()
	t.Logf("%d kills over %d Services; %d dark-Service samples, %d Services ever dark",
		2*chaosRounds, len(c.names), samples, darkServices)
}

type chaos struct {
	t    *testing.T
	e    *testenv.Env
	prom *testenv.FakePrometheus
	// writes is every target's replicas and every mode as they changed,
	// watched from before the fleet was made.
	writes *timeline
	names  []string
	leader atomic.Pointer[testenv.OperatorProcess]
	starts int
}

// replicas is each target's size awake: more than one, so that a wake soon
// after a scale-down finds old pods still listed as ready beside the new.
const replicas = 2

// newChaos makes n busy ElastiServices with ready pods, behind an operator
// process that polls their triggers often.
func newChaos(t *testing.T, n int) *chaos {
	c := &chaos{t: t, e: testenv.New(t), prom: testenv.NewFakePrometheus(t)}
	c.writes = watchTimeline(t, c.e)
	c.prom.Set("5", "1", testenv.PrometheusHealthy)
	c.e.Resolver(2)
	for i := range n {
		name := fmt.Sprintf("app-%d", i)
		c.names = append(c.names, name)
		c.e.App(name, replicas)
		c.e.ElastiServiceWith(name, name, elastiv1alpha1.KindDeployment, name, func(es *elastiv1alpha1.ElastiService) {
			es.Spec.CooldownPeriod = 1
			es.Spec.Triggers = testenv.IdleTrigger("1")
		})
	}
	c.leader.Store(c.startOperator())
	c.e.Eventually("the first leader", func() (bool, string) { return c.leader.Load().Ready(), "not ready" })
	c.e.Eventually("every Service served by its pod", c.converged(elastiv1alpha1.ModeServe, replicas))
	return c
}

// startOperator starts the next leader on testenv.SteadyLease: only the
// test ends a leader here, and no standby runs to take over a lease lost
// to a loaded apiserver. Each kill then waits out the killed lease.
func (c *chaos) startOperator() *testenv.OperatorProcess {
	c.starts++
	return c.e.StartOperatorProcess(fmt.Sprintf("elasti-operator-%d", c.starts),
		append(slices.Clone(testenv.SteadyLease), "--polling-interval=250ms", "--prometheus-server-address="+c.prom.URL)...)
}

// killDuring starts act, SIGKILLs the leader at a moment that differs each
// round, starts a new operator at once and waits for it to converge.
func (c *chaos) killDuring(round int, what string, act func(stop <-chan struct{}), converged func() (bool, string)) {
	c.t.Helper()
	stop := make(chan struct{})
	var acting sync.WaitGroup
	// The mark is taken before act starts: its first write may land
	// before this goroutine runs again.
	mark := c.writes.mark()
	acting.Go(func() { act(stop) })
	first := c.awaitFirstChange(what, mark)
	// Spread the kills over the whole sequence: right at its first write,
	// in the middle, and after most of it.
	delay := time.Duration(round)*60*time.Millisecond + rand.N(40*time.Millisecond)
	time.Sleep(time.Until(first.Add(delay)))
	old := c.leader.Load()
	old.Signal(syscall.SIGKILL)
	<-old.Done()
	killed := time.Now()
	c.leader.Store(c.startOperator())
	c.e.Eventually(what+": the new leader", func() (bool, string) { return c.leader.Load().Ready(), "not ready" })
	c.e.Eventually(what+": converged after the kill", converged)
	close(stop)
	acting.Wait()
	proxy, serve := c.e.CountModes()
	c.t.Logf("round %d, %s: killed %s after its first write, converged %s after the kill (%d proxy, %d serve)",
		round, what, delay.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond), proxy, serve)
}

// awaitFirstChange waits until some target's replicas have moved after
// mark, which is the first write of a scale-down or a wake, and returns
// when the watch saw it.
func (c *chaos) awaitFirstChange(what string, mark int) time.Time {
	c.t.Helper()
	first, ok := c.writes.waitFor(mark, "replicas", testenv.WaitTimeout)
	if !ok {
		c.t.Fatalf("%s: no target's replicas changed within %s; the writes since it began:\n%s",
			what, testenv.WaitTimeout, c.writes.String(mark))
	}
	c.t.Logf("%s: first write %s", what, first.text)
	return first.at
}

func (c *chaos) replicas() map[string]int32 {
	list, err := c.e.Kube.AppsV1().Deployments(c.e.NS).List(c.e.Ctx(), metav1.ListOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	out := map[string]int32{}
	for _, d := range list.Items {
		if d.Spec.Replicas != nil {
			out[d.Name] = *d.Spec.Replicas
		}
	}
	return out
}

// sleepFleet makes every trigger idle; the operator's poller does the rest.
func (c *chaos) sleepFleet(<-chan struct{}) { c.prom.Set("0", "1", testenv.PrometheusHealthy) }

// wakeFleet makes the fleet busy and asks the leader to wake every Service,
// as resolvers holding a request for each would: each keeps asking, the
// way a resolver does, until its Service is woken or stop closes.
func (c *chaos) wakeFleet(stop <-chan struct{}) {
	c.prom.Set("5", "1", testenv.PrometheusHealthy)
	testenv.WakeEvery(stop, c.leaderScaleURL, c.e.NS, c.names)
}

// leaderScaleURL is the scale endpoint of the current leader, which the
// test replaces while the waking goroutines run.
func (c *chaos) leaderScaleURL() string { return c.leader.Load().Scale }

// converged reports whether every ElastiService is in mode, every target
// at replicas, and the resolver slice exists exactly for the Services in
// proxy mode.
func (c *chaos) converged(mode string, replicas int32) func() (bool, string) {
	return func() (bool, string) {
		ctx := context.WithoutCancel(c.e.Ctx())
		list, err := c.e.Elasti.ElastiV1alpha1().ElastiServices(c.e.NS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		targets := c.replicas()
		slices, err := c.e.Kube.DiscoveryV1().EndpointSlices(c.e.NS).List(ctx, metav1.ListOptions{
			LabelSelector: discoveryv1.LabelManagedBy + "=" + controller.ManagedByValue,
		})
		if err != nil {
			return false, err.Error()
		}
		fronted := map[string]int{}
		for _, s := range slices.Items {
			fronted[s.Labels[discoveryv1.LabelServiceName]]++
		}
		wantFronted := 0
		if mode == elastiv1alpha1.ModeProxy {
			wantFronted = 1
		}
		for _, es := range list.Items {
			if es.Status.Mode != mode || targets[es.Spec.ScaleTargetRef.Name] != replicas || fronted[es.Spec.Service] != wantFronted {
				return false, fmt.Sprintf("%s: mode %q, replicas %d, resolver slices %d", es.Name, es.Status.Mode,
					targets[es.Spec.ScaleTargetRef.Name], fronted[es.Spec.Service])
			}
		}
		return len(list.Items) == len(c.names), fmt.Sprintf("%d ElastiServices", len(list.Items))
	}
}

// The chaos test's first write of an act is seen even when it lands before
// the test looks: the watch that sees it starts before the act. Comparing
// the replicas before and after could not see this one, which is how a
// wake of the whole fleet went unseen in a loaded CI run (issue 43):
// every target had moved before the "before" was read.
func TestChaosSeesAFirstWriteThatLandsBeforeItLooks(t *testing.T) {
	t.Parallel()
	c := &chaos{t: t, e: testenv.New(t)}
	c.writes = watchTimeline(t, c.e)
	c.e.Deployment("quick", 1, nil)
	mark := c.writes.mark()
	// The whole act is over before the test looks. The Deployment
	// controller writes the Deployment too: a conflict is tried again.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		scale, err := c.e.Kube.AppsV1().Deployments(c.e.NS).GetScale(c.e.Ctx(), "quick", metav1.GetOptions{})
		if err != nil {
			return err
		}
		scale.Spec.Replicas = 0
		_, err = c.e.Kube.AppsV1().Deployments(c.e.NS).UpdateScale(c.e.Ctx(), "quick", scale, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	c.awaitFirstChange("an act over before the look", mark)
}
