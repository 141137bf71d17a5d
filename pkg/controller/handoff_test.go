package controller

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/names"
	"github.com/elasti-dev/elasti/pkg/workloop"
)

// fenced sets a resolver slice's fence.
func fenced(slice *discoveryv1.EndpointSlice, at time.Time, keys ...string) *discoveryv1.EndpointSlice {
	if slice.Annotations == nil {
		slice.Annotations = map[string]string{}
	}
	slice.Annotations[AnnotationFencedEndpoints] = strings.Join(keys, ",")
	slice.Annotations[AnnotationFencedAt] = at.UTC().Format(time.RFC3339)
	return slice
}

// wakingSeed is an ElastiService in proxy mode whose target was just woken:
// the resolver slice fences 10.1.0.1, the pod that served before the scale
// to zero, and the EndpointSlice controller still lists it as ready.
func wakingSeed(f *fixture, since time.Duration, public ...discoveryv1.Endpoint) *elastiv1alpha1.ElastiService {
	es := withStatus(newElastiService("web", "web", "web"), elastiv1alpha1.ModeProxy, metav1.ConditionTrue, ReasonReconciled)
	svc := newPublicService("web")
	f.elastiServices = append(f.elastiServices, es)
	f.services = append(f.services, svc, privateServiceFor(es, svc))
	f.deployments = append(f.deployments, newDeployment("web", 2))
	f.resolverSlices = readyResolver()
	f.endpointSlices = append(f.endpointSlices, targetSlice("web", public...),
		fenced(resolverSliceFor(es, svc, "10.0.0.1"), t0, "10.1.0.1"))
	f.clock = testingclock.NewFakeClock(t0.Add(since))
	return es
}

// A wake soon after a scale to zero finds the old pod still listed as
// ready: the resolver stays in front until a pod of the wake is ready, or
// the fence lapses.
func TestFenceKeepsTheResolverUntilAWokenPodIsReady(t *testing.T) {
	old, woken := ep("10.1.0.1", ptr.To(true), false), ep("10.1.0.2", ptr.To(true), false)
	t.Run("only the fenced pod is ready", func(t *testing.T) {
		f := newFixture(t)
		es := wakingSeed(f, 5*time.Second, old)
		f.expectElasti(expectStatusUpdate(withPorts(expectedStatus(es, elastiv1alpha1.ModeProxy, metav1.ConditionTrue, ReasonReconciled, f.clock.Now()), webPorts()...)))
		err := f.run(keyOf(es))
		var after workloop.RequeueAfter
		if !errors.As(err, &after) || time.Duration(after) != fenceTimeout-5*time.Second {
			t.Fatalf("sync returned %v, want a requeue when the fence lapses", err)
		}
	})
	t.Run("a woken pod is ready", func(t *testing.T) {
		f := newFixture(t)
		es := wakingSeed(f, 5*time.Second, old, woken)
		f.expectKube(expectDelete(endpointSlicesResource, names.ResolverSlice("web")))
		f.expectElasti(expectStatusUpdate(withPorts(expectedStatus(es, elastiv1alpha1.ModeServe, metav1.ConditionTrue, ReasonReconciled, f.clock.Now()), webPorts()...)))
		f.expectEvents("Normal " + ReasonSwitchedToServe)
		wantNoError(t, f.run(keyOf(es)))
	})
	t.Run("the fence has lapsed", func(t *testing.T) {
		f := newFixture(t)
		es := wakingSeed(f, fenceTimeout, old)
		f.expectKube(expectDelete(endpointSlicesResource, names.ResolverSlice("web")))
		f.expectElasti(expectStatusUpdate(withPorts(expectedStatus(es, elastiv1alpha1.ModeServe, metav1.ConditionTrue, ReasonReconciled, f.clock.Now()), webPorts()...)))
		f.expectEvents("Normal " + ReasonSwitchedToServe)
		wantNoError(t, f.run(keyOf(es)))
	})
}

func TestFenceGrowsOnlyAtZeroAndStaysSmall(t *testing.T) {
	f := fence{}.with([]string{"b", "a", "b"}, t0)
	if strings.Join(f.keys, ",") != "a,b" || !f.at.Equal(t0) || !f.has("a") || f.has("c") {
		t.Fatalf("fence %+v", f)
	}
	if g := f.with([]string{"c"}, t0.Add(time.Second)); !g.at.Equal(t0) || !g.has("c") || f.has("c") {
		t.Errorf("adding to a fence moved its start or changed the original: %+v, %+v", g, f)
	}
	many := make([]string, 2*maxFenced)
	for i := range many {
		many[i] = string(rune('a'+i%26)) + strings.Repeat("x", i/26)
	}
	if n := len(fence{}.with(many, t0).keys); n != maxFenced {
		t.Errorf("a fence of %d keys holds %d, want the cap %d", len(many), n, maxFenced)
	}
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}}}
	f.annotate(slice.Annotations)
	if got := fenceOf(slice, t0.Add(fenceTimeout-time.Second)); !got.has("b") {
		t.Errorf("fence read back as %+v", got)
	}
	if got := fenceOf(slice, t0.Add(fenceTimeout)); len(got.keys) != 0 {
		t.Errorf("a lapsed fence read back as %+v", got)
	}
	slice.Annotations[AnnotationFencedAt] = "yesterday"
	if got := fenceOf(slice, t0); len(got.keys) != 0 {
		t.Errorf("an unreadable fence read back as %+v", got)
	}
}

// servingSeed is an ElastiService serving from one ready pod. It has no
// private Service: it never needed the resolver.
func servingSeed(f *fixture) *elastiv1alpha1.ElastiService {
	es := withStatus(newElastiService("web", "web", "web"), elastiv1alpha1.ModeServe, metav1.ConditionTrue, ReasonReconciled)
	es.Status.ResolverPorts = webPorts()
	svc := newPublicService("web")
	f.elastiServices = append(f.elastiServices, es)
	f.services = append(f.services, svc)
	f.deployments = append(f.deployments, newDeployment("web", 1))
	f.endpointSlices = append(f.endpointSlices, targetSlice("web", ep("10.1.0.1", ptr.To(true), false)))
	return es
}

// frontAsync starts FrontForScaleDown and returns once its key is queued,
// ahead of the others, with the channel of keys queued after it.
func frontAsync(t *testing.T, c *Controller, es *elastiv1alpha1.ElastiService) (<-chan error, <-chan types.NamespacedName) {
	queued := make(chan types.NamespacedName, 4)
	urgent := make(chan types.NamespacedName, 1)
	c.queue.(*testQueue).add = func(key types.NamespacedName) { queued <- key }
	c.queue.(*testQueue).addUrgent = func(key types.NamespacedName) { urgent <- key }
	result := make(chan error, 1)
	go func() {
		done, err := c.FrontForScaleDown(context.Background(), es)
		if err == nil {
			done(true)
		}
		result <- err
	}()
	if key := <-urgent; key != keyOf(es) {
		t.Fatalf("queued %v urgently, want %v", key, keyOf(es))
	}
	return result, queued
}

// The idle poller's scale-down with KubeElasti's resolver in the pool (no
// per-port routing): it dials the private Service, so the sync creates that
// and waits until the EndpointSlice controller has published it; then it puts the resolver in front while
// the pod still serves, keeps it there on later syncs, and the poller
// proceeds only once it is there.
func TestScaleDownHandoffFrontsBeforeTheScale(t *testing.T) {
	f := newFixture(t)
	es := servingSeed(f)
	f.resolverSlices = readyResolver()
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	result, queued := frontAsync(t, c, es)

	err := c.syncElastiService(ctx, keyOf(es))
	var after workloop.RequeueAfter
	if !errors.As(err, &after) || time.Duration(after) != privateServiceRecheck {
		t.Fatalf("first sync returned %v, want a requeue to look for the private service's endpoints", err)
	}
	private, err := f.kubeClient.CoreV1().Services(testNamespace).Get(ctx, names.PrivateService("web"), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("private service not created for the handoff: %v", err)
	}
	for _, a := range filterInformerActions(f.kubeClient.Actions()) {
		if a.GetResource().Resource == "endpointslices" {
			t.Errorf("fronted before the private service had endpoints: %v", a)
		}
	}
	select {
	case err := <-result:
		t.Fatalf("FrontForScaleDown returned %v before the resolver was in front", err)
	default:
	}

	// The EndpointSlice controller publishes the private Service: its
	// event brings the waiting ElastiService back.
	if err := c.serviceIndexer.Add(private); err != nil {
		t.Fatal(err)
	}
	if err := f.sliceIndexer.Add(targetSlice(private.Name, ep("10.1.0.1", ptr.To(true), false))); err != nil {
		t.Fatal(err)
	}
	if err := c.enqueueForSliceService(ctx, types.NamespacedName{Namespace: testNamespace, Name: private.Name}); err != nil {
		t.Fatal(err)
	}
	select {
	case key := <-queued:
		if key != keyOf(es) {
			t.Errorf("private slice event queued %v, want %v", key, keyOf(es))
		}
	default:
		t.Errorf("private slice event queued nothing; the handoff would wait for privateServiceRecheck")
	}

	f.catchUp(ctx, es) // the first sync wrote status
	err = c.syncElastiService(ctx, keyOf(es))
	if !errors.As(err, &after) || time.Duration(after) != handoffTimeout {
		t.Fatalf("sync returned %v, want a requeue when the handoff times out", err)
	}
	if err := <-result; err != nil {
		t.Fatalf("FrontForScaleDown: %v", err)
	}
	created, err := f.kubeClient.DiscoveryV1().EndpointSlices(testNamespace).Get(ctx, names.ResolverSlice("web"), metav1.GetOptions{})
	if err != nil || len(created.Endpoints) != 1 || created.Endpoints[0].Addresses[0] != "10.0.0.1" {
		t.Fatalf("resolver slice %+v (%v), want one endpoint, the resolver's", created, err)
	}

	// The scale write is done but this cache still shows the pod: the
	// resolver stays.
	if err := f.sliceIndexer.Add(created); err != nil {
		t.Fatal(err)
	}
	f.catchUp(ctx, es)
	f.kubeClient.ClearActions()
	_ = c.syncElastiService(ctx, keyOf(es))
	for _, a := range filterInformerActions(f.kubeClient.Actions()) {
		if a.GetVerb() == "delete" {
			t.Errorf("a sync during the handoff deleted %v", a)
		}
	}

	// A sync that sees the target at zero ends the handoff.
	scaleUp(f, "web", 0)
	f.catchUp(ctx, es)
	wantNoError(t, c.syncElastiService(ctx, keyOf(es)))
	if left := c.handoffs.remaining(keyOf(es), f.clock.Now()); left != 0 {
		t.Errorf("the handoff is still on after the target was seen at zero (%s left)", left)
	}
}

// With only elasti's resolver (per-port routing declared), which reads the
// public Service's own slices, the handoff fronts in its first sync: it
// waits for no Service create, which at a fleet's scale can take seconds.
// The private Service is still asked for, for what may dial it.
func TestScaleDownHandoffWithElastiResolverFrontsAtOnce(t *testing.T) {
	f := newFixture(t)
	es := servingSeed(f)
	f.resolverSlices = []*discoveryv1.EndpointSlice{declaringResolverSlice("resolver-1", ep("10.0.0.1", ptr.To(true), false))}
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	result, _ := frontAsync(t, c, es)

	err := c.syncElastiService(ctx, keyOf(es))
	var after workloop.RequeueAfter
	if !errors.As(err, &after) || time.Duration(after) != handoffTimeout {
		t.Fatalf("first sync returned %v, want a requeue when the handoff times out", err)
	}
	if err := <-result; err != nil {
		t.Fatalf("FrontForScaleDown: %v", err)
	}
	if _, err := f.kubeClient.DiscoveryV1().EndpointSlices(testNamespace).Get(ctx, names.ResolverSlice("web"), metav1.GetOptions{}); err != nil {
		t.Fatalf("resolver slice not written in the first sync: %v", err)
	}
	if _, err := f.kubeClient.CoreV1().Services(testNamespace).Get(ctx, names.PrivateService("web"), metav1.GetOptions{}); err != nil {
		t.Errorf("private service not asked for: %v", err)
	}
}

// Without a ready resolver pod nothing could hold a request, so the
// scale-down is refused and no slice is written.
func TestScaleDownHandoffWithoutResolverIsRefused(t *testing.T) {
	f := newFixture(t)
	es := servingSeed(f)
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	result, _ := frontAsync(t, c, es)
	_ = c.syncElastiService(ctx, keyOf(es))
	if err := <-result; !errors.Is(err, ErrNoResolver) {
		t.Fatalf("FrontForScaleDown returned %v, want ErrNoResolver", err)
	}
	for _, a := range filterInformerActions(f.kubeClient.Actions()) {
		if a.GetResource().Resource == "endpointslices" {
			t.Errorf("wrote %v with no resolver to front", a)
		}
	}
	if left := c.handoffs.remaining(keyOf(es), f.clock.Now()); left != 0 {
		t.Errorf("a refused handoff is still on (%s left)", left)
	}
}

// catchUp puts what the fake API server holds for es into the cache, as its
// informer would.
func (f *fixture) catchUp(ctx context.Context, es *elastiv1alpha1.ElastiService) {
	f.t.Helper()
	latest, err := f.elastiClient.ElastiV1alpha1().ElastiServices(es.Namespace).Get(ctx, es.Name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	// The fake clientset keeps resourceVersion as it was; the apiserver
	// would have moved it past the one our write superseded.
	latest.ResourceVersion += "1"
	if err := f.esIndexer.Update(latest); err != nil {
		f.t.Fatal(err)
	}
}
