package controller

import (
	"fmt"

	"errors"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/scaletarget"
)

// capture replaces the controller's enqueues and returns the keys they got,
// sorted, on each call of the returned function; urgent keys are marked so.
func capture(c *Controller) func() []string {
	var keys []string
	c.enqueue = func(k cache.ObjectName) { keys = append(keys, k.String()) }
	c.enqueueUrgent = func(k cache.ObjectName) { keys = append(keys, k.String()+" (urgent)") }
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

func TestSyncSliceServiceEnqueues(t *testing.T) {
	f := newFixture(t)
	f.elastiServices = append(f.elastiServices,
		withStatus(newElastiService("proxy", "web", "web"), elastiv1alpha1.ModeProxy, metav1.ConditionTrue, ReasonReconciled),
		withStatus(newElastiService("serve", "api", "api"), elastiv1alpha1.ModeServe, metav1.ConditionTrue, ReasonReconciled),
		newElastiService("new", "new", "new"))
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	keys := capture(c)

	// The resolver's endpoints matter to every ElastiService not serving.
	wantNoError(t, c.enqueueForSliceService(ctx, types.NamespacedName{Namespace: resolverNamespace, Name: resolverService}))
	wantKeys(t, "resolver slices", keys(), "shop/new", "shop/proxy")
	// Any other Service's endpoints matter to the ElastiServices fronting it.
	wantNoError(t, c.enqueueForSliceService(ctx, types.NamespacedName{Namespace: testNamespace, Name: "api"}))
	wantKeys(t, "shop/api slices", keys(), "shop/serve")
	wantNoError(t, c.enqueueForSliceService(ctx, types.NamespacedName{Namespace: testNamespace, Name: "unrelated"}))
	wantKeys(t, "shop/unrelated slices", keys())
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

func replicasOf(d *appsv1.Deployment) any {
	if d == nil || d.Spec.Replicas == nil {
		return nil
	}
	return *d.Spec.Replicas
}
