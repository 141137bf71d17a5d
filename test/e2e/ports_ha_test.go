package e2e

import (
	"fmt"
	"slices"
	"syscall"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/elasti-dev/elasti/pkg/names"
	"github.com/elasti-dev/elasti/test/testenv"
)

// A leader change keeps every resolver port. The leader hangs (SIGSTOP),
// ElastiServices arrive that it never handles, a second replica starts and
// takes over the Lease; it must keep every recorded port and give the
// newcomers ports that collide with none. The replicas have one worker, and
// the newcomers come first both by name and by last change (the old ones
// are touched after), so the new leader syncs them first whichever order
// its informer lists in: had it not taken back the recorded ports before
// its workers started, it would hand those out to them.
func TestLeaderChangeKeepsResolverPorts(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.ResolverService()
	e.ResolverPods(testenv.ResolverName, 1, true)
	const n = 6
	old := e.Fleet("app", n, 0)
	leader := e.StartOperatorProcess("elasti-operator-a", "--elastiservice-workers=1")
	e.Eventually("the first replica to lead", func() (bool, string) { return leader.Ready(), "not ready" })
	before := map[string]int32{}
	for _, name := range old {
		before[name] = e.WaitResolverPorts(name, 80)[80]
	}

	leader.Signal(syscall.SIGSTOP)
	created := e.Fleet("aa", 3, 0)
	for _, name := range old {
		patch := []byte(`{"metadata":{"labels":{"touched":"after-the-newcomers"}}}`)
		if _, err := e.Elasti.ElastiV1alpha1().ElastiServices(e.NS).Patch(e.Ctx(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	follower := e.StartOperatorProcess("elasti-operator-b", "--elastiservice-workers=1")
	e.Eventually("the second replica to take over", func() (bool, string) { return follower.Ready(), "not ready" })
	leader.Signal(syscall.SIGKILL)

	owners := map[int32]string{}
	for _, name := range append(created, old...) {
		p := e.WaitResolverPorts(name, 80)[80]
		if other, dup := owners[p]; dup {
			t.Errorf("%s and %s both have resolver port %d", name, other, p)
		}
		owners[p] = name
	}
	t.Logf("resolver ports before %v, after %v", before, owners)
	for name, p := range before {
		if owners[p] != name {
			t.Errorf("%s had resolver port %d under %s; under %s %s has it", name, p, leader.Name, follower.Name, owners[p])
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
