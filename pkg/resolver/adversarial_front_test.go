package resolver

import (
	"testing"

	"github.com/elasti-dev/elasti/pkg/resolver/clusterview/clusterviewtest"
	"github.com/elasti-dev/elasti/pkg/resolver/internal/resolvertest"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
)

// Tenant safety (issue 38, hole 3): a resolver slice is what puts a
// Service behind the resolver, and its labels and owner references are its
// writer's to set. The resolver fronts a Service only for a slice whose
// controller is an ElastiService of the Service's own namespace that it
// has cached whole, with that name and UID, in a namespace it serves
// (--watch-namespace).
// Anything else fronts nothing: no hold, no wake, no probe, no pod read.
func TestOnlyAVouchedResolverSliceFrontsAService(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	cases := []struct {
		name   string
		ns     string
		svc    string
		change func(*metav1.OwnerReference)
		front  bool
	}{
		{"the ElastiService's own slice", "team", "web", func(*metav1.OwnerReference) {}, true},
		{"an ElastiService nobody made", "team", "ghost", func(r *metav1.OwnerReference) { r.Name = "ghost" }, false},
		{"the right name, another UID", "team", "web2", func(r *metav1.OwnerReference) { r.UID = "forged-uid" }, false},
		// A move of spec.service keeps the old Service's slice under the
		// same ElastiService until a pod serves it; the writer of such a
		// slice aims only at its own namespace's Services.
		{"the namespace's ElastiService of another Service", "team", "db", func(r *metav1.OwnerReference) { r.Name = "web" }, true},
		{"an ElastiService of another namespace", "team", "api", func(r *metav1.OwnerReference) { r.Name = "other" }, false},
		{"the kind in another case", "team", "web3", func(r *metav1.OwnerReference) { r.Kind = "elastiservice" }, false},
		{"another API group", "team", "web4", func(r *metav1.OwnerReference) { r.APIVersion = "elasti.example.com/v1alpha1" }, false},
		{"not the controller", "team", "web5", func(r *metav1.OwnerReference) { r.Controller = ptr.To(false) }, false},
		// A namespace the resolver does not serve, with everything else
		// genuine: its ElastiService is cached without its spec.
		{"a namespace outside --watch-namespace", "outside", "web", func(*metav1.OwnerReference) {}, false},
		{"a namespace whose name only differs in case", "Team", "web", func(*metav1.OwnerReference) {}, false},
	}
	client := fake.NewClientset()
	var ess []*elastiv1alpha1.ElastiService
	for _, tc := range cases {
		if _, err := client.CoreV1().Services(tc.ns).Create(t.Context(), resolvertest.Service(tc.ns, tc.svc, resolvertest.SvcPort("http", 80, intstr.FromInt32(8080))), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		s := resolvertest.ResolverSlice(tc.ns, tc.svc)
		tc.change(&s.OwnerReferences[0])
		if _, err := client.DiscoveryV1().EndpointSlices(tc.ns).Create(t.Context(), s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if tc.name != "an ElastiService nobody made" && tc.name != "the namespace's ElastiService of another Service" && tc.name != "an ElastiService of another namespace" {
			ess = append(ess, resolvertest.ElastiServiceFor(tc.ns, tc.svc))
		}
	}
	// The ElastiService "other", in a namespace the resolver serves, with
	// the UID the forged slice of team/api names.
	ess = append(ess, resolvertest.ElastiServiceFor("elsewhere", "other"))
	e, named := clusterviewtest.StartEndpointsOf(t, client, []string{"team", "elsewhere"}, ess...)
	for _, tc := range cases {
		svc := clusterview.ServiceRef{Namespace: tc.ns, Name: tc.svc}
		if got := e.Front(svc); got != tc.front {
			t.Errorf("%s: in front of %s = %v, want %v", tc.name, svc, got, tc.front)
		}
	}
	// The namespaces outside the list name nothing either, so a request
	// for their Services is answered 404 at once, without a grace.
	for _, svc := range []clusterview.ServiceRef{{Namespace: "outside", Name: "web"}, {Namespace: "Team", Name: "web"}} {
		if named.Named(svc) {
			t.Errorf("%s: named by an ElastiService of a namespace the resolver does not serve", svc)
		}
	}
	if !named.Named(clusterview.ServiceRef{Namespace: "team", Name: "web"}) {
		t.Error("team/web: not named by its own ElastiService")
	}
}
