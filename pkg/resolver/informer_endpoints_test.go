package resolver

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	elastifake "github.com/elasti-dev/elasti/pkg/generated/clientset/versioned/fake"
	elastiinformers "github.com/elasti-dev/elasti/pkg/generated/informers/externalversions"
	"github.com/elasti-dev/elasti/pkg/names"
	"github.com/elasti-dev/elasti/pkg/nsbudget"
)

// serviceUID is the UID service gives a Service, and slice names as the
// owner of the slices it makes, as the EndpointSlice controller does.
func serviceUID(ns, name string) types.UID { return types.UID("uid-" + ns + "-" + name) }

// service is a Service with a selector, whose slices Kubernetes keeps.
func service(ns, name string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: serviceUID(ns, name)},
		Spec:       corev1.ServiceSpec{Ports: ports, Selector: map[string]string{"app": name}},
	}
}

func svcPort(name string, port int32, target intstr.IntOrString) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Port: port, TargetPort: target, Protocol: corev1.ProtocolTCP}
}

type sliceEP struct {
	ip                 string
	ready, terminating *bool
}

func slice(ns, name, svcName string, ports map[string]int32, eps ...sliceEP) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			Labels: map[string]string{
				discoveryv1.LabelServiceName: svcName,
				discoveryv1.LabelManagedBy:   "endpointslice-controller.k8s.io",
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Service", Name: svcName, UID: serviceUID(ns, svcName), Controller: ptr.To(true),
			}},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	for n, p := range ports {
		s.Ports = append(s.Ports, discoveryv1.EndpointPort{Name: ptr.To(n), Port: ptr.To(p)})
	}
	for _, e := range eps {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{e.ip},
			Conditions: discoveryv1.EndpointConditions{Ready: e.ready, Terminating: e.terminating},
		})
	}
	return s
}

func ep(ip string) sliceEP { return sliceEP{ip: ip} }

// managedBy sets s's managed-by label; "" removes it.
func managedBy(s *discoveryv1.EndpointSlice, by string) *discoveryv1.EndpointSlice {
	if by == "" {
		delete(s.Labels, discoveryv1.LabelManagedBy)
	} else {
		s.Labels[discoveryv1.LabelManagedBy] = by
	}
	return s
}

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
		got, err := indexByPodSlicesOf(managedBy(slice("team", "a", "web", nil, ep("10.244.0.1")), tc.by))
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("managed-by %q: indexed as %v, %v; want %v", tc.by, got, err, tc.want)
		}
	}
}

func TestResolveBackends(t *testing.T) {
	pubName := "web"
	twoPorts := service("team", pubName,
		svcPort("http", 80, intstr.FromString("web")),
		svcPort("metrics", 9090, intstr.FromInt32(9100)))
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
			slices: []*discoveryv1.EndpointSlice{slice("team", "a", pubName, twoSlicePorts, ep("10.244.0.1"), ep("10.244.0.2"))},
			want:   []string{"10.244.0.1:8080", "10.244.0.2:8080"},
		},
		{
			name:  "no host port prefers Service port 80 over the first port",
			proto: "http",
			pub: service("team", pubName,
				svcPort("metrics", 9090, intstr.FromInt32(9100)),
				svcPort("http", 80, intstr.FromString("web"))),
			slices: []*discoveryv1.EndpointSlice{slice("team", "a", pubName, twoSlicePorts, ep("10.244.0.1"))},
			want:   []string{"10.244.0.1:8080"},
		},
		{
			name: "no host port and no port 80 picks the first port",
			pub: service("team", pubName,
				svcPort("metrics", 9090, intstr.FromInt32(9100)),
				svcPort("http", 8000, intstr.FromString("web"))),
			slices: []*discoveryv1.EndpointSlice{slice("team", "a", pubName, twoSlicePorts, ep("10.244.0.1"))},
			want:   []string{"10.244.0.1:9100"},
		},
		{
			name: "host port selects the Service port by number",
			pub:  twoPorts, hostPort: "9090",
			slices: []*discoveryv1.EndpointSlice{slice("team", "a", pubName, twoSlicePorts, ep("10.244.0.1"))},
			want:   []string{"10.244.0.1:9100"},
		},
		{
			name:  "unknown host port falls back to the first port",
			proto: "http",
			pub:   twoPorts, hostPort: "1234",
			slices: []*discoveryv1.EndpointSlice{slice("team", "a", pubName, twoSlicePorts, ep("10.244.0.1"))},
			want:   []string{"10.244.0.1:8080"},
		},
		{
			name:   "single unnamed port",
			pub:    service("team", pubName, svcPort("", 80, intstr.FromInt32(8000))),
			slices: []*discoveryv1.EndpointSlice{slice("team", "a", pubName, map[string]int32{"": 8000}, ep("10.244.0.7"))},
			want:   []string{"10.244.0.7:8000"},
		},
		{
			name:  "multiple slices, duplicates, not ready and terminating excluded",
			proto: "http",
			pub:   twoPorts,
			slices: []*discoveryv1.EndpointSlice{
				slice("team", "a", pubName, twoSlicePorts, ep("10.244.0.3"), sliceEP{ip: "10.244.0.4", ready: ptr.To(false)}),
				slice("team", "b", pubName, twoSlicePorts, ep("10.244.0.1"), sliceEP{ip: "10.244.0.5", ready: ptr.To(true), terminating: ptr.To(true)}, ep("10.244.0.3")),
				slice("team", "c", pubName, twoSlicePorts, sliceEP{ip: "10.244.0.6", ready: ptr.To(true), terminating: ptr.To(false)}),
			},
			want: []string{"10.244.0.1:8080", "10.244.0.3:8080", "10.244.0.6:8080"},
		},
		{
			name:  "slice without the port is skipped",
			proto: "http",
			pub:   twoPorts,
			slices: []*discoveryv1.EndpointSlice{
				slice("team", "a", pubName, map[string]int32{"metrics": 9100}, ep("10.244.0.1")),
				slice("team", "b", pubName, twoSlicePorts, ep("10.244.0.2")),
			},
			want: []string{"10.244.0.2:8080"},
		},
		{
			name:  "FQDN slices are ignored",
			proto: "http",
			pub:   twoPorts,
			slices: func() []*discoveryv1.EndpointSlice {
				s := slice("team", "a", pubName, twoSlicePorts, ep("pod.example"))
				s.AddressType = discoveryv1.AddressTypeFQDN
				return []*discoveryv1.EndpointSlice{s}
			}(),
		},
		{
			name:  "IPv6",
			proto: "http",
			pub:   twoPorts,
			slices: func() []*discoveryv1.EndpointSlice {
				s := slice("team", "a", pubName, twoSlicePorts, ep("fd00::1"))
				s.AddressType = discoveryv1.AddressTypeIPv6
				return []*discoveryv1.EndpointSlice{s}
			}(),
			want: []string{"[fd00::1]:8080"},
		},
		{
			name:  "h2c appProtocol",
			proto: "kubernetes.io/h2c",
			pub: func() *corev1.Service {
				p := svcPort("grpc", 50051, intstr.FromInt32(50051))
				p.AppProtocol = ptr.To("kubernetes.io/h2c")
				return service("team", pubName, p)
			}(),
			slices: []*discoveryv1.EndpointSlice{slice("team", "a", pubName, map[string]int32{"grpc": 50051}, ep("10.244.0.1"))},
			want:   []string{"10.244.0.1:50051"},
			h2c:    true,
		},
		{
			name:   "a port named http declares HTTP",
			pub:    twoPorts,
			slices: []*discoveryv1.EndpointSlice{slice("team", "a", pubName, twoSlicePorts, ep("10.244.0.1"))},
			want:   []string{"10.244.0.1:8080"},
			proto:  "http",
		},
		{
			name:     "a port named http-<suffix> declares HTTP",
			pub:      service("team", pubName, svcPort("http-admin", 8081, intstr.FromInt32(8081))),
			slices:   []*discoveryv1.EndpointSlice{slice("team", "a", pubName, map[string]int32{"http-admin": 8081}, ep("10.244.0.1"))},
			hostPort: "8081",
			want:     []string{"10.244.0.1:8081"},
			proto:    "http",
		},
		{
			name:     "a name that only starts with http declares nothing",
			pub:      service("team", pubName, svcPort("https", 443, intstr.FromInt32(8443)), svcPort("httpbin", 81, intstr.FromInt32(8081))),
			slices:   []*discoveryv1.EndpointSlice{slice("team", "a", pubName, map[string]int32{"https": 8443, "httpbin": 8081}, ep("10.244.0.1"))},
			hostPort: "443",
			want:     []string{"10.244.0.1:8443"},
		},
		{
			name: "appProtocol wins over the name",
			pub: func() *corev1.Service {
				p := svcPort("http", 80, intstr.FromInt32(8080))
				p.AppProtocol = ptr.To("mysql")
				return service("team", pubName, p)
			}(),
			slices: []*discoveryv1.EndpointSlice{slice("team", "a", pubName, map[string]int32{"http": 8080}, ep("10.244.0.1"))},
			want:   []string{"10.244.0.1:8080"},
			proto:  "mysql",
		},
		{
			name:    "service without ports",
			pub:     service("team", pubName),
			wantErr: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resolveBackends(tc.pub, tc.slices, tc.hostPort)
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
	checkNoLeaks(t)
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	privName := names.PrivateService("web")
	client := fake.NewClientset(
		service("team", "web", svcPort("http", 80, intstr.FromString("web"))),
		slice("team", "web-abc", "web", map[string]int32{"http": 8080}, sliceEP{ip: "10.244.0.1", ready: ptr.To(false)}),
		// The operator's slice to the resolver must not count: forwarding
		// there would loop.
		managedBy(slice("team", names.ResolverSlice("web"), "web", map[string]int32{"http": 8012}, ep("10.244.9.9")), "elasti-operator.elasti.truefoundry.com"),
		// Nor may slices of the Service's name that the EndpointSlice
		// controller did not write: mirrored from manual Endpoints, or
		// unlabelled.
		managedBy(slice("team", "web-mirrored", "web", map[string]int32{"http": 8080}, ep("10.244.6.6")), "endpointslicemirroring-controller.k8s.io"),
		managedBy(slice("team", "web-unlabelled", "web", map[string]int32{"http": 8080}, ep("10.244.7.7")), ""),
		// Nor the private Service's: a wake needs no private Service.
		service("team", privName, svcPort("http", 80, intstr.FromString("web"))),
		slice("team", privName+"-abc", privName, map[string]int32{"http": 8080}, ep("10.244.8.8")),
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
	eventually(t, 5*time.Second, "handlers synced", e.HasSynced)

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
	s := slice("team", "web-abc", "web", map[string]int32{"http": 8080}, ep("10.244.0.1"), sliceEP{ip: "10.244.0.2", ready: ptr.To(false)})
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
	s2 := slice("team", "web-def", "web", map[string]int32{"http": 8080}, ep("10.244.0.3"))
	if _, err := client.DiscoveryV1().EndpointSlices("team").Create(ctx, s2, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "second slice", func() bool {
		tgt, _ := e.Lookup(svc, "")
		return slices.Equal(tgt.Addrs, []string{"10.244.0.1:8080", "10.244.0.3:8080"})
	})

	// Removing the first endpoint from its slice removes it from every
	// later answer.
	s = slice("team", "web-abc", "web", map[string]int32{"http": 8080})
	if _, err := client.DiscoveryV1().EndpointSlices("team").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "endpoint removal", func() bool {
		tgt, _ := e.Lookup(svc, "")
		return slices.Equal(tgt.Addrs, []string{"10.244.0.3:8080"})
	})

	// Deleting the last slice: no endpoint, and a waiter is woken by the
	// next slice.
	if err := client.DiscoveryV1().EndpointSlices("team").Delete(ctx, s2.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "slice deletion", func() bool {
		tgt, _ := e.Lookup(svc, "")
		return len(tgt.Addrs) == 0
	})
	changed, stop = e.Watch(svc)
	defer stop()
	s3 := slice("team", "web-ghi", "web", map[string]int32{"http": 8080}, ep("10.244.0.4"))
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
	eventually(t, 5*time.Second, "service deletion", func() bool {
		_, err := e.Lookup(svc, "")
		return errors.Is(err, ErrServiceNotFound)
	})
	cancel()
	factory.Shutdown()
}

// resolverSlice is a slice as the operator writes it for svcName: its
// managed-by value and an ElastiService as its controller.
func resolverSlice(ns, svcName string) *discoveryv1.EndpointSlice {
	s := managedBy(slice(ns, names.ResolverSlice(svcName), svcName, map[string]int32{"http": 8012}, ep("10.244.9.9")), names.ResolverSliceManagedBy)
	s.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: elastiv1alpha1.SchemeGroupVersion.String(), Kind: "ElastiService", Name: svcName, UID: "es-uid", Controller: ptr.To(true),
	}}
	return s
}

// elastiServiceFor is the ElastiService whose resolver slice resolverSlice
// makes for svcName: of that name, with its UID, naming svcName.
func elastiServiceFor(ns, svcName string) *elastiv1alpha1.ElastiService {
	return &elastiv1alpha1.ElastiService{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svcName, UID: "es-uid"},
		Spec:       elastiv1alpha1.ElastiServiceSpec{Service: svcName},
	}
}

// startEndpoints runs an InformerEndpoints over client until the test
// ends, with the command's cache transform, vouching for resolver slices
// by the ElastiServices ess as the command's NamedIndex does.
func startEndpoints(t testing.TB, client *fake.Clientset, ess ...*elastiv1alpha1.ElastiService) *InformerEndpoints {
	t.Helper()
	e, _ := startEndpointsOf(t, client, nil, ess...)
	return e
}

// startEndpointsOf is startEndpoints for a resolver that serves namespaces
// (all when empty); it also returns the NamedIndex that vouches.
func startEndpointsOf(t testing.TB, client *fake.Clientset, namespaces []string, ess ...*elastiv1alpha1.ElastiService) (*InformerEndpoints, *NamedIndex) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	var objs []runtime.Object
	for _, es := range ess {
		objs = append(objs, es)
	}
	elastiClient := elastifake.NewSimpleClientset(objs...)
	budget := NewSpecBudget(nsbudget.Limits{}, namespaces)
	elastiFactory := elastiinformers.NewSharedInformerFactoryWithOptions(elastiClient, 0, elastiinformers.WithTransform(budget.Transform))
	named, err := NewNamedIndex(elastiFactory.Elasti().V1alpha1().ElastiServices())
	if err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(TrimForCache))
	e, err := NewInformerEndpoints(ctx, factory.Core().V1().Services(), factory.Discovery().V1().EndpointSlices(), named, DefaultFrontDrain)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	elastiFactory.Start(ctx.Done())
	t.Cleanup(func() { cancel(); factory.Shutdown(); elastiFactory.Shutdown() })
	factory.WaitForCacheSync(ctx.Done())
	elastiFactory.WaitForCacheSync(ctx.Done())
	eventually(t, 5*time.Second, "handlers synced", e.HasSynced)
	return e, named
}

// The resolver is in front of a Service while the operator's resolver
// slice for it exists, and for the drain after it goes, so that what
// kube-proxy and ingress controllers still send it after the switch to
// serve reaches the pods. A slice that only carries the operator's
// managed-by label, with no ElastiService as its controller, fronts
// nothing.
func TestFrontFollowsResolverSlicesAndDrains(t *testing.T) {
	checkNoLeaks(t)
	forged := managedBy(slice("team", "forged", "other", map[string]int32{"http": 8012}, ep("10.244.9.9")), names.ResolverSliceManagedBy)
	client := fake.NewClientset(
		service("team", "web", svcPort("http", 80, intstr.FromInt32(8080))),
		service("team", "other", svcPort("http", 80, intstr.FromInt32(8080))),
		forged,
	)
	e := startEndpoints(t, client, elastiServiceFor("team", "web"))
	web, other := ServiceRef{"team", "web"}, ServiceRef{"team", "other"}
	if e.Front(other) {
		t.Fatal("a hand-made slice with the operator's managed-by label and no ElastiService controller put the resolver in front")
	}
	changed, stop := e.Watch(web)
	defer stop()
	if e.Front(web) {
		t.Fatal("in front before any resolver slice")
	}

	ctx := t.Context()
	if _, err := client.DiscoveryV1().EndpointSlices("team").Create(ctx, resolverSlice("team", "web"), metav1.CreateOptions{}); err != nil {
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
	e.drains = newDrains(DefaultFrontDrain, clk)
	if err := client.DiscoveryV1().EndpointSlices("team").Delete(ctx, names.ResolverSlice("web"), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the drain to start", func() bool { return e.drains.draining(web) })
	if !e.Front(web) {
		t.Fatal("not in front right after the switch to serve: the drain must still forward")
	}
	clk.Step(DefaultFrontDrain - time.Nanosecond)
	if !e.Front(web) {
		t.Fatal("not in front just before the drain ends")
	}
	clk.Step(time.Nanosecond)
	if e.Front(web) {
		t.Fatalf("still in front %v after the resolver slice went", DefaultFrontDrain)
	}
}

// Only the slices the Service itself controls list its pods: a slice with
// the EndpointSlice controller's labels but another owner, which anyone
// who may write EndpointSlices in the namespace can make, is ignored, so
// it cannot point the resolver at addresses of the writer's choosing.
func TestSlicesOfAnotherOwnerAreIgnored(t *testing.T) {
	checkNoLeaks(t)
	forged := slice("team", "web-forged", "web", map[string]int32{"http": 8080}, ep("10.244.6.6"))
	forged.OwnerReferences[0].UID = "someone-else"
	unowned := slice("team", "web-unowned", "web", map[string]int32{"http": 8080}, ep("10.244.7.7"))
	unowned.OwnerReferences = nil
	client := fake.NewClientset(
		service("team", "web", svcPort("http", 80, intstr.FromInt32(8080))),
		slice("team", "web-abc", "web", map[string]int32{"http": 8080}, ep("10.244.0.1")),
		forged, unowned,
	)
	e := startEndpoints(t, client)
	got, err := e.Lookup(ServiceRef{"team", "web"}, "80")
	if err != nil || !slices.Equal(got.Addrs, []string{"10.244.0.1:8080"}) {
		t.Fatalf("Lookup = %v, %v; want only the Service's own slice's endpoint", got.Addrs, err)
	}
}
