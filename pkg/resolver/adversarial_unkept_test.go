package resolver

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview/clusterviewtest"
	"github.com/elasti-dev/elasti/pkg/resolver/internal/resolvertest"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
)

// A fronted Service whose selector goes, or that becomes ExternalName, is
// no longer kept by the EndpointSlice controller: its old slice stays,
// with its genuine owner reference and managed-by label, and anyone who
// may write EndpointSlices in the namespace (a right the namespace's
// "edit" role does not grant by default, but one a team may hold) can
// point it at another team's pod, a node or the apiserver. The resolver
// must forward there neither at once nor after waiting; each variant's
// forged address is one the selector-kept Service next to it would be
// served from, so only the Service's spec tells them apart.
func TestUnkeptServiceSlicesAreNeverForwardedTo(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	port := resolvertest.SvcPort("http", 80, intstr.FromInt32(8080))
	variants := map[string]func(*corev1.Service){
		"selector removed": func(s *corev1.Service) { s.Spec.Selector = nil },
		"selector emptied": func(s *corev1.Service) { s.Spec.Selector = map[string]string{} },
		"ExternalName w/ selector": func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeExternalName
			s.Spec.ExternalName = "example.com"
		},
		"ExternalName, no selector": func(s *corev1.Service) {
			s.Spec.Type, s.Spec.ExternalName, s.Spec.Selector = corev1.ServiceTypeExternalName, "example.com", nil
		},
	}
	for name, change := range variants {
		t.Run(name, func(t *testing.T) {
			web := resolvertest.Service("team", "web", port)
			client := fake.NewClientset(web, resolvertest.Service("team", "kept", port),
				resolvertest.Slice("team", "web-abc", "web", map[string]int32{"http": 8080}, resolvertest.EP("10.244.0.1")),
				resolvertest.Slice("team", "kept-abc", "kept", map[string]int32{"http": 8080}, resolvertest.EP("10.244.0.2")),
				resolvertest.ResolverSlice("team", "web"))
			e := clusterviewtest.StartEndpoints(t, client, resolvertest.ElastiServiceFor("team", "web"))
			svc := clusterview.ServiceRef{Namespace: "team", Name: "web"}
			if got, err := e.Lookup(svc, "80"); err != nil || !slices.Equal(got.Addrs, []string{"10.244.0.1:8080"}) {
				t.Fatalf("before the change: Lookup = %v, %v", got.Addrs, err)
			}

			// The change, then the forgery: the slice keeps its owner UID
			// and the controller's label, only the address is the attacker's.
			ctx := t.Context()
			changed := web.DeepCopy()
			change(changed)
			if _, err := client.CoreV1().Services("team").Update(ctx, changed, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			forged := resolvertest.Slice("team", "web-abc", "web", map[string]int32{"http": 6443}, resolvertest.EP("10.96.0.1"))
			if _, err := client.DiscoveryV1().EndpointSlices("team").Update(ctx, forged, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			resolvertest.Eventually(t, 5*time.Second, "the cache to hold the change", func() bool {
				_, err := e.Lookup(svc, "80")
				return errors.Is(err, clusterview.ErrServiceNotSelectable)
			})
			got, err := e.Lookup(svc, "80")
			if len(got.Addrs) != 0 || !errors.Is(err, clusterview.ErrServiceNotSelectable) {
				t.Fatalf("after the change: Lookup = %v, %v; want no address, ErrServiceNotSelectable", got.Addrs, err)
			}
			// The resolver is still in front (its slice is there), which is
			// what would let a request through: the Service's spec alone
			// must refuse it.
			if !e.Front(svc) {
				t.Fatal("the resolver slice no longer fronts the Service")
			}
			if got, err := e.Lookup(clusterview.ServiceRef{Namespace: "team", Name: "kept"}, "80"); err != nil || !slices.Equal(got.Addrs, []string{"10.244.0.2:8080"}) {
				t.Fatalf("a Service next to it, still kept: Lookup = %v, %v", got.Addrs, err)
			}
		})
	}
}

// Through the resolver, a request for a fronted Service whose endpoints
// Kubernetes does not keep is answered 503 at once: it is neither held
// (a wake could not make it forwardable) nor forwarded.
func TestRequestForUnkeptServiceIsRefused(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	web := resolvertest.Service("team", "web", resolvertest.SvcPort("http", 80, intstr.FromInt32(8080)))
	web.Spec.Selector = nil
	client := fake.NewClientset(web,
		resolvertest.Slice("team", "web-abc", "web", map[string]int32{"http": 8080}, resolvertest.EP("10.244.0.1")),
		resolvertest.ResolverSlice("team", "web"))
	eps := clusterviewtest.StartEndpoints(t, client, resolvertest.ElastiServiceFor("team", "web"))
	env := newEnv(t, testConfig(), func(o *Options) { o.Endpoints = eps })
	hit := make(chan struct{}, 1)
	env.backend(t, "10.244.0.1:8080", http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hit <- struct{}{} }))

	ctx, cancel := context.WithTimeout(t.Context(), testConfig().RequestTimeout/2)
	defer cancel()
	req := env.request(t, ctx, http.MethodGet, "/", nil)
	resp, err := newClient(t).Do(req)
	if err != nil {
		t.Fatalf("request: %v (held instead of refused?)", err)
	}
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "no selector or is of type ExternalName") {
		t.Fatalf("answer %d %q, want 503 naming the reason", resp.StatusCode, body)
	}
	select {
	case <-hit:
		t.Fatal("the request reached the slice's address")
	default:
	}
	if n := env.op.posts.Load(); n != 0 {
		t.Fatalf("%d wakes for a Service the resolver cannot forward to", n)
	}
}
