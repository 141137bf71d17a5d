package controller

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/directory"
	"github.com/elasti-dev/elasti/pkg/names"
	"github.com/elasti-dev/elasti/pkg/portalloc"
)

// declaringResolverSlice is a resolver slice as the EndpointSlice controller
// publishes it for elasti's resolver pods: they have the named container
// port, so the slice lists the resolver Service's per-port-routing port.
func declaringResolverSlice(name string, endpoints ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	s := newResolverSlice(name, discoveryv1.AddressTypeIPv4, endpoints...)
	s.Ports = append(s.Ports, discoveryv1.EndpointPort{
		Name: ptr.To(ResolverPerPortRoutingPort), Port: ptr.To[int32](8014), Protocol: ptr.To(corev1.ProtocolTCP),
	})
	return s
}

// withRoutes points the slice's ports at their own resolver ports, routes
// mapping Service port → resolver port, with the Service port's
// appProtocol; written from the spec, not from the controller's code.
func withRoutes(slice *discoveryv1.EndpointSlice, public *corev1.Service, routes map[int32]int32) *discoveryv1.EndpointSlice {
	i := 0
	for _, p := range public.Spec.Ports {
		if p.Protocol != "" && p.Protocol != corev1.ProtocolTCP {
			continue
		}
		if rp, ok := routes[p.Port]; ok {
			slice.Ports[i].Port = ptr.To(rp)
			slice.Ports[i].AppProtocol = p.AppProtocol
		}
		i++
	}
	return slice
}

// slicePorts reads the resolver slice's ports from the fake API server.
func slicePorts(t *testing.T, f *fixture, service string) []int32 {
	t.Helper()
	s, err := f.kubeClient.DiscoveryV1().EndpointSlices(testNamespace).Get(context.Background(), names.ResolverSlice(service), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("resolver slice of %s: %v", service, err)
	}
	var out []int32
	for _, p := range s.Ports {
		out = append(out, ptr.Deref(p.Port, 0))
	}
	return out
}

// statusOf reads an ElastiService from the fake API server.
func statusOf(t *testing.T, f *fixture, name string) *elastiv1alpha1.ElastiService {
	t.Helper()
	es, err := f.elastiClient.ElastiV1alpha1().ElastiServices(testNamespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// deliver puts what the API server holds for name into the informer cache,
// with a resourceVersion our writes did not supersede, as the informer
// would deliver our own status write.
func deliver(t *testing.T, f *fixture, name string) *elastiv1alpha1.ElastiService {
	t.Helper()
	es := statusOf(t, f, name)
	es.ResourceVersion += "-delivered"
	if err := f.esIndexer.Update(es); err != nil {
		t.Fatal(err)
	}
	return es
}

func portsCondition(es *elastiv1alpha1.ElastiService) *metav1.Condition {
	return meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionResolverPortsAssigned)
}

// A new ElastiService's ports are recorded in the status write of its first
// sync; its slice moves to them only once that write comes back, so no
// traffic reaches a port before a resolver reading status can know of it.
func TestPerPortRoutingOnceStatusRecordsThePorts(t *testing.T) {
	f := newFixture(t)
	es := proxySeed(f)
	public := f.service("web")
	public.Spec.Ports[0].AppProtocol = ptr.To("kubernetes.io/h2c")
	f.resolverSlices = []*discoveryv1.EndpointSlice{declaringResolverSlice("resolver-1", ep("10.0.0.1", ptr.To(true), false))}

	f.expectKube(expectCreate(endpointSlicesResource, resolverSliceFor(es, public, "10.0.0.1")))
	f.expectKube(expectCreate(servicesResource, privateServiceFor(es, public)))
	f.expectElasti(expectStatusUpdate(withPorts(expectedStatus(es, elastiv1alpha1.ModeProxy, metav1.ConditionTrue, ReasonReconciled, t0), webPorts()...)))
	wantNoError(t, f.run(keyOf(es)))

	f = f.converged(keyOf(es))
	es = f.elastiService("web")
	f.expectKube(expectUpdate(endpointSlicesResource, withRoutes(resolverSliceFor(es, f.service("web"), "10.0.0.1"), f.service("web"), map[int32]int32{80: 20000})))
	wantNoError(t, f.run(keyOf(es)))

	// Converged: the next sync writes nothing.
	f = f.converged(keyOf(es))
	wantNoError(t, f.run(keyOf(es)))
	if got := slicePorts(t, f, "web"); !slices.Equal(got, []int32{20000}) {
		t.Errorf("slice ports = %v, want [20000]", got)
	}
}

// Per-port routing needs every Ready resolver endpoint to be in a slice
// that lists the per-port-routing port: one KubeElasti resolver pod, which
// listens on the proxy port alone, keeps every Service on Host routing.
func TestHostRoutingUnlessEveryReadyResolverPodDeclares(t *testing.T) {
	legacy := func(eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
		return newResolverSlice("legacy", discoveryv1.AddressTypeIPv4, eps...)
	}
	for _, tc := range []struct {
		name     string
		resolver []*discoveryv1.EndpointSlice
		want     []int32
	}{
		{"all declare", []*discoveryv1.EndpointSlice{
			declaringResolverSlice("a", ep("10.0.0.1", ptr.To(true), false), ep("10.0.0.2", nil, false)),
		}, []int32{20000}},
		{"none declare (KubeElasti)", []*discoveryv1.EndpointSlice{
			legacy(ep("10.0.0.1", ptr.To(true), false)),
		}, []int32{resolverProxyPort}},
		{"mixed, mid rolling upgrade", []*discoveryv1.EndpointSlice{
			declaringResolverSlice("a", ep("10.0.0.1", ptr.To(true), false)),
			legacy(ep("10.0.0.2", ptr.To(true), false)),
		}, []int32{resolverProxyPort}},
		{"the legacy pod is no longer ready", []*discoveryv1.EndpointSlice{
			declaringResolverSlice("a", ep("10.0.0.1", ptr.To(true), false)),
			legacy(ep("10.0.0.2", ptr.To(false), false), ep("10.0.0.3", ptr.To(true), true)),
		}, []int32{20000}},
		{"no ready resolver", []*discoveryv1.EndpointSlice{
			declaringResolverSlice("a", ep("10.0.0.1", ptr.To(false), false)),
		}, []int32{resolverProxyPort}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			es := withPorts(withStatus(newElastiService("web", "web", "web"), elastiv1alpha1.ModeProxy, metav1.ConditionTrue, ReasonReconciled), webPorts()...)
			public := newPublicService("web")
			f.elastiServices = append(f.elastiServices, es)
			f.services = append(f.services, public, privateServiceFor(es, public))
			f.deployments = append(f.deployments, newDeployment("web", 0))
			f.resolverSlices = tc.resolver
			_, ctx := ktesting.NewTestContext(t)
			c := f.newController(ctx)
			_ = c.syncElastiService(ctx, keyOf(es)) // ResolverUnavailable backs off
			if got := slicePorts(t, f, "web"); !slices.Equal(got, tc.want) {
				t.Errorf("slice ports = %v, want %v", got, tc.want)
			}
		})
	}
}

// A rolling upgrade: while a KubeElasti resolver pod is Ready the slice
// stays on the proxy port; when the last one goes, only the slice changes
// (the ports were recorded long before), and back again if one returns.
func TestResolverDeclarationChangeSwitchesOnlyTheSlice(t *testing.T) {
	f := newFixture(t)
	proxySeed(f) // a KubeElasti resolver: no declaration
	f = f.converged(keyOf(f.elastiService("web")))
	es := f.elastiService("web")
	if !slices.Equal(es.Status.ResolverPorts, webPorts()) {
		t.Fatalf("recorded ports = %v, want %v even without per-port routing", es.Status.ResolverPorts, webPorts())
	}

	f.resolverSlices = []*discoveryv1.EndpointSlice{declaringResolverSlice("resolver-2", ep("10.0.0.1", ptr.To(true), false))}
	f.expectKube(expectUpdate(endpointSlicesResource, withRoutes(resolverSliceFor(es, f.service("web"), "10.0.0.1"), f.service("web"), map[int32]int32{80: 20000})))
	wantNoError(t, f.run(keyOf(es)))

	f = f.converged(keyOf(es))
	es = f.elastiService("web")
	f.resolverSlices = append(f.resolverSlices, newResolverSlice("legacy", discoveryv1.AddressTypeIPv4, ep("10.0.0.9", ptr.To(true), false)))
	f.expectKube(expectUpdate(endpointSlicesResource, resolverSliceFor(es, f.service("web"), "10.0.0.1", "10.0.0.9")))
	wantNoError(t, f.run(keyOf(es)))
}

// With the range exhausted the ElastiService says so (condition and one
// Warning event), its slice routes by Host, and it keeps working; when
// another ElastiService frees a port, the waiting one is re-synced and
// gets it.
func TestExhaustedRangeFallsBackAndWaitsForAFreedPort(t *testing.T) {
	f := newFixture(t)
	f.portRange = portalloc.Range{First: 20000, Last: 20000}
	// The informers never run here, so the generated objects are seeded:
	// the syncs below see them as an operator's cache would.
	for _, name := range []string{"a", "b"} {
		es, public := newElastiService(name, name, name), newPublicService(name)
		f.elastiServices = append(f.elastiServices, es)
		f.services = append(f.services, public, privateServiceFor(es, public))
		f.endpointSlices = append(f.endpointSlices, resolverSliceFor(es, public, "10.0.0.1"))
		f.deployments = append(f.deployments, newDeployment(name, 0))
	}
	f.resolverSlices = []*discoveryv1.EndpointSlice{declaringResolverSlice("resolver-1", ep("10.0.0.1", ptr.To(true), false))}
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	keys := capture(c)

	wantNoError(t, c.syncElastiService(ctx, keyOf(f.elastiService("a"))))
	wantNoError(t, c.syncElastiService(ctx, keyOf(f.elastiService("b"))))
	b := statusOf(t, f, "b")
	cond := portsCondition(b)
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != elastiv1alpha1.ReasonResolverPortRangeExhausted ||
		!strings.Contains(cond.Message, "20000-20000") || !strings.Contains(cond.Message, "Host routing") {
		t.Fatalf("b's ResolverPortsAssigned = %+v, want False/%s naming the range", cond, elastiv1alpha1.ReasonResolverPortRangeExhausted)
	}
	if len(b.Status.ResolverPorts) != 0 {
		t.Errorf("b records ports %v while exhausted", b.Status.ResolverPorts)
	}
	if r := meta.FindStatusCondition(b.Status.Conditions, elastiv1alpha1.ConditionReady); r == nil || r.Status != metav1.ConditionTrue || b.Status.Mode != elastiv1alpha1.ModeProxy {
		t.Errorf("b is %s with Ready %+v; exhaustion must not change Ready", b.Status.Mode, r)
	}
	if got := slicePorts(t, f, "b"); !slices.Equal(got, []int32{resolverProxyPort}) {
		t.Errorf("b's slice ports = %v, want the proxy port", got)
	}
	if got := statusOf(t, f, "a").Status.ResolverPorts; !slices.Equal(got, []elastiv1alpha1.ResolverPort{rp("a", "http", 80, 20000)}) {
		t.Errorf("a records %v", got)
	}
	events := drainEvents(f)
	if !slices.Equal(events, []string{"Warning " + ReasonResolverPortRangeExhausted}) {
		t.Errorf("events = %v, want one %s warning", events, ReasonResolverPortRangeExhausted)
	}

	// Still exhausted: no write, no second warning.
	deliver(t, f, "b")
	f.kubeClient.ClearActions()
	f.elastiClient.ClearActions()
	wantNoError(t, c.syncElastiService(ctx, keyOf(b)))
	if n := len(filterInformerActions(f.elastiClient.Actions())) + len(filterInformerActions(f.kubeClient.Actions())); n != 0 || len(drainEvents(f)) != 0 {
		t.Errorf("an unchanged exhausted ElastiService made %d writes and events", n)
	}
	keys()

	// a goes: its port is freed and b, waiting, is synced again.
	if err := f.esIndexer.Delete(f.elastiService("a")); err != nil {
		t.Fatal(err)
	}
	wantNoError(t, c.syncElastiService(ctx, keyOf(f.elastiService("a"))))
	wantKeys(t, "freeing a's port", keys(), "shop/b")
	wantNoError(t, c.syncElastiService(ctx, keyOf(b)))
	b = statusOf(t, f, "b")
	if cond := portsCondition(b); cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != elastiv1alpha1.ReasonResolverPortsAssigned {
		t.Errorf("b's ResolverPortsAssigned = %+v after a port was freed, want True", cond)
	}
	if !slices.Equal(b.Status.ResolverPorts, []elastiv1alpha1.ResolverPort{rp("b", "http", 80, 20000)}) {
		t.Errorf("b records %v, want a's freed port", b.Status.ResolverPorts)
	}
	deliver(t, f, "b")
	wantNoError(t, c.syncElastiService(ctx, keyOf(b)))
	if got := slicePorts(t, f, "b"); !slices.Equal(got, []int32{20000}) {
		t.Errorf("b's slice ports = %v once its port is recorded, want [20000]", got)
	}
}

func drainEvents(f *fixture) []string {
	var got []string
	for {
		select {
		case e := <-f.recorder.Events:
			got = append(got, strings.Join(strings.SplitN(e, " ", 3)[:2], " "))
		default:
			return got
		}
	}
}

// A new leader seeds its allocator from every recorded status before any
// sync: whichever order the workers then take, every ElastiService keeps
// its recorded port, a contested port goes to the older ElastiService, and
// new ports collide with none.
func TestSeedResolverPortsKeepsEveryRecordedPort(t *testing.T) {
	f := newFixture(t)
	seed := func(name string, age time.Duration, ports ...elastiv1alpha1.ResolverPort) *elastiv1alpha1.ElastiService {
		es := newElastiService(name, name, name)
		es.CreationTimestamp = metav1.NewTime(t0.Add(-age))
		if ports != nil {
			withPorts(withStatus(es, elastiv1alpha1.ModeProxy, metav1.ConditionTrue, ReasonReconciled), ports...)
		}
		f.elastiServices = append(f.elastiServices, es)
		f.services = append(f.services, newPublicService(name))
		f.deployments = append(f.deployments, newDeployment(name, 0))
		return es
	}
	// A restore from backup left x and y with the same port; x is older.
	x := seed("x", 3*time.Hour, rp("x", "http", 80, 20003))
	y := seed("y", 2*time.Hour, rp("y", "http", 80, 20003))
	z := seed("z", time.Hour, rp("z", "http", 80, 20000))
	n := seed("n", 0)
	f.resolverSlices = readyResolver()
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	c.SeedResolverPorts(ctx)

	// The newest first: without the seed, n would take 20000 from z and y
	// would take 20003 from x.
	for _, es := range []*elastiv1alpha1.ElastiService{n, y, z, x} {
		wantNoError(t, c.syncElastiService(ctx, keyOf(es)))
	}
	got := map[string]int32{}
	for _, name := range []string{"x", "y", "z", "n"} {
		ports := statusOf(t, f, name).Status.ResolverPorts
		if len(ports) != 1 {
			t.Fatalf("%s records %v", name, ports)
		}
		got[name] = ports[0].ResolverPort
	}
	if got["x"] != 20003 || got["z"] != 20000 {
		t.Errorf("ports after the restart = %v; x must keep 20003 and z 20000", got)
	}
	seen := map[int32]string{}
	for name, p := range got {
		if other, dup := seen[p]; dup {
			t.Errorf("%s and %s both have %d", name, other, p)
		}
		seen[p] = name
	}
}

// Ports are held only while their Service exists and this ElastiService
// fronts it.
func TestPortsReleasedWhenTheServiceGoesOrIsContested(t *testing.T) {
	t.Run("Service deleted", func(t *testing.T) {
		f := newFixture(t)
		es := withPorts(withStatus(newElastiService("web", "web", "web"), elastiv1alpha1.ModeProxy, metav1.ConditionTrue, ReasonReconciled), webPorts()...)
		f.elastiServices = append(f.elastiServices, es)
		f.deployments = append(f.deployments, newDeployment("web", 0))
		_, ctx := ktesting.NewTestContext(t)
		c := f.newController(ctx)
		c.SeedResolverPorts(ctx)
		wantWaiting(t, c.syncElastiService(ctx, keyOf(es)), ReasonServiceNotFound)
		got := statusOf(t, f, "web")
		if len(got.Status.ResolverPorts) != 0 || portsCondition(got) != nil || c.front.ports.InUse() != 0 {
			t.Errorf("after the Service went: ports %v, condition %+v, %d held", got.Status.ResolverPorts, portsCondition(got), c.front.ports.InUse())
		}
	})
	t.Run("conflict loser", func(t *testing.T) {
		f := newFixture(t)
		holder := newElastiService("holder", "web", "web")
		loser := withPorts(withStatus(newElastiService("loser", "web", "web"), "", metav1.ConditionTrue, ReasonReconciled), webPorts()...)
		f.elastiServices = append(f.elastiServices, holder, loser)
		f.services = append(f.services, newPublicService("web"))
		f.deployments = append(f.deployments, newDeployment("web", 0))
		f.directory.Claim(webKey, directory.EntryFor(holder))
		_, ctx := ktesting.NewTestContext(t)
		c := f.newController(ctx)
		c.SeedResolverPorts(ctx)
		wantNoError(t, c.syncElastiService(ctx, keyOf(loser)))
		got := statusOf(t, f, "loser")
		if len(got.Status.ResolverPorts) != 0 || portsCondition(got) != nil || c.front.ports.InUse() != 0 {
			t.Errorf("the loser keeps ports %v, condition %+v, %d held", got.Status.ResolverPorts, portsCondition(got), c.front.ports.InUse())
		}
	})
	t.Run("finalized", func(t *testing.T) {
		f := newFixture(t)
		es := withPorts(deletionSeed(f, time.Second, 2), webPorts()...)
		f.endpointSlices = append(f.endpointSlices, targetSlice("web", ep("10.1.0.1", ptr.To(true), false)))
		f.elastiServices = append(f.elastiServices, newElastiService("waiting", "other", "other"))
		_, ctx := ktesting.NewTestContext(t)
		c := f.newController(ctx)
		c.SeedResolverPorts(ctx)
		var all []portalloc.Port
		for i := range testPortRange.Size() {
			all = append(all, portalloc.Port{Service: "other", Port: int32(i + 1)})
		}
		if _, _, err := c.front.ports.Assign(f.elastiService("waiting").Key(), all, nil); err == nil {
			t.Fatal("waiting got every port of the range although web holds one")
		}
		keys := capture(c)
		wantNoError(t, c.syncElastiService(ctx, keyOf(es)))
		if c.front.ports.InUse() != 0 {
			t.Errorf("%d ports held after the finalizer went", c.front.ports.InUse())
		}
		wantKeys(t, "finalizing", keys(), "shop/waiting")
	})
	t.Run("gone", func(t *testing.T) {
		f := newFixture(t)
		_, ctx := ktesting.NewTestContext(t)
		c := f.newController(ctx)
		if _, _, err := c.front.ports.Assign(newElastiService("web", "web", "web").Key(), []portalloc.Port{{Service: "web", Port: 80}}, nil); err != nil {
			t.Fatal(err)
		}
		wantNoError(t, c.syncElastiService(ctx, types.NamespacedName{Namespace: testNamespace, Name: "web"}))
		if c.front.ports.InUse() != 0 {
			t.Errorf("%d ports held for a gone ElastiService", c.front.ports.InUse())
		}
	})
}

// Past a resolver port quota an ElastiService falls back to Host routing on
// the proxy port, exactly as when the range is exhausted, with its own
// reason and one Warning event, while the others keep their per-port
// routing: a Service with more TCP ports than --resolver-ports-per-
// elastiservice, and the ElastiService that would take its namespace past
// --resolver-ports-per-namespace.
func TestPortQuotaFallsBackToHostRouting(t *testing.T) {
	for _, tc := range []struct {
		name  string
		quota portalloc.Quota
		inMsg string
	}{
		{"per ElastiService", portalloc.Quota{PerOwner: 1}, "--resolver-ports-per-elastiservice 1"},
		{"per namespace", portalloc.Quota{PerNamespace: 1}, "--resolver-ports-per-namespace 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.portQuota = tc.quota
			for _, name := range []string{"a", "b"} {
				es, public := newElastiService(name, name, name), newPublicService(name)
				if name == "b" && tc.quota.PerOwner > 0 {
					// Two TCP ports: past a quota of one.
					public.Spec.Ports = append(public.Spec.Ports, corev1.ServicePort{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP})
				}
				f.elastiServices = append(f.elastiServices, es)
				f.services = append(f.services, public, privateServiceFor(es, public))
				f.endpointSlices = append(f.endpointSlices, resolverSliceFor(es, public, "10.0.0.1"))
				f.deployments = append(f.deployments, newDeployment(name, 0))
			}
			f.resolverSlices = []*discoveryv1.EndpointSlice{declaringResolverSlice("resolver-1", ep("10.0.0.1", ptr.To(true), false))}
			_, ctx := ktesting.NewTestContext(t)
			c := f.newController(ctx)

			wantNoError(t, c.syncElastiService(ctx, keyOf(f.elastiService("a"))))
			wantNoError(t, c.syncElastiService(ctx, keyOf(f.elastiService("b"))))
			b := statusOf(t, f, "b")
			if cond := portsCondition(b); cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != elastiv1alpha1.ReasonResolverPortQuotaExceeded ||
				!strings.Contains(cond.Message, tc.inMsg) || !strings.Contains(cond.Message, "Host routing") {
				t.Fatalf("b's ResolverPortsAssigned = %+v, want False/%s naming %s", cond, elastiv1alpha1.ReasonResolverPortQuotaExceeded, tc.inMsg)
			}
			if len(b.Status.ResolverPorts) != 0 {
				t.Errorf("b records ports %v past its quota", b.Status.ResolverPorts)
			}
			if r := meta.FindStatusCondition(b.Status.Conditions, elastiv1alpha1.ConditionReady); r == nil || r.Status != metav1.ConditionTrue || b.Status.Mode != elastiv1alpha1.ModeProxy {
				t.Errorf("b is %s with Ready %+v; a quota must not change Ready", b.Status.Mode, r)
			}
			if got := slicePorts(t, f, "b"); !slices.ContainsFunc(got, func(p int32) bool { return p == resolverProxyPort }) ||
				slices.ContainsFunc(got, testPortRange.Contains) {
				t.Errorf("b's slice ports = %v, want only the proxy port", got)
			}
			if got := statusOf(t, f, "a").Status.ResolverPorts; !slices.Equal(got, []elastiv1alpha1.ResolverPort{rp("a", "http", 80, 20000)}) {
				t.Errorf("a records %v, want its own port", got)
			}
			if events := drainEvents(f); !slices.Equal(events, []string{"Warning " + ReasonResolverPortQuotaExceeded}) {
				t.Errorf("events = %v, want one %s warning", events, ReasonResolverPortQuotaExceeded)
			}
			// a, within its quota, routes per port once its port is recorded.
			deliver(t, f, "a")
			wantNoError(t, c.syncElastiService(ctx, keyOf(f.elastiService("a"))))
			if got := slicePorts(t, f, "a"); !slices.Equal(got, []int32{20000}) {
				t.Errorf("a's slice ports = %v, want [20000]", got)
			}
		})
	}
}
