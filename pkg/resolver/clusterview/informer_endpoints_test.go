package clusterview

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	elastifake "github.com/elasti-dev/elasti/pkg/generated/clientset/versioned/fake"
	elastiinformers "github.com/elasti-dev/elasti/pkg/generated/informers/externalversions"
	"github.com/elasti-dev/elasti/pkg/names"
	"github.com/elasti-dev/elasti/pkg/resolver/internal/resolvertest"
)

func TestOnlyControllerManagedSlicesAreIndexed(t *testing.T) {
	for _, tc := range []struct {
		by   string
		want []string
	}{
		{"endpointslice-controller.k8s.io", []string{"team/web"}},
		{"endpointslicemirroring-controller.k8s.io", nil},
		// The operator's slice to the resolver: forwarding there would loop.
		{"elasti-operator.elasti.truefoundry.com", nil},
		{"someone-else", nil},
		{"", nil},
	} {
		got, err := indexByPodSlicesOf(resolvertest.ManagedBy(resolvertest.Slice("team", "a", "web", nil, resolvertest.EP("10.244.0.1")), tc.by))
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("managed-by %q: indexed as %v, %v; want %v", tc.by, got, err, tc.want)
		}
	}
}

func TestResolveBackends(t *testing.T) {
	pubName := "web"
	twoPorts := resolvertest.Service("team", pubName,
		resolvertest.SvcPort("http", 80, intstr.FromString("web")),
		resolvertest.SvcPort("metrics", 9090, intstr.FromInt32(9100)))
	// The pod's named port "web" is 8080: the EndpointSlice controller put
	// that number on the slice port named after the Service port.
	twoSlicePorts := map[string]int32{"http": 8080, "metrics": 9100}

	tests := []struct {
		name     string
		pub      *corev1.Service
		slices   []*discoveryv1.EndpointSlice
		hostPort string
		want     []string
		h2c      bool
		proto    string // the protocol the port declares
		wantErr  bool
	}{
		{
			name:   "no host port picks the first port, named targetPort resolved by the slice",
			proto:  "http",
			pub:    twoPorts,
			slices: []*discoveryv1.EndpointSlice{resolvertest.Slice("team", "a", pubName, twoSlicePorts, resolvertest.EP("10.244.0.1"), resolvertest.EP("10.244.0.2"))},
			want:   []string{"10.244.0.1:8080", "10.244.0.2:8080"},
		},
		{
			name:  "no host port prefers resolvertest.Service port 80 over the first port",
			proto: "http",
			pub: resolvertest.Service("team", pubName,
				resolvertest.SvcPort("metrics", 9090, intstr.FromInt32(9100)),
				resolvertest.SvcPort("http", 80, intstr.FromString("web"))),
			slices: []*discoveryv1.EndpointSlice{resolvertest.Slice("team", "a", pubName, twoSlicePorts, resolvertest.EP("10.244.0.1"))},
			want:   []string{"10.244.0.1:8080"},
		},
		{
			name: "no host port and no port 80 picks the first port",
			pub: resolvertest.Service("team", pubName,
				resolvertest.SvcPort("metrics", 9090, intstr.FromInt32(9100)),
				resolvertest.SvcPort("http", 8000, intstr.FromString("web"))),
			slices: []*discoveryv1.EndpointSlice{resolvertest.Slice("team", "a", pubName, twoSlicePorts, resolvertest.EP("10.244.0.1"))},
			want:   []string{"10.244.0.1:9100"},
		},
		{
			name: "host port selects the resolvertest.Service port by number",
			pub:  twoPorts, hostPort: "9090",
			slices: []*discoveryv1.EndpointSlice{resolvertest.Slice("team", "a", pubName, twoSlicePorts, resolvertest.EP("10.244.0.1"))},
			want:   []string{"10.244.0.1:9100"},
		},
		{
			name:  "unknown host port falls back to the first port",
			proto: "http",
			pub:   twoPorts, hostPort: "1234",
			slices: []*discoveryv1.EndpointSlice{resolvertest.Slice("team", "a", pubName, twoSlicePorts, resolvertest.EP("10.244.0.1"))},
			want:   []string{"10.244.0.1:8080"},
		},
		{
			name:   "single unnamed port",
			pub:    resolvertest.Service("team", pubName, resolvertest.SvcPort("", 80, intstr.FromInt32(8000))),
			slices: []*discoveryv1.EndpointSlice{resolvertest.Slice("team", "a", pubName, map[string]int32{"": 8000}, resolvertest.EP("10.244.0.7"))},
			want:   []string{"10.244.0.7:8000"},
		},
		{
			name:  "multiple slices, duplicates, not ready and terminating excluded",
			proto: "http",
			pub:   twoPorts,
			slices: []*discoveryv1.EndpointSlice{
				resolvertest.Slice("team", "a", pubName, twoSlicePorts, resolvertest.EP("10.244.0.3"), resolvertest.SliceEP{IP: "10.244.0.4", Ready: ptr.To(false)}),
				resolvertest.Slice("team", "b", pubName, twoSlicePorts, resolvertest.EP("10.244.0.1"), resolvertest.SliceEP{IP: "10.244.0.5", Ready: ptr.To(true), Terminating: ptr.To(true)}, resolvertest.EP("10.244.0.3")),
				resolvertest.Slice("team", "c", pubName, twoSlicePorts, resolvertest.SliceEP{IP: "10.244.0.6", Ready: ptr.To(true), Terminating: ptr.To(false)}),
			},
			want: []string{"10.244.0.1:8080", "10.244.0.3:8080", "10.244.0.6:8080"},
		},
		{
			name:  "slice without the port is skipped",
			proto: "http",
			pub:   twoPorts,
			slices: []*discoveryv1.EndpointSlice{
				resolvertest.Slice("team", "a", pubName, map[string]int32{"metrics": 9100}, resolvertest.EP("10.244.0.1")),
				resolvertest.Slice("team", "b", pubName, twoSlicePorts, resolvertest.EP("10.244.0.2")),
			},
			want: []string{"10.244.0.2:8080"},
		},
		{
			name:  "FQDN slices are ignored",
			proto: "http",
			pub:   twoPorts,
			slices: func() []*discoveryv1.EndpointSlice {
				s := resolvertest.Slice("team", "a", pubName, twoSlicePorts, resolvertest.EP("pod.example"))
				s.AddressType = discoveryv1.AddressTypeFQDN
				return []*discoveryv1.EndpointSlice{s}
			}(),
		},
		{
			name:  "IPv6",
			proto: "http",
			pub:   twoPorts,
			slices: func() []*discoveryv1.EndpointSlice {
				s := resolvertest.Slice("team", "a", pubName, twoSlicePorts, resolvertest.EP("fd00::1"))
				s.AddressType = discoveryv1.AddressTypeIPv6
				return []*discoveryv1.EndpointSlice{s}
			}(),
			want: []string{"[fd00::1]:8080"},
		},
		{
			name:  "h2c appProtocol",
			proto: "kubernetes.io/h2c",
			pub: func() *corev1.Service {
				p := resolvertest.SvcPort("grpc", 50051, intstr.FromInt32(50051))
				p.AppProtocol = ptr.To("kubernetes.io/h2c")
				return resolvertest.Service("team", pubName, p)
			}(),
			slices: []*discoveryv1.EndpointSlice{resolvertest.Slice("team", "a", pubName, map[string]int32{"grpc": 50051}, resolvertest.EP("10.244.0.1"))},
			want:   []string{"10.244.0.1:50051"},
			h2c:    true,
		},
		{
			name:   "a port named http declares HTTP",
			pub:    twoPorts,
			slices: []*discoveryv1.EndpointSlice{resolvertest.Slice("team", "a", pubName, twoSlicePorts, resolvertest.EP("10.244.0.1"))},
			want:   []string{"10.244.0.1:8080"},
			proto:  "http",
		},
		{
			name:     "a port named http-<suffix> declares HTTP",
			pub:      resolvertest.Service("team", pubName, resolvertest.SvcPort("http-admin", 8081, intstr.FromInt32(8081))),
			slices:   []*discoveryv1.EndpointSlice{resolvertest.Slice("team", "a", pubName, map[string]int32{"http-admin": 8081}, resolvertest.EP("10.244.0.1"))},
			hostPort: "8081",
			want:     []string{"10.244.0.1:8081"},
			proto:    "http",
		},
		{
			name:     "a name that only starts with http declares nothing",
			pub:      resolvertest.Service("team", pubName, resolvertest.SvcPort("https", 443, intstr.FromInt32(8443)), resolvertest.SvcPort("httpbin", 81, intstr.FromInt32(8081))),
			slices:   []*discoveryv1.EndpointSlice{resolvertest.Slice("team", "a", pubName, map[string]int32{"https": 8443, "httpbin": 8081}, resolvertest.EP("10.244.0.1"))},
			hostPort: "443",
			want:     []string{"10.244.0.1:8443"},
		},
		{
			name: "appProtocol wins over the name",
			pub: func() *corev1.Service {
				p := resolvertest.SvcPort("http", 80, intstr.FromInt32(8080))
				p.AppProtocol = ptr.To("mysql")
				return resolvertest.Service("team", pubName, p)
			}(),
			slices: []*discoveryv1.EndpointSlice{resolvertest.Slice("team", "a", pubName, map[string]int32{"http": 8080}, resolvertest.EP("10.244.0.1"))},
			want:   []string{"10.244.0.1:8080"},
			proto:  "mysql",
		},
		{
			name:    "service without ports",
			pub:     resolvertest.Service("team", pubName),
			wantErr: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ResolveBackends(tc.pub, tc.slices, tc.hostPort)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("want an error, got %+v", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Addrs, tc.want) {
				t.Errorf("addrs = %v, want %v", got.Addrs, tc.want)
			}
			if got.H2C != tc.h2c {
				t.Errorf("h2c = %v, want %v", got.H2C, tc.h2c)
			}
			if got.AppProtocol != tc.proto {
				t.Errorf("declared protocol = %q, want %q", got.AppProtocol, tc.proto)
			}
		})
	}
}

func TestInformerEndpoints(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	privName := names.PrivateService("web")
	client := fake.NewClientset(
		resolvertest.Service("team", "web", resolvertest.SvcPort("http", 80, intstr.FromString("web"))),
		resolvertest.Slice("team", "web-abc", "web", map[string]int32{"http": 8080}, resolvertest.SliceEP{IP: "10.244.0.1", Ready: ptr.To(false)}),
		// The operator's slice to the resolver must not count: forwarding
		// there would loop.
		resolvertest.ManagedBy(resolvertest.Slice("team", names.ResolverSlice("web"), "web", map[string]int32{"http": 8012}, resolvertest.EP("10.244.9.9")), "elasti-operator.elasti.truefoundry.com"),
		// Nor may slices of the Service's name that the EndpointSlice
		// controller did not write: mirrored from manual Endpoints, or
		// unlabelled.
		resolvertest.ManagedBy(resolvertest.Slice("team", "web-mirrored", "web", map[string]int32{"http": 8080}, resolvertest.EP("10.244.6.6")), "endpointslicemirroring-controller.k8s.io"),
		resolvertest.ManagedBy(resolvertest.Slice("team", "web-unlabelled", "web", map[string]int32{"http": 8080}, resolvertest.EP("10.244.7.7")), ""),
		// Nor the private Service's: a wake needs no private Service.
		resolvertest.Service("team", privName, resolvertest.SvcPort("http", 80, intstr.FromString("web"))),
		resolvertest.Slice("team", privName+"-abc", privName, map[string]int32{"http": 8080}, resolvertest.EP("10.244.8.8")),
	)
	factory := informers.NewSharedInformerFactory(client, 0)
	named, err := NewNamedIndex(elastiinformers.NewSharedInformerFactory(elastifake.NewSimpleClientset(), 0).Elasti().V1alpha1().ElastiServices())
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewInformerEndpoints(ctx, factory.Core().V1().Services(), factory.Discovery().V1().EndpointSlices(), named, DefaultFrontDrain)
	if err != nil {
		t.Fatal(err)
	}
	if e.HasSynced() {
		t.Fatal("HasSynced before the informers started")
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	defer cancel()
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("cache for %v did not sync", typ)
		}
	}
	resolvertest.Eventually(t, 5*time.Second, "handlers synced", e.HasSynced)

	if _, err := e.Lookup(ServiceRef{"team", "nope"}, ""); !errors.Is(err, ErrServiceNotFound) {
		t.Fatalf("unknown service: err = %v, want ErrServiceNotFound", err)
	}

	svc := ServiceRef{"team", "web"}
	changed, stop := e.Watch(svc)
	defer stop()
	tgt, err := e.Lookup(svc, "80")
	if err != nil {
		t.Fatal(err)
	}
	if len(tgt.Addrs) != 0 {
		t.Fatalf("not-ready endpoint: got %+v, want no addresses", tgt)
	}

	// The endpoint turns Ready: the waiter wakes at once, with no polling.
	s := resolvertest.Slice("team", "web-abc", "web", map[string]int32{"http": 8080}, resolvertest.EP("10.244.0.1"), resolvertest.SliceEP{IP: "10.244.0.2", Ready: ptr.To(false)})
	if _, err := client.DiscoveryV1().EndpointSlices("team").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("the watch was not woken after the endpoint became Ready")
	}
	stop()
	if n := e.b.watching(); n != 0 {
		t.Fatalf("%d keys watched after the only watch ended", n)
	}
	tgt, err = e.Lookup(svc, "80")
	if err != nil || !slices.Equal(tgt.Addrs, []string{"10.244.0.1:8080"}) {
		t.Fatalf("after Ready: got %+v, %v", tgt, err)
	}

	// A second slice adds an endpoint.
	s2 := resolvertest.Slice("team", "web-def", "web", map[string]int32{"http": 8080}, resolvertest.EP("10.244.0.3"))
	if _, err := client.DiscoveryV1().EndpointSlices("team").Create(ctx, s2, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	resolvertest.Eventually(t, 5*time.Second, "second slice", func() bool {
		tgt, _ := e.Lookup(svc, "")
		return slices.Equal(tgt.Addrs, []string{"10.244.0.1:8080", "10.244.0.3:8080"})
	})

	// Removing the first endpoint from its slice removes it from every
	// later answer.
	s = resolvertest.Slice("team", "web-abc", "web", map[string]int32{"http": 8080})
	if _, err := client.DiscoveryV1().EndpointSlices("team").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	resolvertest.Eventually(t, 5*time.Second, "endpoint removal", func() bool {
		tgt, _ := e.Lookup(svc, "")
		return slices.Equal(tgt.Addrs, []string{"10.244.0.3:8080"})
	})

	// Deleting the last slice: no endpoint, and a waiter is woken by the
	// next slice.
	if err := client.DiscoveryV1().EndpointSlices("team").Delete(ctx, s2.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	resolvertest.Eventually(t, 5*time.Second, "slice deletion", func() bool {
		tgt, _ := e.Lookup(svc, "")
		return len(tgt.Addrs) == 0
	})
	changed, stop = e.Watch(svc)
	defer stop()
	s3 := resolvertest.Slice("team", "web-ghi", "web", map[string]int32{"http": 8080}, resolvertest.EP("10.244.0.4"))
	if _, err := client.DiscoveryV1().EndpointSlices("team").Create(ctx, s3, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("the watch was not woken by a new slice")
	}

	// Deleting the public Service wakes waiters too; then it is unknown.
	if err := client.CoreV1().Services("team").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	resolvertest.Eventually(t, 5*time.Second, "service deletion", func() bool {
		_, err := e.Lookup(svc, "")
		return errors.Is(err, ErrServiceNotFound)
	})
	cancel()
	factory.Shutdown()
}
