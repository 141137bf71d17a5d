package identify

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"

	v1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/portalloc"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
	"github.com/elasti-dev/elasti/pkg/resolver/internal/resolvertest"
)

// Two ElastiServices claiming one port (a restore, say): the older keeps
// it, and when it lets go the other gets it.
func TestRouteTableOlderClaimWins(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	rt := NewRouteTable(ctx, resolvertest.AnyPort)
	older := resolvertest.ESWithPorts("old", v1.ResolverPort{Service: "old", Port: 80, ResolverPort: 20001})
	older.CreationTimestamp = metav1.NewTime(time.Now().Add(-time.Hour))
	newer := resolvertest.ESWithPorts("new", v1.ResolverPort{Service: "new", Port: 80, ResolverPort: 20001})
	rt.Upsert(newer)
	rt.Upsert(older)
	if r, _ := rt.Lookup(20001); r.Service.Name != "old" {
		t.Fatalf("port 20001 routes to %q, want the older ElastiService's Service", r.Service.Name)
	}
	rt.Delete(older.Namespace, older.Name)
	if r, _ := rt.Lookup(20001); r.Service.Name != "new" {
		t.Fatalf("after the older let go, port 20001 routes to %q, want \"new\"", r.Service.Name)
	}
	rt.Delete(newer.Namespace, newer.Name)
	if _, ok := rt.Lookup(20001); ok || len(rt.Ports()) != 0 {
		t.Fatal("a port with no claim is still routed")
	}
}

// The resolver listens only inside its range: a port an ElastiService's
// status names outside it (the resolver's own 8013, say, or any port a
// user with update rights on the status writes) is never routed, and the
// others of the same ElastiService still are.
func TestRouteTableTakesOnlyPortsInItsRange(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	rt := NewRouteTable(ctx, portalloc.DefaultRange)
	rt.Upsert(resolvertest.ESWithPorts("web",
		v1.ResolverPort{Service: "web", Port: 80, ResolverPort: 8013},
		v1.ResolverPort{Service: "web", Port: 81, ResolverPort: 19999},
		v1.ResolverPort{Service: "web", Port: 82, ResolverPort: 30000},
		v1.ResolverPort{Service: "web", Port: 83, ResolverPort: 20000},
	))
	if got := rt.Ports(); !slices.Equal(got, []int32{20000}) {
		t.Fatalf("routed ports %v, want only [20000], the one inside %s", got, portalloc.DefaultRange)
	}
}

// Mid-move, a connection on the old Service's resolver port is for the
// old Service, and the port is released with its status entry.
func TestRouteTableKeepsTheOldServicesPortMidMove(t *testing.T) {
	table := NewRouteTable(t.Context(), resolvertest.AnyPort)
	es := resolvertest.ElastiService("team", "es", "web-v2", 2)
	es.Status.ResolverPorts = []v1.ResolverPort{
		{Service: "web-v2", Name: "http", Port: 80, ResolverPort: 20001},
		{Service: "web", Name: "http", Port: 80, ResolverPort: 20000},
	}
	table.Upsert(es)
	if r, ok := table.Lookup(20000); !ok || r.Service != (clusterview.ServiceRef{Namespace: "team", Name: "web"}) || r.Port != 80 {
		t.Errorf("port 20000 mid-move routes to %+v, %v; want team/web port 80", r, ok)
	}
	if r, ok := table.Lookup(20001); !ok || r.Service != (clusterview.ServiceRef{Namespace: "team", Name: "web-v2"}) {
		t.Errorf("port 20001 mid-move routes to %+v, %v; want team/web-v2", r, ok)
	}
	done := es.DeepCopy()
	done.Status.ResolverPorts = done.Status.ResolverPorts[:1]
	table.Upsert(done)
	if r, ok := table.Lookup(20000); ok {
		t.Errorf("port 20000 still routes to %+v after the move", r)
	}
}
