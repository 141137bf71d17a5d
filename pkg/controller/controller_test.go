package controller

// Fixture tests in the style of kubernetes/sample-controller: objects are
// seeded into fake clientsets and into informer indexers (the informers are
// never started), the sync handler is called directly, and the API actions
// and events it produced are compared with the expected ones.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/apimachinery/pkg/util/intstr"
	kubeinformers "k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/directory"
	elastifake "github.com/elasti-dev/elasti/pkg/generated/clientset/versioned/fake"
	elastiinformers "github.com/elasti-dev/elasti/pkg/generated/informers/externalversions"
	"github.com/elasti-dev/elasti/pkg/names"
	"github.com/elasti-dev/elasti/pkg/nsbudget"
	"github.com/elasti-dev/elasti/pkg/outcome"
	"github.com/elasti-dev/elasti/pkg/portalloc"
	"github.com/elasti-dev/elasti/pkg/scaletarget"
	"github.com/elasti-dev/elasti/pkg/workloop"
)

const (
	testNamespace     = "shop"
	resolverNamespace = "elasti"
	resolverService   = "elasti-resolver-service"
	resolverProxyPort = int32(8012)
	deletionGrace     = 30 * time.Second
	noResync          = 0
)

// testPortRange is small, so tests can exhaust it.
var testPortRange = portalloc.Range{First: 20000, Last: 20009}

var (
	// t0 is the fake clock's start; every timestamp in these tests derives
	// from it, so the tests never depend on the wall clock.
	t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

	servicesResource       = corev1.SchemeGroupVersion.WithResource("services")
	endpointSlicesResource = discoveryv1.SchemeGroupVersion.WithResource("endpointslices")
	deploymentsResource    = appsv1.SchemeGroupVersion.WithResource("deployments")
	statefulSetsResource   = appsv1.SchemeGroupVersion.WithResource("statefulsets")
	podsResource           = corev1.SchemeGroupVersion.WithResource("pods")
	replicaSetsResource    = appsv1.SchemeGroupVersion.WithResource("replicasets")
	elastiServicesResource = elastiv1alpha1.SchemeGroupVersion.WithResource("elastiservices")
)

type fixture struct {
	t *testing.T

	kubeClient   *k8sfake.Clientset
	elastiClient *elastifake.Clientset
	clock        *testingclock.FakeClock
	directory    *directory.Directory
	recorder     *record.FakeRecorder
	scaler       *scaletarget.Scaler
	// replicas records what the controller tells its Replicas observer.
	replicas *seenReplicas
	// replicasObserver, when set, is the controller's Replicas instead.
	replicasObserver Replicas

	// Objects seeded into the informers' indexers and the fake clientsets.
	elastiServices []*elastiv1alpha1.ElastiService
	services       []*corev1.Service
	// endpointSlices are in watched namespaces; resolverSlices are the
	// resolver Service's slices, seen by both EndpointSlice informers.
	endpointSlices []*discoveryv1.EndpointSlice
	resolverSlices []*discoveryv1.EndpointSlice
	deployments    []*appsv1.Deployment
	statefulSets   []*appsv1.StatefulSet
	// apiOnly are only in the fake clientset, in no informer: pods and
	// ReplicaSets, which the controller reads one at a time to check an
	// endpoint (live.go).
	apiOnly []runtime.Object

	// portRange is the resolver port range; zero means testPortRange.
	portRange portalloc.Range
	// portQuota bounds resolver ports per ElastiService and namespace;
	// zero is unbounded.
	portQuota portalloc.Quota
	// backlog is how many other ElastiService keys the controller sees
	// waiting in its queue.
	backlog int
	// queue is the controller's ElastiService queue (see options).
	queue *testQueue
	// queuePrivateServices leaves private Services to the controller's
	// own queue instead of creating them in line.
	queuePrivateServices bool

	// Indexers, kept so a test can change the cache between two syncs.
	esIndexer    cache.Indexer
	sliceIndexer cache.Indexer

	// Expected actions and events ("Type Reason").
	kubeActions   []core.Action
	elastiActions []core.Action
	events        []string
	// verified holds the elasti actions of the last verify.
	verified []core.Action
}

func newFixture(t *testing.T) *fixture {
	return &fixture{
		t:         t,
		clock:     testingclock.NewFakeClock(t0),
		directory: directory.New(nsbudget.Limits{}),
	}
}

// nopObserver is an Observer that ignores every measurement.
type nopObserver struct{}

func (nopObserver) ObserveSync(time.Duration, outcome.Sync)              {}
func (nopObserver) ObserveMode(types.NamespacedName, string)             {}
func (nopObserver) ModeSwitched(types.NamespacedName, string, time.Time) {}
func (nopObserver) ForgetElastiService(types.NamespacedName)             {}

// seenReplicas is a Replicas observer that records what it is told.
type seenReplicas struct{ seen []string }

func (s *seenReplicas) ObserveReplicas(_ context.Context, es types.NamespacedName, replicas int32) {
	s.seen = append(s.seen, fmt.Sprintf("%s=%d", es, replicas))
}
func (s *seenReplicas) Forget(es types.NamespacedName) {
	s.seen = append(s.seen, "forget "+es.String())
}

// Pending knows of no group wake, so only a target above zero keeps a
// group up.
func (s *seenReplicas) Pending(types.NamespacedName, *elastiv1alpha1.ElastiServiceStatus) bool {
	return false
}

// options are the test's collaborators for New: its clock, a fake
// recorder, f.queue for the ElastiService keys and, unless
// f.queuePrivateServices, private Services created in line where the sync
// asks for them, so a test sees every write of one sync in order. c is
// where New's result goes.
func (f *fixture) options(ctx context.Context, c **Controller) Options {
	f.recorder = record.NewFakeRecorder(100)
	f.queue = &testQueue{backlog: &f.backlog}
	opts := Options{Clock: f.clock, Recorder: f.recorder, Queue: f.queue}
	if !f.queuePrivateServices {
		opts.PrivateServices = inlinePrivateServices(func(key types.NamespacedName) {
			if err := (*c).front.syncPrivateService(ctx, key); err != nil {
				f.t.Errorf("create the private service of %v: %v", key, err)
			}
		})
	}
	return opts
}

// inlinePrivateServices creates each private Service as it is asked for.
type inlinePrivateServices func(key types.NamespacedName)

func (f inlinePrivateServices) Add(key types.NamespacedName) { f(key) }

// testQueue is the ElastiService queue of a test: keys go to add and
// addUrgent when a test sets them, and the backlog is the fixture's.
type testQueue struct {
	add, addUrgent func(key types.NamespacedName)
	backlog        *int
}

func (q *testQueue) Add(key types.NamespacedName) {
	if q.add != nil {
		q.add(key)
	}
}

func (q *testQueue) AddUrgent(key types.NamespacedName) {
	if q.addUrgent != nil {
		q.addUrgent(key)
	}
}

func (q *testQueue) Len() int { return *q.backlog }

// newController builds the controller over fake clientsets and seeds the
// informers' indexers. The informers are never started.
func (f *fixture) newController(ctx context.Context) *Controller {
	f.t.Helper()
	var kubeObjects, elastiObjects []runtime.Object
	for _, o := range f.services {
		kubeObjects = append(kubeObjects, o)
	}
	for _, o := range f.endpointSlices {
		kubeObjects = append(kubeObjects, o)
	}
	for _, o := range f.resolverSlices {
		kubeObjects = append(kubeObjects, o)
	}
	for _, o := range f.deployments {
		kubeObjects = append(kubeObjects, o)
	}
	for _, o := range f.statefulSets {
		kubeObjects = append(kubeObjects, o)
	}
	kubeObjects = append(kubeObjects, f.apiOnly...)
	for _, o := range f.elastiServices {
		elastiObjects = append(elastiObjects, o)
	}
	f.kubeClient = k8sfake.NewClientset(kubeObjects...)
	f.elastiClient = elastifake.NewSimpleClientset(elastiObjects...)

	kubeFactory := kubeinformers.NewSharedInformerFactory(f.kubeClient, noResync)
	resolverFactory := kubeinformers.NewSharedInformerFactoryWithOptions(f.kubeClient, noResync,
		kubeinformers.WithNamespace(resolverNamespace))
	elastiFactory := elastiinformers.NewSharedInformerFactory(f.elastiClient, noResync)

	inf := Informers{
		ElastiServices: elastiFactory.Elasti().V1alpha1().ElastiServices(),
		Services:       kubeFactory.Core().V1().Services(),
		EndpointSlices: kubeFactory.Discovery().V1().EndpointSlices(),
		ResolverSlices: resolverFactory.Discovery().V1().EndpointSlices(),
		Deployments:    kubeFactory.Apps().V1().Deployments(),
		StatefulSets:   kubeFactory.Apps().V1().StatefulSets(),
	}
	portRange := f.portRange
	if portRange == (portalloc.Range{}) {
		portRange = testPortRange
	}
	// No RolloutInformer: Rollout targets must report the CRD as missing.
	f.replicas = &seenReplicas{}
	f.scaler = scaletarget.NewScaler(f.kubeClient, nil, inf.Deployments.Informer().GetIndexer(), inf.StatefulSets.Informer().GetIndexer(), nil, nil)

	var c *Controller
	c, err := New(ctx, f.kubeClient, f.elastiClient, f.scaler, f.directory, inf, Config{
		ResolverNamespace:    resolverNamespace,
		ResolverService:      resolverService,
		ResolverProxyPort:    resolverProxyPort,
		ResolverPortRange:    portRange,
		ResolverPortQuota:    f.portQuota,
		ElastiServiceWorkers: 1,
		TargetWorkers:        1,
		EndpointSliceWorkers: 1,
		DeletionGrace:        deletionGrace,
	}, nopObserver{}, cmp.Or[Replicas](f.replicasObserver, f.replicas), f.options(ctx, &c))
	if err != nil {
		f.t.Fatalf("New: %v", err)
	}
	f.t.Cleanup(func() {
		c.elastiServiceQueue.ShutDown()
		c.targetQueue.ShutDown()
		c.sliceQueue.ShutDown()
		c.privateServiceQueue.ShutDown()
		c.broadcaster.Shutdown()
	})

	// Seed after New: New adds the indexers.
	add := func(indexer cache.Indexer, obj any) {
		if err := indexer.Add(obj); err != nil {
			f.t.Fatalf("seed indexer: %v", err)
		}
	}
	f.esIndexer = inf.ElastiServices.Informer().GetIndexer()
	f.sliceIndexer = inf.EndpointSlices.Informer().GetIndexer()
	for _, o := range f.elastiServices {
		add(f.esIndexer, o)
	}
	for _, o := range f.services {
		add(inf.Services.Informer().GetIndexer(), o)
	}
	for _, o := range f.endpointSlices {
		add(f.sliceIndexer, o)
	}
	for _, o := range f.resolverSlices {
		add(f.sliceIndexer, o)
		add(inf.ResolverSlices.Informer().GetIndexer(), o)
	}
	for _, o := range f.deployments {
		add(inf.Deployments.Informer().GetIndexer(), o)
	}
	for _, o := range f.statefulSets {
		add(inf.StatefulSets.Informer().GetIndexer(), o)
	}
	return c
}

// run builds a controller, syncs key once and checks actions and events.
func (f *fixture) run(key types.NamespacedName) error {
	f.t.Helper()
	_, ctx := ktesting.NewTestContext(f.t)
	c := f.newController(ctx)
	err := c.syncElastiService(ctx, key)
	f.verify()
	return err
}

func (f *fixture) expectKube(a core.Action)   { f.kubeActions = append(f.kubeActions, a) }
func (f *fixture) expectElasti(a core.Action) { f.elastiActions = append(f.elastiActions, a) }
func (f *fixture) expectEvents(e ...string)   { f.events = append(f.events, e...) }

// verify compares the recorded actions and events with the expected ones,
// then forgets both, so a test can sync again and expect anew.
func (f *fixture) verify() {
	f.t.Helper()
	checkActions(f.t, "kube", f.kubeActions, filterInformerActions(f.kubeClient.Actions()))
	checkActions(f.t, "elasti", f.elastiActions, filterInformerActions(f.elastiClient.Actions()))
	var got []string
	for done := false; !done; {
		select {
		case e := <-f.recorder.Events:
			// "Type Reason message": keep type and reason.
			got = append(got, strings.Join(strings.SplitN(e, " ", 3)[:2], " "))
		default:
			done = true
		}
	}
	if !slices.Equal(got, f.events) {
		f.t.Errorf("events differ (-want +got):\n%s", diff.Diff(f.events, got))
	}
	f.verified = f.elastiClient.Actions()
	f.kubeClient.ClearActions()
	f.elastiClient.ClearActions()
	f.kubeActions, f.elastiActions, f.events = nil, nil, nil
}

// filterInformerActions drops the reads informers would make; the
// controller itself must only write.
func filterInformerActions(actions []core.Action) []core.Action {
	var out []core.Action
	for _, a := range actions {
		if a.GetVerb() == "list" || a.GetVerb() == "watch" {
			continue
		}
		out = append(out, a)
	}
	return out
}

func checkActions(t *testing.T, client string, want, got []core.Action) {
	t.Helper()
	w, g := describeActions(want), describeActions(got)
	if !slices.Equal(w, g) {
		t.Errorf("%s actions differ (-want +got):\n%s", client, diff.Diff(w, g))
	}
}

// describeActions renders actions as lines: verb, resource[/subresource],
// namespace/name, then the fields of the written object that matter.
func describeActions(actions []core.Action) []string {
	var lines []string
	for i, a := range actions {
		res := a.GetResource().Resource
		if sub := a.GetSubresource(); sub != "" {
			res += "/" + sub
		}
		head := fmt.Sprintf("#%d %s %s %s", i, a.GetVerb(), res, a.GetNamespace())
		switch a := a.(type) {
		case core.CreateAction:
			lines = append(lines, head)
			lines = append(lines, describeObject(a.GetObject())...)
		case core.UpdateAction:
			lines = append(lines, head)
			lines = append(lines, describeObject(a.GetObject())...)
		case core.DeleteAction:
			lines = append(lines, head+"/"+a.GetName())
		case core.PatchAction:
			lines = append(lines, fmt.Sprintf("%s/%s %s %s", head, a.GetName(), a.GetPatchType(), canonicalJSON(a.GetPatch())))
		default:
			lines = append(lines, head)
		}
	}
	return lines
}

func canonicalJSON(b []byte) string {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return "invalid JSON: " + string(b)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

func describeObject(obj runtime.Object) []string {
	var lines []string
	add := func(format string, args ...any) { lines = append(lines, "    "+fmt.Sprintf(format, args...)) }
	if m, err := meta.Accessor(obj); err == nil {
		add("name: %s/%s", m.GetNamespace(), m.GetName())
		add("labels: %s", sortedMap(m.GetLabels()))
		if a := m.GetAnnotations(); len(a) > 0 {
			add("annotations: %s", sortedMap(a))
		}
		for _, r := range m.GetOwnerReferences() {
			add("owner: %s %s/%s uid=%s controller=%v", r.APIVersion, r.Kind, r.Name, r.UID, ptr.Deref(r.Controller, false))
		}
	}
	switch o := obj.(type) {
	case *corev1.Service:
		add("type: %s selector: %s", o.Spec.Type, sortedMap(o.Spec.Selector))
		for _, p := range o.Spec.Ports {
			add("port: %q %d targetPort=%s/%s nodePort=%d", p.Name, p.Port, p.TargetPort.String(), p.Protocol, p.NodePort)
		}
	case *discoveryv1.EndpointSlice:
		add("addressType: %s endpoints: %d (nil=%v)", o.AddressType, len(o.Endpoints), o.Endpoints == nil)
		for _, ep := range o.Endpoints {
			add("endpoint: %v ready=%s terminating=%s", ep.Addresses, boolPtr(ep.Conditions.Ready), boolPtr(ep.Conditions.Terminating))
		}
		for _, p := range o.Ports {
			add("port: %q %d/%s appProtocol=%s", ptr.Deref(p.Name, "<nil>"), ptr.Deref(p.Port, 0), ptr.Deref(p.Protocol, ""), ptr.Deref(p.AppProtocol, "<nil>"))
		}
	case *elastiv1alpha1.ElastiService:
		add("finalizers: %v", o.Finalizers)
		add("status: mode=%q observedGeneration=%d lastReconciledTime=%s", o.Status.Mode, o.Status.ObservedGeneration, timePtr(o.Status.LastReconciledTime))
		for _, c := range o.Status.Conditions {
			add("condition: %s=%s reason=%s observedGeneration=%d lastTransitionTime set=%v",
				c.Type, c.Status, c.Reason, c.ObservedGeneration, !c.LastTransitionTime.IsZero())
		}
		for _, p := range o.Status.ResolverPorts {
			add("resolverPort: %s %q %d → %d", p.Service, p.Name, p.Port, p.ResolverPort)
		}
	}
	return lines
}

func sortedMap(m map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+m[k])
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func boolPtr(b *bool) string {
	if b == nil {
		return "nil"
	}
	return fmt.Sprint(*b)
}

func timePtr(t *metav1.Time) string {
	if t == nil {
		return "nil"
	}
	return t.UTC().Format(time.RFC3339)
}

// ---- builders ----

func newElastiService(name, service, deployment string) *elastiv1alpha1.ElastiService {
	return &elastiv1alpha1.ElastiService{
		TypeMeta: metav1.TypeMeta{APIVersion: elastiv1alpha1.SchemeGroupVersion.String(), Kind: "ElastiService"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       testNamespace,
			UID:             types.UID(name + "-uid"),
			Generation:      1,
			ResourceVersion: "7",
			Finalizers:      []string{elastiv1alpha1.Finalizer},
		},
		Spec: elastiv1alpha1.ElastiServiceSpec{
			ScaleTargetRef:    elastiv1alpha1.ScaleTargetRef{APIVersion: elastiv1alpha1.APIVersionApps, Kind: elastiv1alpha1.KindDeployment, Name: deployment},
			Service:           service,
			MinTargetReplicas: 2,
		},
	}
}

// withStatus sets the status as the controller would have written it.
func withStatus(es *elastiv1alpha1.ElastiService, mode string, status metav1.ConditionStatus, reason string) *elastiv1alpha1.ElastiService {
	es.Status = elastiv1alpha1.ElastiServiceStatus{
		Mode:               mode,
		ObservedGeneration: es.Generation,
		LastReconciledTime: ptr.To(metav1.NewTime(t0.Add(-time.Hour))),
		Conditions: []metav1.Condition{{
			Type: elastiv1alpha1.ConditionReady, Status: status, Reason: reason, Message: "earlier",
			ObservedGeneration: es.Generation, LastTransitionTime: metav1.NewTime(t0.Add(-time.Hour)),
		}},
	}
	return es
}

// expectedStatus is es as the status update should send it.
func expectedStatus(es *elastiv1alpha1.ElastiService, mode string, status metav1.ConditionStatus, reason string, now time.Time) *elastiv1alpha1.ElastiService {
	es = es.DeepCopy()
	es.Status.Mode = mode
	es.Status.ObservedGeneration = es.Generation
	es.Status.LastReconciledTime = ptr.To(metav1.NewTime(now))
	meta.SetStatusCondition(&es.Status.Conditions, metav1.Condition{
		Type: elastiv1alpha1.ConditionReady, Status: status, Reason: reason, ObservedGeneration: es.Generation,
	})
	return es
}

// rp is one recorded resolver port.
func rp(service, name string, port, resolverPort int32) elastiv1alpha1.ResolverPort {
	return elastiv1alpha1.ResolverPort{Service: service, Name: name, Port: port, ResolverPort: resolverPort}
}

// webPorts is what the first sync over newPublicService("web") records: its
// one TCP port gets the first port of the range.
func webPorts() []elastiv1alpha1.ResolverPort {
	return []elastiv1alpha1.ResolverPort{rp("web", "http", 80, 20000)}
}

// withPorts records resolver ports in es's status, with ResolverPortsAssigned
// True, as the controller writes them. It returns es.
func withPorts(es *elastiv1alpha1.ElastiService, ports ...elastiv1alpha1.ResolverPort) *elastiv1alpha1.ElastiService {
	es.Status.ResolverPorts = ports
	meta.SetStatusCondition(&es.Status.Conditions, metav1.Condition{
		Type: elastiv1alpha1.ConditionResolverPortsAssigned, Status: metav1.ConditionTrue,
		Reason: elastiv1alpha1.ReasonResolverPortsAssigned, ObservedGeneration: es.Generation,
		LastTransitionTime: metav1.NewTime(t0.Add(-time.Hour)),
	})
	return es
}

func esOwner(es *elastiv1alpha1.ElastiService) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: elastiv1alpha1.SchemeGroupVersion.String(),
		Kind:       "ElastiService",
		Name:       es.Name,
		UID:        es.UID,
		Controller: ptr.To(true),
	}
}

// newPublicService is a NodePort Service with an HTTP and a UDP port.
func newPublicService(name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace, ResourceVersion: "3"},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeNodePort,
			Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{
				{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP, NodePort: 30080},
				{Name: "dns", Port: 53, TargetPort: intstr.FromInt32(5353), Protocol: corev1.ProtocolUDP, NodePort: 30053},
			},
		},
	}
}

// privateServiceFor is what the private Service must look like, written
// from the spec rather than from the controller's code.
func privateServiceFor(es *elastiv1alpha1.ElastiService, public *corev1.Service) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name:            names.PrivateService(public.Name),
			Namespace:       public.Namespace,
			Labels:          map[string]string{LabelManagedBy: AgentName},
			OwnerReferences: []metav1.OwnerReference{esOwner(es)},
		},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Selector: maps.Clone(public.Spec.Selector)},
	}
	for _, p := range public.Spec.Ports {
		p.NodePort = 0
		svc.Spec.Ports = append(svc.Spec.Ports, p)
	}
	return svc
}

// resolverSliceFor is the proxy-mode slice pointing public at the resolver
// IPs given, in that order. Only the public Service's TCP ports appear.
func resolverSliceFor(es *elastiv1alpha1.ElastiService, public *corev1.Service, ips ...string) *discoveryv1.EndpointSlice {
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:      names.ResolverSlice(public.Name),
			Namespace: public.Namespace,
			Labels: map[string]string{
				discoveryv1.LabelServiceName: public.Name,
				discoveryv1.LabelManagedBy:   ManagedByValue,
			},
			OwnerReferences: []metav1.OwnerReference{esOwner(es)},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{},
	}
	for _, ip := range ips {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		})
	}
	for _, p := range public.Spec.Ports {
		if p.Protocol == corev1.ProtocolTCP || p.Protocol == "" {
			slice.Ports = append(slice.Ports, discoveryv1.EndpointPort{
				Name: ptr.To(p.Name), Port: ptr.To(resolverProxyPort), Protocol: ptr.To(corev1.ProtocolTCP),
			})
		}
	}
	return slice
}

// ep is an endpoint; ready nil means "unknown", which the API treats as ready.
func ep(ip string, ready *bool, terminating bool) discoveryv1.Endpoint {
	e := discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ready}}
	if terminating {
		e.Conditions.Terminating = ptr.To(true)
	}
	return e
}

// targetSlice is an EndpointSlice the EndpointSlice controller made for a
// public Service.
func targetSlice(service string, endpoints ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:      service + "-x7k2p",
			Namespace: testNamespace,
			Labels: map[string]string{
				discoveryv1.LabelServiceName: service,
				discoveryv1.LabelManagedBy:   "endpointslice-controller.k8s.io",
			},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   endpoints,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
}

// newResolverSlice is one of the resolver Service's own slices.
func newResolverSlice(name string, addressType discoveryv1.AddressType, endpoints ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: resolverNamespace,
			Labels: map[string]string{
				discoveryv1.LabelServiceName: resolverService,
				discoveryv1.LabelManagedBy:   "endpointslice-controller.k8s.io",
			},
		},
		AddressType: addressType,
		Endpoints:   endpoints,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("proxy"), Port: ptr.To(resolverProxyPort), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
}

// newDeployment's pods are labelled app=name, which newPublicService(name)
// selects.
func newDeployment(name string, replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Template: podTemplate(name)},
	}
}

func newStatefulSet(name string, replicas int32) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace},
		Spec:       appsv1.StatefulSetSpec{Replicas: ptr.To(replicas), Template: podTemplate(name)},
	}
}

func podTemplate(app string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}}}
}

// ---- expected actions ----

func expectCreate(gvr schema.GroupVersionResource, obj runtime.Object) core.Action {
	return core.NewCreateAction(gvr, testNamespace, obj)
}

func expectUpdate(gvr schema.GroupVersionResource, obj runtime.Object) core.Action {
	return core.NewUpdateAction(gvr, testNamespace, obj)
}

func expectStatusUpdate(es *elastiv1alpha1.ElastiService) core.Action {
	return core.NewUpdateSubresourceAction(elastiServicesResource, "status", testNamespace, es)
}

func expectDelete(gvr schema.GroupVersionResource, name string) core.Action {
	return core.NewDeleteAction(gvr, testNamespace, name)
}

func expectFinalizerPatch(es *elastiv1alpha1.ElastiService, finalizers ...string) core.Action {
	if finalizers == nil {
		finalizers = []string{}
	}
	patch, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"finalizers": finalizers, "resourceVersion": es.ResourceVersion},
	})
	return core.NewPatchAction(elastiServicesResource, testNamespace, es.Name, types.MergePatchType, patch)
}

func expectScalePatch(gvr schema.GroupVersionResource, name string, replicas int32) core.Action {
	return core.NewPatchSubresourceAction(gvr, testNamespace, name, types.MergePatchType,
		fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas), "scale")
}

func keyOf(es *elastiv1alpha1.ElastiService) types.NamespacedName { return es.Key() }

// lastStatusUpdate returns the ElastiService sent by the last status update
// before the last verify.
func (f *fixture) lastStatusUpdate() *elastiv1alpha1.ElastiService {
	f.t.Helper()
	actions := f.verified
	for i := len(actions) - 1; i >= 0; i-- {
		if u, ok := actions[i].(core.UpdateAction); ok && u.GetSubresource() == "status" {
			return u.GetObject().(*elastiv1alpha1.ElastiService)
		}
	}
	f.t.Fatal("no status update")
	return nil
}

func readyMessage(es *elastiv1alpha1.ElastiService) string {
	if c := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionReady); c != nil {
		return c.Message
	}
	return ""
}

// converged syncs key over f's objects and returns a new fixture seeded with
// what the fake API server holds afterwards, its clock a minute later and its
// directory empty: what a restarted operator sees once its caches catch up.
func (f *fixture) converged(key types.NamespacedName) *fixture {
	f.t.Helper()
	_, ctx := ktesting.NewTestContext(f.t)
	c := f.newController(ctx)
	if err := c.syncElastiService(ctx, key); err != nil {
		var waiting *errWaiting
		var requeue workloop.RequeueAfter
		if !errors.As(err, &waiting) && !errors.As(err, &requeue) {
			f.t.Fatalf("sync before converging: %v", err)
		}
	}
	next := newFixture(f.t)
	next.clock = testingclock.NewFakeClock(f.clock.Now().Add(time.Minute))
	next.portRange = f.portRange
	opts := metav1.ListOptions{}
	svcs, err := f.kubeClient.CoreV1().Services("").List(ctx, opts)
	if err != nil {
		f.t.Fatal(err)
	}
	for i := range svcs.Items {
		next.services = append(next.services, &svcs.Items[i])
	}
	eps, err := f.kubeClient.DiscoveryV1().EndpointSlices("").List(ctx, opts)
	if err != nil {
		f.t.Fatal(err)
	}
	for i := range eps.Items {
		s := &eps.Items[i]
		if s.Namespace == resolverNamespace && s.Labels[discoveryv1.LabelServiceName] == resolverService {
			next.resolverSlices = append(next.resolverSlices, s)
		} else {
			next.endpointSlices = append(next.endpointSlices, s)
		}
	}
	deps, err := f.kubeClient.AppsV1().Deployments("").List(ctx, opts)
	if err != nil {
		f.t.Fatal(err)
	}
	for i := range deps.Items {
		next.deployments = append(next.deployments, &deps.Items[i])
	}
	sts, err := f.kubeClient.AppsV1().StatefulSets("").List(ctx, opts)
	if err != nil {
		f.t.Fatal(err)
	}
	for i := range sts.Items {
		next.statefulSets = append(next.statefulSets, &sts.Items[i])
	}
	ess, err := f.elastiClient.ElastiV1alpha1().ElastiServices("").List(ctx, opts)
	if err != nil {
		f.t.Fatal(err)
	}
	for i := range ess.Items {
		next.elastiServices = append(next.elastiServices, &ess.Items[i])
	}
	return next
}

// elastiService returns the seeded ElastiService with the given name.
func (f *fixture) elastiService(name string) *elastiv1alpha1.ElastiService {
	f.t.Helper()
	for _, es := range f.elastiServices {
		if es.Name == name {
			return es
		}
	}
	f.t.Fatalf("no ElastiService %q seeded", name)
	return nil
}

// service returns the seeded Service with the given name.
func (f *fixture) service(name string) *corev1.Service {
	f.t.Helper()
	for _, s := range f.services {
		if s.Name == name {
			return s
		}
	}
	f.t.Fatalf("no Service %q seeded", name)
	return nil
}

func TestEventHandlersEnqueue(t *testing.T) {
	f := newFixture(t)
	moved := newElastiService("moved", "web-v2", "web")
	waiting := newElastiService("waiting", "web", "web")
	public := newPublicService("web")
	f.elastiServices = append(f.elastiServices, moved, waiting)
	f.services = append(f.services, public)
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	keys := capture(c)

	before := moved.DeepCopy()
	before.Spec.Service = "web"
	c.onElastiServiceUpdate(before, moved)
	wantKeys(t, "spec.service change", keys(), "shop/moved", "shop/waiting")

	c.onElastiServiceUpdate(moved, moved)
	wantKeys(t, "resync", keys(), "shop/moved")

	c.onElastiServiceDelete(cache.DeletedFinalStateUnknown{Key: "shop/gone", Obj: newElastiService("gone", "web", "web")})
	wantKeys(t, "tombstone", keys(), "shop/gone", "shop/waiting")

	c.onService(privateServiceFor(moved, newPublicService("web-v2")))
	wantKeys(t, "private Service event", keys(), "shop/moved")

	c.onServiceUpdate(public, public)
	wantKeys(t, "Service update with the same resourceVersion", keys())

	changed := public.DeepCopy()
	changed.ResourceVersion = "4"
	c.onServiceUpdate(public, changed)
	wantKeys(t, "public Service update", keys(), "shop/waiting")
}

// The Scaler reads the fixture's seeded listers and writes through the scale
// subresource; without a RolloutInformer, Rollouts are "not installed".
func TestScalerThroughFixture(t *testing.T) {
	f := newFixture(t)
	defaulted := newDeployment("defaulted", 0)
	defaulted.Spec.Replicas = nil
	f.deployments = append(f.deployments, newDeployment("web", 0), defaulted)
	f.statefulSets = append(f.statefulSets, newStatefulSet("db", 3))
	_, ctx := ktesting.NewTestContext(t)
	f.newController(ctx)
	s := f.scaler
	ref := func(kind, name string) scaletarget.Ref {
		return scaletarget.Ref{Kind: kind, Namespace: testNamespace, Name: name}
	}

	for _, tc := range []struct {
		ref  scaletarget.Ref
		want int32
	}{
		{ref(elastiv1alpha1.KindDeployment, "web"), 0},
		{ref(elastiv1alpha1.KindDeployment, "defaulted"), 1},
		{ref(elastiv1alpha1.KindStatefulSet, "db"), 3},
	} {
		st, err := s.Get(tc.ref)
		if err != nil || st.Replicas != tc.want {
			t.Errorf("Get(%s) = %+v, %v; want %d replicas", tc.ref, st, err, tc.want)
		}
	}
	if _, err := s.Get(ref(elastiv1alpha1.KindDeployment, "missing")); !scaletarget.IsNotFound(err) {
		t.Errorf("Get(missing) error = %v, want NotFound", err)
	}
	_, err := s.Get(ref(elastiv1alpha1.KindRollout, "web"))
	if !errors.Is(err, scaletarget.ErrRolloutsUnavailable) || !scaletarget.IsNotFound(err) ||
		!strings.Contains(err.Error(), "Argo Rollouts CRD") || !strings.Contains(err.Error(), "not installed") {
		t.Errorf("Get(Rollout) error = %v, want ErrRolloutsUnavailable, counted as NotFound", err)
	}
	if _, err := s.Get(ref("CronJob", "web")); !errors.Is(err, scaletarget.ErrUnsupportedKind) || scaletarget.IsNotFound(err) {
		t.Errorf("Get(CronJob) error = %v, want ErrUnsupportedKind", err)
	}

	if err := s.Scale(ctx, ref(elastiv1alpha1.KindDeployment, "web"), 2); err != nil {
		t.Errorf("Scale(Deployment): %v", err)
	}
	if err := s.Scale(ctx, ref(elastiv1alpha1.KindStatefulSet, "db"), 0); err != nil {
		t.Errorf("Scale(StatefulSet): %v", err)
	}
	if err := s.Scale(ctx, ref(elastiv1alpha1.KindRollout, "web"), 1); !errors.Is(err, scaletarget.ErrRolloutsUnavailable) {
		t.Errorf("Scale(Rollout) error = %v, want ErrRolloutsUnavailable", err)
	}
	if err := s.Scale(ctx, ref("CronJob", "web"), 1); !errors.Is(err, scaletarget.ErrUnsupportedKind) {
		t.Errorf("Scale(CronJob) error = %v, want ErrUnsupportedKind", err)
	}
	f.expectKube(expectScalePatch(deploymentsResource, "web", 2))
	f.expectKube(expectScalePatch(statefulSetsResource, "db", 0))
	f.verify()

	// The patch reached the object (the fake applies it to the parent).
	d, err := f.kubeClient.AppsV1().Deployments(testNamespace).Get(ctx, "web", metav1.GetOptions{})
	if err != nil || d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("deployment after Scale = %v, %v; want 2 replicas", replicasOf(d), err)
	}
}
