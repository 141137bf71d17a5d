package controller

import (
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/directory"
	"github.com/elasti-dev/elasti/pkg/names"
	"github.com/elasti-dev/elasti/pkg/workloop"
)

// 12a.
func TestFinalizeRestoresTargetAtZero(t *testing.T) {
	f := newFixture(t)
	es := deletionSeed(f, time.Second, 0)

	f.expectKube(expectScalePatch(deploymentsResource, "web", 2))
	f.expectEvents("Normal " + ReasonTargetRestored)

	wantNoError(t, f.run(keyOf(es)))
}

func TestFinalizeRestoresStatefulSetAtZero(t *testing.T) {
	f := newFixture(t)
	es := deletionSeed(f, time.Second, 0)
	es.Spec.ScaleTargetRef = elastiv1alpha1.ScaleTargetRef{APIVersion: elastiv1alpha1.APIVersionApps, Kind: elastiv1alpha1.KindStatefulSet, Name: "db"}
	es.Spec.MinTargetReplicas = 0 // defaults to 1
	f.statefulSets = append(f.statefulSets, newStatefulSet("db", 0))

	f.expectKube(expectScalePatch(statefulSetsResource, "db", 1))
	f.expectEvents("Normal " + ReasonTargetRestored)

	wantNoError(t, f.run(keyOf(es)))
}

// 12b.
func TestFinalizeWaitsForReadyTargetWithinGrace(t *testing.T) {
	f := newFixture(t)
	es := deletionSeed(f, 10*time.Second, 2)
	es.Finalizers = []string{"example.com/keep", elastiv1alpha1.Finalizer}
	f.endpointSlices = append(f.endpointSlices, targetSlice("web", ep("10.1.0.1", ptr.To(false), false)))

	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)

	// Within the grace: nothing is deleted, the condition says why; look
	// again in at most 5s.
	f.expectElasti(expectStatusUpdate(expectedStatus(es, elastiv1alpha1.ModeProxy, metav1.ConditionFalse, ReasonWaitingForTarget, t0)))
	f.expectEvents("Normal " + ReasonWaitingForTarget)
	err := c.syncElastiService(ctx, keyOf(es))
	var after workloop.RequeueAfter
	if !errors.As(err, &after) || time.Duration(after) != 5*time.Second {
		t.Fatalf("sync returned %v, want RequeueAfter(5s)", err)
	}
	f.verify()
	if _, ok := f.directory.Lookup(webKey); !ok {
		t.Error("directory released while the resolver still fronts the Service")
	}

	// The informer delivers our status write; a sync on the cached copy it
	// replaced waits for it instead of writing on stale state.
	wantNoError(t, c.syncElastiService(ctx, keyOf(es)))
	f.verify()
	delivered := withStatus(es.DeepCopy(), elastiv1alpha1.ModeProxy, metav1.ConditionFalse, ReasonWaitingForTarget)
	delivered.ResourceVersion += "-status"
	if err := f.esIndexer.Update(delivered); err != nil {
		t.Fatal(err)
	}

	// Past the grace: the resolver stops fronting the Service regardless.
	f.clock.Step(20 * time.Second)
	f.expectKube(expectDelete(endpointSlicesResource, names.ResolverSlice("web")))
	f.expectKube(expectDelete(servicesResource, names.PrivateService("web")))
	f.expectElasti(expectFinalizerPatch(delivered, "example.com/keep"))
	wantNoError(t, c.syncElastiService(ctx, keyOf(es)))
	f.verify()
	if _, ok := f.directory.Lookup(webKey); ok {
		t.Error("directory still holds the Service after finalizing")
	}
}

func TestFinalizeRequeuesAtDeadline(t *testing.T) {
	f := newFixture(t)
	es := deletionSeed(f, deletionGrace-2*time.Second, 1)
	f.expectElasti(expectStatusUpdate(expectedStatus(es, elastiv1alpha1.ModeProxy, metav1.ConditionFalse, ReasonWaitingForTarget, t0)))
	f.expectEvents("Normal " + ReasonWaitingForTarget)

	err := f.run(keyOf(es))
	var after workloop.RequeueAfter
	if !errors.As(err, &after) || time.Duration(after) != 2*time.Second {
		t.Fatalf("sync returned %v, want RequeueAfter(2s), the time left in the grace", err)
	}
}

// 12c.
func TestFinalizeReadyTargetDeletesAndReleases(t *testing.T) {
	f := newFixture(t)
	es := deletionSeed(f, time.Second, 2)
	f.endpointSlices = append(f.endpointSlices, targetSlice("web", ep("10.1.0.1", ptr.To(true), false)))

	f.expectKube(expectDelete(endpointSlicesResource, names.ResolverSlice("web")))
	f.expectKube(expectDelete(servicesResource, names.PrivateService("web")))
	f.expectElasti(expectFinalizerPatch(es))

	wantNoError(t, f.run(keyOf(es)))
}

// Nothing to wait for when the target is gone (a Rollout without Argo
// counts as gone).
func TestFinalizeMissingTargetDoesNotWait(t *testing.T) {
	for _, ref := range []elastiv1alpha1.ScaleTargetRef{
		{APIVersion: elastiv1alpha1.APIVersionApps, Kind: elastiv1alpha1.KindDeployment, Name: "gone"},
		{APIVersion: elastiv1alpha1.APIVersionArgoV1, Kind: elastiv1alpha1.KindRollout, Name: "web"},
		{APIVersion: "batch/v1", Kind: "CronJob", Name: "web"},
	} {
		t.Run(ref.Kind, func(t *testing.T) {
			f := newFixture(t)
			es := deletionSeed(f, time.Second, 0)
			es.Spec.ScaleTargetRef = ref

			f.expectKube(expectDelete(endpointSlicesResource, names.ResolverSlice("web")))
			f.expectKube(expectDelete(servicesResource, names.PrivateService("web")))
			f.expectElasti(expectFinalizerPatch(es))

			wantNoError(t, f.run(keyOf(es)))
		})
	}
}

func TestFinalizeWithoutOurFinalizerDoesNothing(t *testing.T) {
	f := newFixture(t)
	es := deletionSeed(f, time.Second, 0)
	es.Finalizers = []string{"example.com/keep"}

	wantNoError(t, f.run(keyOf(es)))
}

// A deleted ElastiService that lost the ServiceConflict never managed the
// Service, so its finalizer must not touch the holder's resolver slice.
func TestFinalizeConflictLoserLeavesHolderAlone(t *testing.T) {
	f := newFixture(t)
	holder := withStatus(newElastiService("holder", "web", "web"), elastiv1alpha1.ModeProxy, metav1.ConditionTrue, ReasonReconciled)
	loser := deleting(withStatus(newElastiService("loser", "web", "web"), "", metav1.ConditionFalse, ReasonServiceConflict), time.Second)
	public := newPublicService("web")
	f.elastiServices = append(f.elastiServices, holder, loser)
	f.services = append(f.services, public, privateServiceFor(holder, public))
	f.endpointSlices = append(f.endpointSlices, resolverSliceFor(holder, public, "10.0.0.1"),
		targetSlice("web", ep("10.1.0.1", ptr.To(true), false)))
	f.deployments = append(f.deployments, newDeployment("web", 1))
	f.resolverSlices = readyResolver()
	f.directory.Claim(webKey, directory.EntryFor(holder))

	f.expectElasti(expectFinalizerPatch(loser))
	wantNoError(t, f.run(keyOf(loser)))
}

// While the WaitingForTarget condition is already recorded, a requeue
// during the deletion grace writes nothing and emits no event.
func TestFinalizeWaitingEventOnce(t *testing.T) {
	f := newFixture(t)
	es := deletionSeed(f, time.Second, 1)
	withStatus(es, elastiv1alpha1.ModeProxy, metav1.ConditionFalse, ReasonWaitingForTarget)

	err := f.run(keyOf(es))
	var after workloop.RequeueAfter
	if !errors.As(err, &after) {
		t.Fatalf("sync returned %v, want a RequeueAfter while waiting", err)
	}
}
