package controller

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	core "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/directory"
	"github.com/elasti-dev/elasti/pkg/names"
	"github.com/elasti-dev/elasti/pkg/workloop"
)

var webV2Key = types.NamespacedName{Namespace: testNamespace, Name: "web-v2"}

// movedSeed is an ElastiService whose spec.service has just changed from
// web to web-v2, both selecting the target's pods. Before the change web
// was asleep: its resolver slice points at its own resolver port 20000,
// which status records.
func movedSeed(f *fixture, replicas int32) (es *elastiv1alpha1.ElastiService, oldPublic, newPublic *corev1.Service) {
	es = withPorts(withStatus(newElastiService("web", "web-v2", "web"), elastiv1alpha1.ModeProxy, metav1.ConditionTrue, ReasonReconciled),
		webPorts()...)
	oldPublic, newPublic = newPublicService("web"), newPublicService("web-v2")
	newPublic.Spec.Selector = oldPublic.Spec.Selector
	f.elastiServices = append(f.elastiServices, es)
	f.services = append(f.services, oldPublic, newPublic, privateServiceFor(es, oldPublic), privateServiceFor(es, newPublic))
	f.endpointSlices = append(f.endpointSlices,
		withRoutes(resolverSliceFor(es, oldPublic, "10.0.0.1"), oldPublic, map[int32]int32{80: 20000}))
	f.deployments = append(f.deployments, newDeployment("web", replicas))
	f.resolverSlices = []*discoveryv1.EndpointSlice{declaringResolverSlice("resolver-1", ep("10.0.0.1", ptr.To(true), false))}
	return es, oldPublic, newPublic
}

func wantClaimed(t *testing.T, f *fixture, svc types.NamespacedName, claimed bool) {
	t.Helper()
	e, ok := f.directory.Lookup(svc)
	if claimed && (!ok || e.ElastiService != webKey) {
		t.Errorf("directory maps %s to %v, %v; want ElastiService web: a wake for it must reach the target", svc, e.ElastiService, ok)
	}
	if !claimed && ok {
		t.Errorf("directory still maps %s to %v after the move", svc, e.ElastiService)
	}
}

// A move while the target is at zero wakes it, and the old Service stays
// fronted as it was: its resolver slice is kept current (here, a resolver
// pod replaced), on its own resolver port, which status keeps recording
// next to the new Service's, and the directory keeps mapping it.
func TestMoveAtZeroKeepsTheOldServiceFronted(t *testing.T) {
	f := newFixture(t)
	es, oldPublic, newPublic := movedSeed(f, 0)
	f.resolverSlices = []*discoveryv1.EndpointSlice{declaringResolverSlice("resolver-1", ep("10.0.0.2", ptr.To(true), false))}

	f.expectKube(expectScalePatch(deploymentsResource, "web", 2))
	f.expectKube(expectUpdate(endpointSlicesResource,
		withRoutes(resolverSliceFor(es, oldPublic, "10.0.0.2"), oldPublic, map[int32]int32{80: 20000})))
	f.expectKube(expectCreate(endpointSlicesResource, resolverSliceFor(es, newPublic, "10.0.0.2")))
	f.expectElasti(expectStatusUpdate(withPorts(expectedStatus(es, elastiv1alpha1.ModeProxy, metav1.ConditionTrue, ReasonReconciled, t0),
		rp("web-v2", "http", 80, 20001), rp("web", "http", 80, 20000))))
	f.expectEvents("Normal " + ReasonWokenForMove)

	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	wantNoError(t, c.syncElastiService(ctx, keyOf(es)))
	f.verify()
	wantClaimed(t, f, webKey, true)
	wantClaimed(t, f, webV2Key, true)
	if !c.Moving(deliver(t, f, "web")) {
		t.Error("Moving = false while the old Service is fronted; the idle poller could scale the target down mid-move")
	}
}

// The old Service is let go of in two steps: its resolver slice goes only
// once one of its own endpoints serves from a pod that stays (the same
// check as leaving proxy mode), and its resolver port, private Service and
// directory claim stay for moveDrain after that, for what kube-proxy still
// sends the resolver. Then everything of it goes and its port is freed.
func TestMoveLetsTheOldServiceGoForALivePodThenDrains(t *testing.T) {
	f := newFixture(t)
	es, _, _ := movedSeed(f, 1)
	// The EndpointSlice controller lists a pod that is already gone.
	f.endpointSlices = append(f.endpointSlices,
		targetSlice("web", podEP("10.1.0.1", "web-1", "uid-1")), targetSlice("web-v2", podEP("10.1.0.1", "web-1", "uid-1")))
	// An earlier ElastiService of the same name (another UID) owns this
	// one: it is not ours to delete.
	earlier := newElastiService("web", "legacy", "web")
	earlier.UID = "earlier-uid"
	f.services = append(f.services, privateServiceFor(earlier, newPublicService("legacy")))

	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)

	// 1. The old Service's only ready endpoint is a pod that is gone: it
	// stays fronted. The new one has no resolver slice to take away.
	f.expectKube(core.NewGetAction(podsResource, testNamespace, "web-1"))
	f.expectElasti(expectStatusUpdate(withPorts(expectedStatus(es, elastiv1alpha1.ModeServe, metav1.ConditionTrue, ReasonReconciled, t0),
		rp("web-v2", "http", 80, 20001), rp("web", "http", 80, 20000))))
	f.expectEvents("Normal " + ReasonSwitchedToServe)
	wantNoError(t, c.syncElastiService(ctx, keyOf(es)))
	f.verify()
	es = deliver(t, f, "web")
	f.elastiClient.ClearActions()

	// 2. The pod is there to stay: the old resolver slice goes.
	if _, err := f.kubeClient.CoreV1().Pods(testNamespace).Create(context.Background(), pod("web-1", "uid-1", nil, ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.kubeClient.ClearActions()
	f.expectKube(core.NewGetAction(podsResource, testNamespace, "web-1"))
	f.expectKube(expectDelete(endpointSlicesResource, names.ResolverSlice("web")))
	wantNoError(t, c.syncElastiService(ctx, keyOf(es)))
	f.verify()
	removeFromCache(t, f, names.ResolverSlice("web"))

	// 3. Draining: nothing changes until moveDrain has passed.
	f.clock.Step(moveDrain - time.Second)
	wantNoError(t, c.syncElastiService(ctx, keyOf(es)))
	f.verify()
	wantClaimed(t, f, webKey, true)
	if !c.Moving(es) {
		t.Error("Moving = false while the old Service drains")
	}

	// 4. Drained: its private Service goes and its port is freed.
	f.clock.Step(time.Second)
	f.expectKube(expectDelete(servicesResource, names.PrivateService("web")))
	f.expectElasti(expectStatusUpdate(withPorts(expectedStatus(es, elastiv1alpha1.ModeServe, metav1.ConditionTrue, ReasonReconciled, f.clock.Now()),
		rp("web-v2", "http", 80, 20001))))
	wantNoError(t, c.syncElastiService(ctx, keyOf(es)))
	f.verify()
	wantClaimed(t, f, webKey, false)
	wantClaimed(t, f, webV2Key, true)
	if inUse, _ := c.ResolverPorts(); inUse != 1 {
		t.Errorf("%d resolver ports in use after the move, want 1: the old Service's port leaked", inUse)
	}
	if es = deliver(t, f, "web"); c.Moving(es) {
		t.Error("Moving = true after the move completed")
	}
}

// removeFromCache drops the slice from the informer cache, as its delete
// event would.
func removeFromCache(t *testing.T, f *fixture, name string) {
	t.Helper()
	obj, exists, err := f.sliceIndexer.GetByKey(testNamespace + "/" + name)
	if err != nil || !exists {
		t.Fatalf("slice %s not in the cache: %v", name, err)
	}
	if err := f.sliceIndexer.Delete(obj); err != nil {
		t.Fatal(err)
	}
}

// A move to a Service that does not exist yet is ServiceNotFound, but the
// old Service is still served meanwhile: it keeps its resolver port, and
// its resolver slice stays current.
func TestMoveToAMissingServiceKeepsTheOldOneFronted(t *testing.T) {
	f := newFixture(t)
	es, oldPublic, _ := movedSeed(f, 0)
	f.services = slices.DeleteFunc(f.services, func(s *corev1.Service) bool {
		return s.Name == "web-v2" || s.Name == names.PrivateService("web-v2")
	})
	f.resolverSlices = []*discoveryv1.EndpointSlice{declaringResolverSlice("resolver-1", ep("10.0.0.2", ptr.To(true), false))}

	f.expectKube(expectScalePatch(deploymentsResource, "web", 2))
	f.expectKube(expectUpdate(endpointSlicesResource,
		withRoutes(resolverSliceFor(es, oldPublic, "10.0.0.2"), oldPublic, map[int32]int32{80: 20000})))
	f.expectElasti(expectStatusUpdate(withPorts(expectedStatus(es, elastiv1alpha1.ModeProxy, metav1.ConditionFalse, ReasonServiceNotFound, t0),
		webPorts()...)))
	f.expectEvents("Normal "+ReasonWokenForMove, "Warning "+ReasonServiceNotFound)

	wantWaiting(t, f.run(keyOf(es)), ReasonServiceNotFound)
	wantClaimed(t, f, webKey, true)
}

// An ElastiService deleted in the middle of a move keeps the old Service's
// resolver slice, as it does its own Service's, until that Service has a
// ready endpoint of its own (or the deletion grace ends): deleting it at
// once would leave the old Service dark.
func TestDeletionMidMoveKeepsTheOldServiceFronted(t *testing.T) {
	f := newFixture(t)
	es, _, _ := movedSeed(f, 1)
	deleting(es, time.Second)
	f.directory.Claim(webV2Key, directory.EntryFor(es))
	// The new Service is served by the pod; the old one is not yet.
	f.endpointSlices = append(f.endpointSlices,
		targetSlice("web-v2", ep("10.1.0.1", ptr.To(true), false)), targetSlice("web", ep("10.1.0.1", ptr.To(false), false)))

	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	err := c.syncElastiService(ctx, keyOf(es))
	var after workloop.RequeueAfter
	if !errors.As(err, &after) || time.Duration(after) != 5*time.Second {
		t.Fatalf("sync returned %v, want RequeueAfter(5s) while the old Service has only the resolver", err)
	}
	for _, a := range filterInformerActions(f.kubeClient.Actions()) {
		if a.GetVerb() == "delete" {
			t.Errorf("deleted %v while the old Service had no ready endpoint of its own", a)
		}
	}

	// The old Service's pod is ready: now everything goes.
	if err := f.sliceIndexer.Update(targetSlice("web", ep("10.1.0.1", ptr.To(true), false))); err != nil {
		t.Fatal(err)
	}
	f.catchUp(ctx, es) // the first sync wrote status
	f.kubeClient.ClearActions()
	wantNoError(t, c.syncElastiService(ctx, keyOf(es)))
	deleted := false
	for _, a := range filterInformerActions(f.kubeClient.Actions()) {
		if d, ok := a.(core.DeleteAction); ok && d.GetResource().Resource == "endpointslices" && d.GetName() == names.ResolverSlice("web") {
			deleted = true
		}
	}
	if !deleted {
		t.Errorf("the old Service's resolver slice was not deleted once it had a ready endpoint; actions %v", f.kubeClient.Actions())
	}
}
