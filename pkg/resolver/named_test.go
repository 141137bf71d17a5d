package resolver

import (
	"testing"

	v1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
	"github.com/elasti-dev/elasti/pkg/resolver/internal/resolvertest"
)

// During a move of spec.service the old Service is still named: the
// operator keeps its resolver ports in status until the move completes,
// and a request for it must be held and forwarded, not answered 404. Once
// status lets go of it, it is no longer named.
func TestNamedFollowsSpecServiceAndStatusResolverPorts(t *testing.T) {
	f, idx := clusterview.NewMemoryNamedIndex()
	oldSvc, newSvc := clusterview.ServiceRef{Namespace: "team", Name: "web"}, clusterview.ServiceRef{Namespace: "team", Name: "web-v2"}

	es := resolvertest.ElastiService("team", "es", "web-v2", 2)
	es.Status.ResolverPorts = []v1.ResolverPort{
		{Service: "web-v2", Name: "http", Port: 80, ResolverPort: 20001},
		{Service: "web", Name: "http", Port: 80, ResolverPort: 20000},
		{Service: "web", Name: "grpc", Port: 9000, ResolverPort: 20002},
	}
	if err := idx.Add(es); err != nil {
		t.Fatal(err)
	}
	for svc, want := range map[clusterview.ServiceRef]bool{oldSvc: true, newSvc: true, {Namespace: "team", Name: "other"}: false, {Namespace: "elsewhere", Name: "web"}: false} {
		if got := f.Named(svc); got != want {
			t.Errorf("mid-move: Named(%s) = %v, want %v", svc, got, want)
		}
	}

	done := es.DeepCopy()
	done.Status.ResolverPorts = done.Status.ResolverPorts[:1]
	if err := idx.Update(done); err != nil {
		t.Fatal(err)
	}
	if f.Named(oldSvc) || !f.Named(newSvc) {
		t.Errorf("after the move: Named(old) = %v, Named(new) = %v; want false, true", f.Named(oldSvc), f.Named(newSvc))
	}
}
