package operator_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/test/testenv"
)

// An operator restarted over a converged fleet makes no write at all: no
// finalizer, private Service, resolver slice, scale or status. The fleet
// mixes ElastiServices that serve and never had a private Service,
// ElastiServices in proxy, and ElastiServices that serve again after a
// spell in proxy, so keep a private Service.
//
// Writes are counted in the apiserver's audit log by the new operator's
// user agent. Its Events and a Lease are not counted, and could not be: the
// local cluster's audit policy leaves both out (test/localcluster). Events
// are no change to the fleet's state, and this in-process operator runs
// without leader election, so it holds no Lease.
func TestRestartOverAConvergedFleetWritesNothing(t *testing.T) {
	e := startWithResolver(t, 1)
	const n = 20
	serving := e.Fleet("serve", n, 1)
	proxied := e.Fleet("proxy", n, 0)
	e.Eventually(fmt.Sprintf("%d in proxy and %d serving", n, n), func() (bool, string) {
		p, s := e.CountModes()
		return p == n && s == n, fmt.Sprintf("%d in proxy, %d serving", p, s)
	})
	const woken = 5 // back to serve, keeping the private Service
	for _, name := range proxied[:woken] {
		e.Scale(elastiv1alpha1.KindDeployment, name, 1)
	}
	for _, name := range append(serving, proxied[:woken]...) {
		e.WaitMode(name, elastiv1alpha1.ModeServe)
	}
	waitSettled(t, e, 2*n)
	for _, name := range proxied {
		if _, err := e.PrivateService(name); err != nil {
			t.Fatalf("%s has no private Service after its spell in proxy: %v", name, err)
		}
	}
	e.Stop()

	// The new operator's own user agent, told apart from the first's.
	e.Opts.UserAgentSuffix = "restarted " + e.UserAgentSuffix()
	start := time.Now()
	e.StartOperator()
	waitSettled(t, e, 2*n)
	t.Logf("restarted operator synced %d ElastiServices in %s", 2*n, time.Since(start).Round(time.Millisecond))
	// Anything queued after a delay (a recheck, a fence lapsing) would
	// show up here; a converged fleet has none.
	time.Sleep(3 * time.Second)
	waitSettled(t, e, 2*n)

	if watches := testenv.OpenWatches(t, " "+e.Opts.UserAgentSuffix); watches == 0 {
		t.Fatalf("the audit log shows no watch of the restarted operator (user agent ending %q): the filter below would see nothing", e.Opts.UserAgentSuffix)
	}
	restarted := func(userAgent string) bool { return strings.HasSuffix(userAgent, " "+e.Opts.UserAgentSuffix) }
	if writes := testenv.Writes(t, restarted); len(writes) > 0 {
		t.Errorf("the restarted operator made %d writes over a converged fleet, want 0:\n%s", len(writes), strings.Join(writes, "\n"))
	}
	p, s := e.CountModes()
	if p != n-woken || s != n+woken {
		t.Errorf("after the restart %d in proxy and %d serving, want %d and %d", p, s, n-woken, n+woken)
	}
}

// waitSettled waits until the Env's operator has synced every one of n
// ElastiServices and has nothing left to do (testenv.QueuesSettled).
func waitSettled(t *testing.T, e *testenv.Env, n int) {
	t.Helper()
	e.Eventually("the operator's queues to settle", func() (bool, string) {
		list, err := e.LastOperator.Metrics.Registry.Gather()
		if err != nil {
			return false, err.Error()
		}
		return testenv.QueuesSettled(testenv.GatheredFamilies(list), n)
	})
}
