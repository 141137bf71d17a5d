package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/directory"
	"github.com/elasti-dev/elasti/pkg/names"
)

// releaseSeed is a sleeping Service's ElastiService, not being deleted:
// the resolver fronts web, whose target is at replicas.
func releaseSeed(f *fixture, replicas int32) *elastiv1alpha1.ElastiService {
	es := withStatus(newElastiService("web", "web", "web"), elastiv1alpha1.ModeProxy, metav1.ConditionTrue, ReasonReconciled)
	es.Finalizers = []string{"example.com/keep", elastiv1alpha1.Finalizer}
	public := newPublicService("web")
	f.elastiServices = append(f.elastiServices, es)
	f.services = append(f.services, public, privateServiceFor(es, public))
	f.endpointSlices = append(f.endpointSlices, resolverSliceFor(es, public, "10.0.0.1"))
	f.deployments = append(f.deployments, newDeployment("web", replicas))
	f.resolverSlices = readyResolver()
	f.directory.Claim(webKey, directory.EntryFor(es))
	return es
}

// An uninstall releases a sleeping Service make before break: the target
// is scaled up, the resolver slice stays while no pod is ready, and only a
// ready pod lets the slice, the private Service and the finalizer go. The
// ElastiService itself is never deleted.
func TestReleaseStepIsMakeBeforeBreak(t *testing.T) {
	f := newFixture(t)
	es := releaseSeed(f, 0)
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)

	f.expectKube(expectScalePatch(deploymentsResource, "web", 2))
	f.expectEvents("Normal " + ReasonTargetRestored)
	done, progress, err := c.releaseStep(ctx, keyOf(es))
	wantNoError(t, err)
	if done || !strings.Contains(progress, "Scaled Deployment") {
		t.Errorf("after the scale-up: done %v, %q; want not done, saying it scaled", done, progress)
	}
	f.verify()

	// The scale-up has landed; its pod is not ready yet: nothing is
	// removed.
	f = newFixture(t)
	es = releaseSeed(f, 2)
	f.endpointSlices = append(f.endpointSlices, targetSlice("web", ep("10.1.0.1", ptr.To(false), false)))
	c = f.newController(ctx)
	done, progress, err = c.releaseStep(ctx, keyOf(es))
	wantNoError(t, err)
	if done || !strings.Contains(progress, "Waiting for a ready pod") {
		t.Errorf("with no ready pod: done %v, %q; want waiting", done, progress)
	}
	f.verify()

	// Ready: the resolver stops fronting web, and elasti lets go of the
	// ElastiService without deleting it.
	if err := f.sliceIndexer.Update(targetSlice("web", ep("10.1.0.1", ptr.To(true), false))); err != nil {
		t.Fatal(err)
	}
	f.expectKube(expectDelete(endpointSlicesResource, names.ResolverSlice("web")))
	f.expectKube(expectDelete(servicesResource, names.PrivateService("web")))
	f.expectElasti(expectFinalizerPatch(es, "example.com/keep"))
	done, progress, err = c.releaseStep(ctx, keyOf(es))
	wantNoError(t, err)
	if !done || !strings.Contains(progress, "Released") {
		t.Errorf("with a ready pod: done %v, %q; want released", done, progress)
	}
	f.verify()
}

// A target that never gets a ready pod fails the release when its time is
// up, naming it, and the resolver keeps fronting the Service.
func TestReleaseFailsWhenNoPodBecomesReady(t *testing.T) {
	f := newFixture(t)
	es := releaseSeed(f, 2)
	f.endpointSlices = append(f.endpointSlices, targetSlice("web", ep("10.1.0.1", ptr.To(false), false)))
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)

	ctx, cancel := context.WithTimeout(ctx, 2*releasePoll)
	defer cancel()
	err := c.Release(ctx, keyOf(es))
	if err == nil || !strings.Contains(err.Error(), "Deployment") || !strings.Contains(err.Error(), "web") {
		t.Fatalf("Release = %v; want an error naming the target that has no ready pod", err)
	}
	f.verify() // nothing written: the slice, the private Service and the finalizer stay
}

// An ElastiService that lost its Service to another only loses elasti's
// finalizer: the holder's target and slice are not its to touch.
func TestReleaseStepOfConflictLoserOnlyDropsFinalizer(t *testing.T) {
	f := newFixture(t)
	holder := releaseSeed(f, 0)
	loser := newElastiService("web-too", "web", "other")
	loser.Finalizers = []string{elastiv1alpha1.Finalizer}
	loser.CreationTimestamp = metav1.NewTime(holder.CreationTimestamp.Add(time.Minute))
	f.elastiServices = append(f.elastiServices, loser)
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)

	f.expectElasti(expectFinalizerPatch(loser))
	done, _, err := c.releaseStep(ctx, keyOf(loser))
	wantNoError(t, err)
	if !done {
		t.Error("the loser is not released")
	}
	f.verify()
}
