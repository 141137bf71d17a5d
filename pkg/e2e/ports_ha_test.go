package e2e

import (
	"fmt"
	"slices"
	"syscall"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/elasti-dev/elasti/pkg/names"
	"github.com/elasti-dev/elasti/pkg/testenv"
)

// A leader change keeps every resolver port: two replicas with leader
// election, the leader is killed, ElastiServices arrive while no one leads,
// and the new leader keeps every recorded port and gives the newcomers
// ports that collide with none. The replicas have one worker and the
// newcomers sort first, so a leader that synced before taking back the
// recorded ports would hand those out to them.
func TestLeaderChangeKeepsResolverPorts(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.ResolverService()
	e.ResolverPods(testenv.ResolverName, 1, true)
	const n = 6
	old := e.Fleet("app", n, 0)
	a := startOperatorProcessFor(t, e, "elasti-operator-a", "--elastiservice-workers=1")
	b := startOperatorProcessFor(t, e, "elasti-operator-b", "--elastiservice-workers=1")

	before := map[string]int32{}
	for _, name := range old {
		before[name] = e.WaitResolverPorts(name, 80)[80]
	}
	var leader, follower *operatorProcess
	e.Eventually("exactly one ready replica", func() (bool, string) {
		ra, rb := a.ready(), b.ready()
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

	leader.signal(syscall.SIGKILL)
	created := e.Fleet("aa", 3, 0)
	e.Eventually("the follower to take over", func() (bool, string) { return follower.ready(), "not ready" })

	owners := map[int32]string{}
	for _, name := range append(created, old...) {
		p := e.WaitResolverPorts(name, 80)[80]
		if other, dup := owners[p]; dup {
			t.Errorf("%s and %s both have resolver port %d", name, other, p)
		}
		owners[p] = name
	}
	for name, p := range before {
		if owners[p] != name {
			t.Errorf("%s had resolver port %d under %s; under %s %s has it", name, p, leader.name, follower.name, owners[p])
		}
	}
	// And the slices still point at them.
	for _, name := range old {
		e.Eventually("the resolver slice of "+name+" to name its port", func() (bool, string) {
			s, err := e.Kube.DiscoveryV1().EndpointSlices(e.NS).Get(e.Ctx(), names.ResolverSlice(name), metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			var ports []int32
			for _, p := range s.Ports {
				ports = append(ports, ptr.Deref(p.Port, 0))
			}
			return slices.Equal(ports, []int32{before[name]}), fmt.Sprintf("%v", ports)
		})
	}
}
