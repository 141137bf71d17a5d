package e2e

import (
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/test/testenv"
)

// Two replicas with leader election: one acts, the other keeps warm caches,
// is not ready and refuses scale requests; when the leader dies the other
// takes over within the lease duration and converges with nothing lost.
func TestTwoReplicasOnlyTheLeaderActsAndFailoverConverges(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Resolver(1)
	const n = 10
	e.Fleet("app", n, 0)
	a := e.StartOperatorProcess("elasti-operator-a")
	b := e.StartOperatorProcess("elasti-operator-b")

	var leader, follower *testenv.OperatorProcess
	e.Eventually("exactly one ready replica", func() (bool, string) {
		ra, rb := a.Ready(), b.Ready()
		switch {
		case ra && !rb:
			leader, follower = a, b
		case rb && !ra:
			leader, follower = b, a
		default:
			return false, fmt.Sprintf("a ready=%v b ready=%v", ra, rb)
		}
		return true, ""
	})
	e.Eventually("every ElastiService in proxy mode", func() (bool, string) {
		p, s := e.CountModes()
		return p == n, fmt.Sprintf("%d proxy, %d serve", p, s)
	})
	// The follower stays out: not ready, 503 on scale requests, no writes.
	for range 5 {
		if follower.Ready() {
			t.Fatalf("%s reports ready while %s leads", follower.Name, leader.Name)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code, body := testenv.Post(t, follower.Scale, testenv.WakeBody("app-0", e.NS)); code != http.StatusServiceUnavailable {
		t.Fatalf("the follower answered a scale request with %d %s, want 503", code, body)
	}
	if w := writesBy(t, e.NS, follower.Name); w != 0 {
		t.Errorf("the follower %s made %d writes; only the leader may act", follower.Name, w)
	}
	if w := writesBy(t, e.NS, leader.Name); w < n {
		t.Errorf("the leader %s made %d writes for %d ElastiServices", leader.Name, w, n)
	}

	// Kill the leader outright: the follower takes over within the lease.
	killed := time.Now()
	leader.Signal(syscall.SIGKILL)
	// Work that arrives with no leader must not be lost.
	e.App("late", 0)
	e.ElastiService("late", "late", elastiv1alpha1.KindDeployment, "late")
	e.Eventually("the follower to take over", func() (bool, string) { return follower.Ready(), "not ready" })
	took := time.Since(killed)
	t.Logf("failover took %s (lease duration 3s)", took.Round(time.Millisecond))
	if took > 3*time.Second+5*time.Second {
		t.Errorf("failover took %s; the lease duration is 3s", took)
	}
	for i := range 5 {
		name := fmt.Sprintf("app-%d", i)
		if code, body := testenv.Post(t, follower.Scale, testenv.WakeBody(name, e.NS)); code != http.StatusOK {
			t.Fatalf("new leader: wake %s: %d %s", name, code, body)
		}
	}
	e.Eventually("5 woken and 6 asleep after failover", func() (bool, string) {
		p, s := e.CountModes()
		return p == n+1-5 && s == 5, fmt.Sprintf("%d proxy, %d serve", p, s)
	})
}

// SIGTERM in the middle of a burst of mode switches: the operator drains,
// releases its lease, exits cleanly, and a restarted operator converges.
// No leader fails over by a crash here: both run with a steady lease.
func TestSIGTERMDuringABurstConverges(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Resolver(1)
	const n = 60
	e.Fleet("app", n, 1)
	first := e.StartOperatorProcess("elasti-operator-first", testenv.SteadyLease...)
	e.Eventually("every ElastiService serving", func() (bool, string) {
		p, s := e.CountModes()
		return s == n, fmt.Sprintf("%d proxy, %d serve", p, s)
	})

	for i := range n {
		e.Scale(elastiv1alpha1.KindDeployment, fmt.Sprintf("app-%d", i), 0)
	}
	e.Eventually("the burst under way", func() (bool, string) {
		p, _ := e.CountModes()
		return p > 0, fmt.Sprintf("%d switched", p)
	})
	first.Signal(syscall.SIGTERM)
	select {
	case <-first.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the operator did not exit within 30s of SIGTERM")
	}
	if code := first.State().ExitCode(); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
	lease, err := e.Kube.CoordinationV1().Leases(e.NS).Get(e.Ctx(), "elasti-operator-leader", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
		t.Errorf("the lease is still held by %q after a graceful shutdown", *h)
	}
	p, _ := e.CountModes()
	t.Logf("%d of %d switched to proxy before the shutdown", p, n)

	second := e.StartOperatorProcess("elasti-operator-second", testenv.SteadyLease...)
	start := time.Now()
	e.Eventually("every ElastiService converged to proxy after the restart", func() (bool, string) {
		p, s := e.CountModes()
		return p == n, fmt.Sprintf("%d proxy, %d serve", p, s)
	})
	t.Logf("converged %s after the restart", time.Since(start).Round(time.Millisecond))
	for i := range n {
		name := fmt.Sprintf("app-%d", i)
		ours := 0
		for _, s := range e.SlicesFor(name) {
			if s.Labels["endpointslice.kubernetes.io/managed-by"] == "elasti-operator.elasti.truefoundry.com" {
				ours++
			}
		}
		if ours != 1 {
			t.Errorf("%s has %d resolver slices after the restart, want 1", name, ours)
		}
	}
	_ = second
}
