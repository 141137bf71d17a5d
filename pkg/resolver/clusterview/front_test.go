package clusterview_test

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/elasti-dev/elasti/pkg/names"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview/clusterviewtest"
	"github.com/elasti-dev/elasti/pkg/resolver/internal/resolvertest"
)

// The resolver is in front of a Service while the operator's resolver
// slice for it exists, and for the drain after it goes, so that what
// kube-proxy and ingress controllers still send it after the switch to
// serve reaches the pods. A slice that only carries the operator's
// managed-by label, with no ElastiService as its controller, fronts
// nothing.
func TestFrontFollowsResolverSlicesAndDrains(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	forged := resolvertest.ManagedBy(resolvertest.Slice("team", "forged", "other", map[string]int32{"http": 8012}, resolvertest.EP("10.244.9.9")), names.ResolverSliceManagedBy)
	client := fake.NewClientset(
		resolvertest.Service("team", "web", resolvertest.SvcPort("http", 80, intstr.FromInt32(8080))),
		resolvertest.Service("team", "other", resolvertest.SvcPort("http", 80, intstr.FromInt32(8080))),
		forged,
	)
	e := clusterviewtest.StartEndpoints(t, client, resolvertest.ElastiServiceFor("team", "web"))
	web, other := clusterview.ServiceRef{Namespace: "team", Name: "web"}, clusterview.ServiceRef{Namespace: "team", Name: "other"}
	if e.Front(other) {
		t.Fatal("a hand-made slice with the operator's managed-by label and no ElastiService controller put the resolver in front")
	}
	changed, stop := e.Watch(web)
	defer stop()
	if e.Front(web) {
		t.Fatal("in front before any resolver slice")
	}

	ctx := t.Context()
	if _, err := client.DiscoveryV1().EndpointSlices("team").Create(ctx, resolvertest.ResolverSlice("team", "web"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("the resolver slice's creation did not wake a waiter")
	}
	if !e.Front(web) {
		t.Fatal("not in front with a resolver slice")
	}

	// The drain runs on a clock the test moves. No resolver slice has
	// gone yet, so the informer's handler has not read drains.
	clk := testingclock.NewFakeClock(time.Now())
	clusterview.SetDrainClock(e, clk)
	if err := client.DiscoveryV1().EndpointSlices("team").Delete(ctx, names.ResolverSlice("web"), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	resolvertest.Eventually(t, 5*time.Second, "the drain to start", func() bool { return clusterview.Draining(e, web) })
	if !e.Front(web) {
		t.Fatal("not in front right after the switch to serve: the drain must still forward")
	}
	clk.Step(clusterview.DefaultFrontDrain - time.Nanosecond)
	if !e.Front(web) {
		t.Fatal("not in front just before the drain ends")
	}
	clk.Step(time.Nanosecond)
	if e.Front(web) {
		t.Fatalf("still in front %v after the resolver slice went", clusterview.DefaultFrontDrain)
	}
}

// Only the slices the Service itself controls list its pods: a slice with
// the EndpointSlice controller's labels but another owner, which anyone
// who may write EndpointSlices in the namespace can make, is ignored, so
// it cannot point the resolver at addresses of the writer's choosing.
func TestSlicesOfAnotherOwnerAreIgnored(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	forged := resolvertest.Slice("team", "web-forged", "web", map[string]int32{"http": 8080}, resolvertest.EP("10.244.6.6"))
	forged.OwnerReferences[0].UID = "someone-else"
	unowned := resolvertest.Slice("team", "web-unowned", "web", map[string]int32{"http": 8080}, resolvertest.EP("10.244.7.7"))
	unowned.OwnerReferences = nil
	client := fake.NewClientset(
		resolvertest.Service("team", "web", resolvertest.SvcPort("http", 80, intstr.FromInt32(8080))),
		resolvertest.Slice("team", "web-abc", "web", map[string]int32{"http": 8080}, resolvertest.EP("10.244.0.1")),
		forged, unowned,
	)
	e := clusterviewtest.StartEndpoints(t, client)
	got, err := e.Lookup(clusterview.ServiceRef{Namespace: "team", Name: "web"}, "80")
	if err != nil || !slices.Equal(got.Addrs, []string{"10.244.0.1:8080"}) {
		t.Fatalf("Lookup = %v, %v; want only the Service's own slice's endpoint", got.Addrs, err)
	}
}
