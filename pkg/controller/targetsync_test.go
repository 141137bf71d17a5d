package controller

import (
	"fmt"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/scaletarget"
)

// capture replaces the controller's enqueues and returns the keys they got,
// sorted, on each call of the returned function; urgent keys are marked so.
func capture(c *Controller) func() []string {
	var keys []string
	c.queue.(*testQueue).add = func(k types.NamespacedName) { keys = append(keys, k.String()) }
	c.queue.(*testQueue).addUrgent = func(k types.NamespacedName) { keys = append(keys, k.String()+" (urgent)") }
	return func() []string {
		out := slices.Sorted(slices.Values(keys))
		keys = nil
		return out
	}
}

func wantKeys(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s enqueued %v, want %v", what, got, want)
	}
}

func TestSyncTargetEnqueuesElastiServicesNamingIt(t *testing.T) {
	f := newFixture(t)
	legacy := newElastiService("legacy", "web2", "web")
	legacy.Spec.ScaleTargetRef.Kind = elastiv1alpha1.LegacyKindDeployments
	sts := newElastiService("sts", "web3", "web")
	sts.Spec.ScaleTargetRef.Kind = elastiv1alpha1.KindStatefulSet
	f.elastiServices = append(f.elastiServices,
		newElastiService("web", "web", "web"), legacy, sts, newElastiService("other", "other", "other"))
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	keys := capture(c)

	wantNoError(t, c.enqueueForTarget(ctx, scaletarget.Ref{Kind: elastiv1alpha1.KindDeployment, Namespace: testNamespace, Name: "web"}))
	wantKeys(t, "Deployment shop/web", keys(), "shop/legacy", "shop/web")
	wantNoError(t, c.enqueueForTarget(ctx, scaletarget.Ref{Kind: elastiv1alpha1.KindStatefulSet, Namespace: testNamespace, Name: "web"}))
	wantKeys(t, "StatefulSet shop/web", keys(), "shop/sts")
	wantNoError(t, c.enqueueForTarget(ctx, scaletarget.Ref{Kind: elastiv1alpha1.KindDeployment, Namespace: "elsewhere", Name: "web"}))
	wantKeys(t, "Deployment elsewhere/web", keys())
}

// A target at zero whose Service no resolver slice fronts yet has lost, or
// is losing, its endpoints: its ElastiService must not wait behind others.
func TestTargetAtZeroWithoutResolverSliceIsUrgent(t *testing.T) {
	f := newFixture(t)
	fronted := newElastiService("fronted", "api", "api")
	f.elastiServices = append(f.elastiServices,
		newElastiService("web", "web", "web"), fronted, newElastiService("up", "up", "up"))
	f.deployments = append(f.deployments, newDeployment("web", 0), newDeployment("api", 0), newDeployment("up", 1))
	f.endpointSlices = append(f.endpointSlices, resolverSliceFor(fronted, newPublicService("api"), "10.0.0.1"))
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	keys := capture(c)

	for _, name := range []string{"web", "api", "up", "missing"} {
		wantNoError(t, c.enqueueForTarget(ctx, scaletarget.Ref{Kind: elastiv1alpha1.KindDeployment, Namespace: testNamespace, Name: name}))
	}
	wantKeys(t, "Deployments at zero and up", keys(), "shop/fronted", "shop/up", "shop/web (urgent)")
}

// Every ElastiService naming a target is told its replicas, so a
// scale-up from zero by anyone starts its cooldown; one being deleted, or
// whose target cannot be read, is told nothing.
func TestTargetReplicasReachTheReplicasObserver(t *testing.T) {
	f := newFixture(t)
	deleting := newElastiService("deleting", "other", "web")
	deleting.DeletionTimestamp = &metav1.Time{Time: t0}
	f.elastiServices = append(f.elastiServices, newElastiService("web", "web", "web"), deleting, newElastiService("gone", "gone", "gone"))
	f.deployments = append(f.deployments, newDeployment("web", 3))
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	capture(c)

	for _, name := range []string{"web", "gone"} {
		wantNoError(t, c.enqueueForTarget(ctx, scaletarget.Ref{Kind: elastiv1alpha1.KindDeployment, Namespace: testNamespace, Name: name}))
	}
	if got, want := fmt.Sprint(f.replicas.seen), "[shop/web=3]"; got != want {
		t.Errorf("observed %s, want %s", got, want)
	}
}

func replicasOf(d *appsv1.Deployment) any {
	if d == nil || d.Spec.Replicas == nil {
		return nil
	}
	return *d.Spec.Replicas
}

// A workload named in spec.wakeWith maps to every ElastiService that names
// it, so its readiness takes each group's wake a step on; a namesake of
// another kind or namespace maps to none.
func TestDependencyEventEnqueuesTheGroupsNamingIt(t *testing.T) {
	f := newFixture(t)
	db := elastiv1alpha1.Dependency{APIVersion: "apps/v1", Kind: elastiv1alpha1.KindStatefulSet, Name: "db"}
	shop := newElastiService("shop", "shop", "shop")
	shop.Spec.WakeWith = []elastiv1alpha1.Dependency{db, {APIVersion: "apps/v1", Kind: elastiv1alpha1.LegacyKindDeployments, Name: "worker"}}
	blog := newElastiService("blog", "blog", "blog")
	blog.Spec.WakeWith = []elastiv1alpha1.Dependency{db}
	f.elastiServices = append(f.elastiServices, shop, blog, newElastiService("web", "web", "web"))
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	keys := capture(c)

	wantNoError(t, c.enqueueForTarget(ctx, scaletarget.Ref{Kind: elastiv1alpha1.KindStatefulSet, Namespace: testNamespace, Name: "db"}))
	wantKeys(t, "StatefulSet shop/db", keys(), "shop/blog", "shop/shop")
	wantNoError(t, c.enqueueForTarget(ctx, scaletarget.Ref{Kind: elastiv1alpha1.KindDeployment, Namespace: testNamespace, Name: "worker"}))
	wantKeys(t, "Deployment shop/worker", keys(), "shop/shop")
	wantNoError(t, c.enqueueForTarget(ctx, scaletarget.Ref{Kind: elastiv1alpha1.KindDeployment, Namespace: testNamespace, Name: "db"}))
	wantKeys(t, "Deployment shop/db", keys())
	wantNoError(t, c.enqueueForTarget(ctx, scaletarget.Ref{Kind: elastiv1alpha1.KindStatefulSet, Namespace: "elsewhere", Name: "db"}))
	wantKeys(t, "StatefulSet elsewhere/db", keys())
}
