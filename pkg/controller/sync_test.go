package controller

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/directory"
	"github.com/elasti-dev/elasti/pkg/names"
	"github.com/elasti-dev/elasti/pkg/workloop"
)

var webKey = types.NamespacedName{Namespace: testNamespace, Name: "web"}

func readyResolver() []*discoveryv1.EndpointSlice {
	return []*discoveryv1.EndpointSlice{newResolverSlice("resolver-1", discoveryv1.AddressTypeIPv4, ep("10.0.0.1", ptr.To(true), false))}
}

func wantWaiting(t *testing.T, err error, reason string) {
	t.Helper()
	var w *errWaiting
	if !errors.As(err, &w) || w.reason != reason {
		t.Fatalf("sync returned %v, want an errWaiting with reason %s so the key backs off", err, reason)
	}
}

func wantNoError(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("sync returned %v, want nil", err)
	}
}

// proxySeed is a new ElastiService (finalizer already on) whose target is
// at zero, with a ready resolver.
func proxySeed(f *fixture) *elastiv1alpha1.ElastiService {
	es := newElastiService("web", "web", "web")
	f.elastiServices = append(f.elastiServices, es)
	f.services = append(f.services, newPublicService("web"))
	f.deployments = append(f.deployments, newDeployment("web", 0))
	f.resolverSlices = readyResolver()
	return es
}

// 1.
func TestSyncNewElastiServiceAddsFinalizerAndPrivateService(t *testing.T) {
	f := newFixture(t)
	es := proxySeed(f)
	es.Finalizers = nil
	public := f.service("web")

	withFinalizer := es.DeepCopy()
	withFinalizer.Finalizers = []string{elastiv1alpha1.Finalizer}
	f.expectElasti(expectFinalizerPatch(es, elastiv1alpha1.Finalizer))
	f.expectKube(expectCreate(endpointSlicesResource, resolverSliceFor(es, public, "10.0.0.1")))
	f.expectKube(expectCreate(servicesResource, privateServiceFor(es, public)))
	f.expectElasti(expectStatusUpdate(withPorts(expectedStatus(withFinalizer, elastiv1alpha1.ModeProxy, metav1.ConditionTrue, ReasonReconciled, t0), webPorts()...)))
	// A first mode is an adoption, not a switch: no event.

	wantNoError(t, f.run(keyOf(es)))

	e, ok := f.directory.Lookup(webKey)
	if !ok || e.ElastiService != webKey || e.MinTargetReplicas != 2 || e.Target.Kind != elastiv1alpha1.KindDeployment {
		t.Errorf("directory entry for %v = %+v, %v; want it claimed by shop/web with minTargetReplicas 2", webKey, e, ok)
	}
}

// A new ElastiService whose target serves costs two writes, the finalizer
// and status: the private Service waits until the resolver must front it.
func TestSyncNewServingElastiServiceCreatesNoPrivateService(t *testing.T) {
	f := newFixture(t)
	es := proxySeed(f)
	es.Finalizers = nil
	scaleUp(f, "web", 1)
	f.endpointSlices = append(f.endpointSlices, targetSlice("web", ep("10.1.0.1", ptr.To(true), false)))

	withFinalizer := es.DeepCopy()
	withFinalizer.Finalizers = []string{elastiv1alpha1.Finalizer}
	f.expectElasti(expectFinalizerPatch(es, elastiv1alpha1.Finalizer))
	f.expectElasti(expectStatusUpdate(withPorts(expectedStatus(withFinalizer, elastiv1alpha1.ModeServe, metav1.ConditionTrue, ReasonReconciled, t0), webPorts()...)))

	wantNoError(t, f.run(keyOf(es)))
}

// A private Service made earlier (by an older elasti, KubeElasti, or a
// proxy spell that ended) is kept in step while the target serves.
func TestSyncServingKeepsAnExistingPrivateServiceInStep(t *testing.T) {
	f := newFixture(t)
	proxySeed(f)
	scaleUp(f, "web", 1)
	f.endpointSlices = append(f.endpointSlices, targetSlice("web", ep("10.1.0.1", ptr.To(true), false)))
	f = f.converged(keyOf(f.elastiService("web")))
	es := f.elastiService("web")
	public := f.service("web")
	f.services = append(f.services, privateServiceFor(es, public))
	public.Spec.Ports[0].TargetPort = intstr.FromString("web")

	f.expectKube(expectUpdate(servicesResource, privateServiceFor(es, public)))

	wantNoError(t, f.run(keyOf(es)))
}

// The switch to proxy does not wait for the private Service, whose create
// can take seconds: the sync writes the resolver slice and status and
// leaves the Service to its own queue.
func TestSyncProxyLeavesThePrivateServiceToItsQueue(t *testing.T) {
	f := newFixture(t)
	es := proxySeed(f)
	public := f.service("web")
	_, ctx := ktesting.NewTestContext(t)
	f.queuePrivateServices = true
	c := f.newController(ctx)
	f.expectKube(expectCreate(endpointSlicesResource, resolverSliceFor(es, public, "10.0.0.1")))
	f.expectElasti(expectStatusUpdate(withPorts(expectedStatus(es, elastiv1alpha1.ModeProxy, metav1.ConditionTrue, ReasonReconciled, t0), webPorts()...)))
	wantNoError(t, c.syncElastiService(ctx, keyOf(es)))
	f.verify()
	if n := c.privateServiceQueue.Len(); n != 1 {
		t.Fatalf("%d keys queued for private Services, want web's", n)
	}

	f.expectKube(expectCreate(servicesResource, privateServiceFor(es, public)))
	wantNoError(t, c.front.syncPrivateService(ctx, keyOf(es)))
	f.verify()
}

// 2.
func TestSyncReadyEndpointSwitchesToServe(t *testing.T) {
	f := newFixture(t)
	es := withStatus(newElastiService("web", "web", "web"), elastiv1alpha1.ModeProxy, metav1.ConditionTrue, ReasonReconciled)
	public := newPublicService("web")
	f.elastiServices = append(f.elastiServices, es)
	f.services = append(f.services, public, privateServiceFor(es, public))
	f.deployments = append(f.deployments, newDeployment("web", 1))
	f.endpointSlices = append(f.endpointSlices, targetSlice("web", ep("10.1.0.1", ptr.To(true), false)))
	f.resolverSlices = readyResolver()

	f.expectElasti(expectStatusUpdate(withPorts(expectedStatus(es, elastiv1alpha1.ModeServe, metav1.ConditionTrue, ReasonReconciled, t0), webPorts()...)))
	f.expectEvents("Normal " + ReasonSwitchedToServe)

	wantNoError(t, f.run(keyOf(es)))
}

// 3.
func TestSyncNoReadyEndpointSwitchesToProxy(t *testing.T) {
	f := newFixture(t)
	es := withStatus(newElastiService("web", "web", "web"), elastiv1alpha1.ModeServe, metav1.ConditionTrue, ReasonReconciled)
	public := newPublicService("web")
	public.Spec.Ports = append(public.Spec.Ports, corev1.ServicePort{Name: "metrics", Port: 9090, TargetPort: intstr.FromInt32(9090)})
	f.elastiServices = append(f.elastiServices, es)
	f.services = append(f.services, public, privateServiceFor(es, public))
	f.deployments = append(f.deployments, newDeployment("web", 0))
	// Neither an unready nor a terminating endpoint counts.
	f.endpointSlices = append(f.endpointSlices, targetSlice("web",
		ep("10.1.0.1", ptr.To(false), false), ep("10.1.0.2", ptr.To(true), true)))
	other := newResolverSlice("other-1", discoveryv1.AddressTypeIPv4, ep("10.0.0.8", ptr.To(true), false))
	other.Labels[discoveryv1.LabelServiceName] = "other"
	f.resolverSlices = []*discoveryv1.EndpointSlice{
		newResolverSlice("resolver-a", discoveryv1.AddressTypeIPv4,
			ep("10.0.0.3", ptr.To(true), false),
			ep("10.0.0.1", nil, false), // unknown readiness means ready
			ep("10.0.0.2", ptr.To(false), false),
			ep("10.0.0.4", ptr.To(true), true)),
		newResolverSlice("resolver-b", discoveryv1.AddressTypeIPv4,
			ep("10.0.0.5", ptr.To(true), false),
			ep("10.0.0.3", ptr.To(true), false)), // duplicate
		newResolverSlice("resolver-v6", discoveryv1.AddressTypeIPv6, ep("fd00::1", ptr.To(true), false)),
		other, // another Service's slice in the resolver namespace
	}

	f.expectKube(expectCreate(endpointSlicesResource, resolverSliceFor(es, public, "10.0.0.1", "10.0.0.3", "10.0.0.5")))
	f.expectElasti(expectStatusUpdate(withPorts(expectedStatus(es, elastiv1alpha1.ModeProxy, metav1.ConditionTrue, ReasonReconciled, t0),
		rp("web", "http", 80, 20000), rp("web", "metrics", 9090, 20001))))
	f.expectEvents("Normal " + ReasonSwitchedToProxy)

	wantNoError(t, f.run(keyOf(es)))
}

// The mode follows the public Service's own ready endpoints; the resolver
// slice and other slices we manage never count.
func TestSyncModeFollowsReadyEndpoints(t *testing.T) {
	ours := targetSlice("web", ep("10.1.0.9", ptr.To(true), false))
	ours.Name = "web-leftover"
	ours.Labels[discoveryv1.LabelManagedBy] = ManagedByValue
	resolverNamed := targetSlice("web", ep("10.1.0.9", ptr.To(true), false))
	resolverNamed.Name = names.ResolverSlice("web")
	resolverNamed.Labels[discoveryv1.LabelManagedBy] = "someone-else"

	for _, tc := range []struct {
		name  string
		slice *discoveryv1.EndpointSlice
		want  string
	}{
		{"ready", targetSlice("web", ep("10.1.0.1", ptr.To(true), false)), elastiv1alpha1.ModeServe},
		{"readiness unknown", targetSlice("web", ep("10.1.0.1", nil, false)), elastiv1alpha1.ModeServe},
		{"one of several ready", targetSlice("web", ep("10.1.0.1", ptr.To(false), false), ep("10.1.0.2", ptr.To(true), false)), elastiv1alpha1.ModeServe},
		{"not ready", targetSlice("web", ep("10.1.0.1", ptr.To(false), false)), elastiv1alpha1.ModeProxy},
		{"terminating", targetSlice("web", ep("10.1.0.1", ptr.To(true), true)), elastiv1alpha1.ModeProxy},
		{"no endpoints", targetSlice("web"), elastiv1alpha1.ModeProxy},
		{"slice managed by elasti", ours, elastiv1alpha1.ModeProxy},
		{"slice named like the resolver slice", resolverNamed, elastiv1alpha1.ModeProxy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			es := proxySeed(f)
			f.deployments[0].Spec.Replicas = ptr.To[int32](1)
			f.endpointSlices = append(f.endpointSlices, tc.slice)
			_, ctx := ktesting.NewTestContext(t)
			c := f.newController(ctx)
			if err := c.syncElastiService(ctx, keyOf(es)); err != nil {
				t.Fatalf("sync: %v", err)
			}
			f.verified = f.elastiClient.Actions()
			if got := f.lastStatusUpdate().Status.Mode; got != tc.want {
				t.Errorf("mode = %q, want %q", got, tc.want)
			}
		})
	}
}

// scaledToZeroSeed is a serving ElastiService whose target someone has just
// scaled to zero: the cluster still lists its pod as ready.
func scaledToZeroSeed(f *fixture) (*elastiv1alpha1.ElastiService, *corev1.Service) {
	es := withStatus(newElastiService("web", "web", "web"), elastiv1alpha1.ModeServe, metav1.ConditionTrue, ReasonReconciled)
	public := newPublicService("web")
	f.elastiServices = append(f.elastiServices, es)
	f.services = append(f.services, public, privateServiceFor(es, public))
	f.deployments = append(f.deployments, newDeployment("web", 0))
	f.endpointSlices = append(f.endpointSlices, targetSlice("web", ep("10.1.0.1", ptr.To(true), false)))
	f.resolverSlices = readyResolver()
	return es, public
}

// A target scaled to zero switches to proxy at once, even while the cluster
// still lists its terminating pods as ready; those pods are fenced.
func TestSyncScaledToZeroProxiesBeforeEndpointsGo(t *testing.T) {
	f := newFixture(t)
	es, public := scaledToZeroSeed(f)

	f.expectKube(expectCreate(endpointSlicesResource, fenced(resolverSliceFor(es, public, "10.0.0.1"), t0, "10.1.0.1")))
	f.expectElasti(expectStatusUpdate(withPorts(expectedStatus(es, elastiv1alpha1.ModeProxy, metav1.ConditionTrue, ReasonReconciled, t0), webPorts()...)))
	f.expectEvents("Normal " + ReasonSwitchedToProxy)

	wantNoError(t, f.run(keyOf(es)))
}

// Another tool scales many targets to zero at once: while other keys wait,
// the sync that fronts a Service writes only its slice and comes back for
// the status, unless the status lacks the resolver ports the resolver maps
// requests by.
func TestSyncFrontsBeforeStatusWhileOthersWait(t *testing.T) {
	for _, tc := range []struct {
		name          string
		backlog       int
		portsInStatus bool
		statusLater   bool
	}{
		{"others waiting", 3, true, true},
		{"nothing else waiting", 0, true, false},
		{"ports not yet in status", 3, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.backlog = tc.backlog
			es, public := scaledToZeroSeed(f)
			if tc.portsInStatus {
				withPorts(es, webPorts()...)
			}

			f.expectKube(expectCreate(endpointSlicesResource, fenced(resolverSliceFor(es, public, "10.0.0.1"), t0, "10.1.0.1")))
			proxied := withPorts(expectedStatus(es, elastiv1alpha1.ModeProxy, metav1.ConditionTrue, ReasonReconciled, t0), webPorts()...)
			if !tc.statusLater {
				f.expectElasti(expectStatusUpdate(proxied))
				f.expectEvents("Normal " + ReasonSwitchedToProxy)
				wantNoError(t, f.run(keyOf(es)))
				return
			}
			var requeue workloop.RequeueAfter
			if err := f.run(keyOf(es)); !errors.As(err, &requeue) || time.Duration(requeue) != statusFollowUp {
				t.Fatalf("sync returned %v, want RequeueAfter(%s): the status goes behind the waiting keys", err, statusFollowUp)
			}

			// The next pass, soon after and with the slice in place, writes
			// the status and nothing else.
			next := f.converged(keyOf(es))
			next.clock, next.backlog = f.clock, tc.backlog
			next.expectElasti(expectStatusUpdate(proxied))
			next.expectEvents("Normal " + ReasonSwitchedToProxy)
			wantNoError(t, next.run(keyOf(es)))
		})
	}
}

// scaleUp sets a seeded Deployment's replicas.
func scaleUp(f *fixture, name string, replicas int32) {
	for _, d := range f.deployments {
		if d.Name == name {
			d.Spec.Replicas = ptr.To(replicas)
		}
	}
}

// 4.
func TestSyncConvergedWritesNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		seed func(f *fixture)
	}{
		{"proxy", func(f *fixture) { proxySeed(f) }},
		{"serve", func(f *fixture) {
			proxySeed(f)
			f.deployments[0].Spec.Replicas = ptr.To[int32](1)
			f.endpointSlices = append(f.endpointSlices, targetSlice("web", ep("10.1.0.1", ptr.To(true), false)))
		}},
		{"new without finalizer", func(f *fixture) { proxySeed(f).Finalizers = nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			tc.seed(f)
			next := f.converged(keyOf(f.elastiService("web")))
			wantNoError(t, next.run(keyOf(next.elastiService("web"))))
		})
	}
}

// 5.
func TestSyncResolverEndpointsChangedUpdatesSliceOnly(t *testing.T) {
	f := newFixture(t)
	proxySeed(f)
	f = f.converged(keyOf(f.elastiService("web")))
	es := f.elastiService("web")
	f.resolverSlices = []*discoveryv1.EndpointSlice{newResolverSlice("resolver-2", discoveryv1.AddressTypeIPv4,
		ep("10.0.0.9", ptr.To(true), false), ep("10.0.0.2", ptr.To(true), false))}

	f.expectKube(expectUpdate(endpointSlicesResource, resolverSliceFor(es, f.service("web"), "10.0.0.2", "10.0.0.9")))

	wantNoError(t, f.run(keyOf(es)))
}

// 6.
func TestSyncServeDeletesStaleResolverSlice(t *testing.T) {
	f := newFixture(t)
	proxySeed(f)
	f = f.converged(keyOf(f.elastiService("web")))
	es := f.elastiService("web")
	scaleUp(f, "web", 1)
	f.endpointSlices = append(f.endpointSlices, targetSlice("web", ep("10.1.0.1", ptr.To(true), false)))

	f.expectKube(expectDelete(endpointSlicesResource, names.ResolverSlice("web")))
	f.expectElasti(expectStatusUpdate(expectedStatus(es, elastiv1alpha1.ModeServe, metav1.ConditionTrue, ReasonReconciled, f.clock.Now())))
	// The target was at zero and serves again: a wake (visibility.go).
	f.expectEvents("Normal "+ReasonSwitchedToServe, "Normal "+ReasonWoke)

	wantNoError(t, f.run(keyOf(es)))
}

// 7.
func TestSyncMissingServiceBacksOff(t *testing.T) {
	f := newFixture(t)
	es := withStatus(newElastiService("web", "web", "web"), elastiv1alpha1.ModeProxy, metav1.ConditionTrue, ReasonReconciled)
	f.elastiServices = append(f.elastiServices, es)
	f.deployments = append(f.deployments, newDeployment("web", 0))
	f.resolverSlices = readyResolver()

	// The mode is left alone: without the Service there is nothing to route.
	f.expectElasti(expectStatusUpdate(expectedStatus(es, elastiv1alpha1.ModeProxy, metav1.ConditionFalse, ReasonServiceNotFound, t0)))
	f.expectEvents("Warning " + ReasonServiceNotFound)

	wantWaiting(t, f.run(keyOf(es)), ReasonServiceNotFound)

	// Retrying with the condition already recorded warns no more.
	f = f.converged(keyOf(es))
	wantWaiting(t, f.run(keyOf(es)), ReasonServiceNotFound)
}

// 8.
func TestSyncMissingTargetKeepsMode(t *testing.T) {
	f := newFixture(t)
	es := withStatus(newElastiService("web", "web", "web"), elastiv1alpha1.ModeServe, metav1.ConditionTrue, ReasonReconciled)
	public := newPublicService("web")
	f.elastiServices = append(f.elastiServices, es)
	f.services = append(f.services, public)
	f.resolverSlices = readyResolver()

	f.expectElasti(expectStatusUpdate(withPorts(expectedStatus(es, elastiv1alpha1.ModeServe, metav1.ConditionFalse, ReasonTargetNotFound, t0), webPorts()...)))
	f.expectEvents("Warning " + ReasonTargetNotFound)

	wantWaiting(t, f.run(keyOf(es)), ReasonTargetNotFound)
	if msg := readyMessage(f.lastStatusUpdate()); !strings.Contains(msg, `Deployment "web" does not exist`) {
		t.Errorf("message = %q, want it to name the missing Deployment", msg)
	}
}

// 9.
func TestSyncUnsupportedKindDoesNotRetry(t *testing.T) {
	f := newFixture(t)
	es := newElastiService("web", "web", "nightly")
	es.Spec.ScaleTargetRef = elastiv1alpha1.ScaleTargetRef{APIVersion: "batch/v1", Kind: "CronJob", Name: "nightly"}
	public := newPublicService("web")
	f.elastiServices = append(f.elastiServices, es)
	f.services = append(f.services, public)
	f.resolverSlices = readyResolver()

	f.expectElasti(expectStatusUpdate(withPorts(expectedStatus(es, "", metav1.ConditionFalse, ReasonUnsupportedTarget, t0), webPorts()...)))
	f.expectEvents("Warning " + ReasonUnsupportedTarget)

	wantNoError(t, f.run(keyOf(es)))
}

// 10.
func TestSyncResolverUnavailable(t *testing.T) {
	f := newFixture(t)
	es := proxySeed(f)
	public := f.service("web")
	f.resolverSlices = []*discoveryv1.EndpointSlice{newResolverSlice("resolver-1", discoveryv1.AddressTypeIPv4,
		ep("10.0.0.1", ptr.To(false), false), ep("10.0.0.2", ptr.To(true), true))}

	f.expectKube(expectCreate(endpointSlicesResource, resolverSliceFor(es, public)))
	f.expectKube(expectCreate(servicesResource, privateServiceFor(es, public)))
	f.expectElasti(expectStatusUpdate(withPorts(expectedStatus(es, elastiv1alpha1.ModeProxy, metav1.ConditionFalse, ReasonResolverUnavailable, t0), webPorts()...)))
	f.expectEvents("Warning " + ReasonResolverUnavailable)

	wantWaiting(t, f.run(keyOf(es)), ReasonResolverUnavailable)
}

// 11.
func TestSyncServiceConflict(t *testing.T) {
	f := newFixture(t)
	first := newElastiService("first", "web", "web")
	second := newElastiService("second", "web", "web")
	second.Finalizers = nil
	public := newPublicService("web")
	f.elastiServices = append(f.elastiServices, first, second)
	f.services = append(f.services, public)
	f.deployments = append(f.deployments, newDeployment("web", 0))
	f.resolverSlices = readyResolver()
	f.directory.Claim(webKey, directory.EntryFor(first))

	secondWithFinalizer := second.DeepCopy()
	secondWithFinalizer.Finalizers = []string{elastiv1alpha1.Finalizer}
	f.expectElasti(expectFinalizerPatch(second, elastiv1alpha1.Finalizer))
	conflicted := expectedStatus(secondWithFinalizer, "", metav1.ConditionFalse, ReasonServiceConflict, t0)
	f.expectElasti(expectStatusUpdate(conflicted))
	f.expectEvents("Warning " + ReasonServiceConflict)

	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	wantNoError(t, c.syncElastiService(ctx, keyOf(second)))
	f.verify()
	if msg := readyMessage(f.lastStatusUpdate()); !strings.Contains(msg, `ElastiService "first"`) {
		t.Errorf("message = %q, want it to name the holder", msg)
	}

	// The holder is deleted, but its own sync has not released the Service
	// yet: the waiting ElastiService takes over.
	if err := f.esIndexer.Delete(first); err != nil {
		t.Fatal(err)
	}
	conflicted.Status.LastReconciledTime = ptr.To(metav1.NewTime(t0))
	conflicted.Status.Conditions[0].Message = "conflict"
	conflicted.ResourceVersion += "-status" // as the informer delivers our status write
	if err := f.esIndexer.Update(conflicted); err != nil {
		t.Fatal(err)
	}
	f.expectKube(expectCreate(endpointSlicesResource, resolverSliceFor(second, public, "10.0.0.1")))
	f.expectKube(expectCreate(servicesResource, privateServiceFor(second, public)))
	f.expectElasti(expectStatusUpdate(withPorts(expectedStatus(conflicted, elastiv1alpha1.ModeProxy, metav1.ConditionTrue, ReasonReconciled, t0), webPorts()...)))
	// A first mode is an adoption, not a switch: no event.
	wantNoError(t, c.syncElastiService(ctx, keyOf(second)))
	f.verify()
	if e, _ := f.directory.Lookup(webKey); e.ElastiService.Name != "second" {
		t.Errorf("directory holder = %v, want shop/second", e.ElastiService)
	}
}

func deleting(es *elastiv1alpha1.ElastiService, ago time.Duration) *elastiv1alpha1.ElastiService {
	es.DeletionTimestamp = ptr.To(metav1.NewTime(t0.Add(-ago)))
	return es
}

// deletionSeed is a deleted proxy-mode ElastiService with its private Service
// and resolver slice in place.
func deletionSeed(f *fixture, ago time.Duration, replicas int32) *elastiv1alpha1.ElastiService {
	es := deleting(withStatus(newElastiService("web", "web", "web"), elastiv1alpha1.ModeProxy, metav1.ConditionTrue, ReasonReconciled), ago)
	public := newPublicService("web")
	f.elastiServices = append(f.elastiServices, es)
	f.services = append(f.services, public, privateServiceFor(es, public))
	f.endpointSlices = append(f.endpointSlices, resolverSliceFor(es, public, "10.0.0.1"))
	f.deployments = append(f.deployments, newDeployment("web", replicas))
	f.resolverSlices = readyResolver()
	f.directory.Claim(webKey, directory.EntryFor(es))
	return es
}

func TestSyncDeletedElastiServiceReleasesDirectory(t *testing.T) {
	f := newFixture(t)
	f.directory.Claim(webKey, directory.EntryFor(newElastiService("web", "web", "web")))

	wantNoError(t, f.run(types.NamespacedName{Namespace: testNamespace, Name: "web"}))
	if f.directory.Len() != 0 {
		t.Errorf("directory has %d entries, want the gone ElastiService's claim released", f.directory.Len())
	}
}

// 13. Moves of spec.service are in move_test.go.

// 14.
func TestSyncPublicServiceChangedUpdatesPrivateService(t *testing.T) {
	f := newFixture(t)
	proxySeed(f)
	f = f.converged(keyOf(f.elastiService("web")))
	es := f.elastiService("web")
	public := f.service("web")
	public.Spec.Selector = map[string]string{"app": "web", "track": "stable"}
	public.Spec.Ports[0].TargetPort = intstr.FromString("http")
	f.deployments[0].Spec.Template.Labels["track"] = "stable"

	f.expectKube(expectUpdate(servicesResource, privateServiceFor(es, public)))

	wantNoError(t, f.run(keyOf(es)))
}

func TestSyncPublicServicePortAddedUpdatesBoth(t *testing.T) {
	f := newFixture(t)
	proxySeed(f)
	f = f.converged(keyOf(f.elastiService("web")))
	es := f.elastiService("web")
	public := f.service("web")
	public.Spec.Ports = append(public.Spec.Ports, corev1.ServicePort{Name: "grpc", Port: 9000, TargetPort: intstr.FromInt32(9000), Protocol: corev1.ProtocolTCP, NodePort: 30900})

	f.expectKube(expectUpdate(servicesResource, privateServiceFor(es, public)))
	f.expectKube(expectUpdate(endpointSlicesResource, resolverSliceFor(es, public, "10.0.0.1")))
	// The new port gets its own resolver port, in the one status write.
	f.expectElasti(expectStatusUpdate(withPorts(expectedStatus(es, elastiv1alpha1.ModeProxy, metav1.ConditionTrue, ReasonReconciled, f.clock.Now()),
		rp("web", "http", 80, 20000), rp("web", "grpc", 9000, 20001))))

	wantNoError(t, f.run(keyOf(es)))
}

// A private Service left by KubeElasti (no owner reference) is adopted.
func TestSyncAdoptsPrivateService(t *testing.T) {
	f := newFixture(t)
	proxySeed(f)
	f = f.converged(keyOf(f.elastiService("web")))
	es := f.elastiService("web")
	for _, s := range f.services {
		if s.Name == names.PrivateService("web") {
			s.OwnerReferences = nil
			s.Labels = nil
		}
	}

	f.expectKube(expectUpdate(servicesResource, privateServiceFor(es, f.service("web"))))

	wantNoError(t, f.run(keyOf(es)))
}

// 15.
func TestSyncStatusWrittenOnlyOnChange(t *testing.T) {
	f := newFixture(t)
	proxySeed(f)
	f = f.converged(keyOf(f.elastiService("web")))
	es := f.elastiService("web")
	if got := timePtr(es.Status.LastReconciledTime); got != timePtr(ptr.To(metav1.NewTime(t0))) {
		t.Fatalf("lastReconciledTime after the first sync = %s, want the fake clock's %s", got, t0)
	}

	// Unchanged: no write, so lastReconciledTime stays at t0 although the
	// clock moved on.
	wantNoError(t, f.run(keyOf(es)))

	// A spec change (new generation) alone is written, with a new
	// lastReconciledTime, and no event since the mode did not change.
	es.Generation = 2
	f.expectElasti(expectStatusUpdate(withPorts(expectedStatus(es, elastiv1alpha1.ModeProxy, metav1.ConditionTrue, ReasonReconciled, f.clock.Now()), webPorts()...)))
	wantNoError(t, f.run(keyOf(es)))
}

func TestSyncRolloutWithoutArgoIsTargetNotFound(t *testing.T) {
	for _, kind := range []string{elastiv1alpha1.KindRollout, elastiv1alpha1.LegacyKindRollouts} {
		t.Run(kind, func(t *testing.T) {
			f := newFixture(t)
			es := proxySeed(f)
			es.Spec.ScaleTargetRef = elastiv1alpha1.ScaleTargetRef{APIVersion: elastiv1alpha1.APIVersionArgoV1, Kind: kind, Name: "web"}

			f.expectElasti(expectStatusUpdate(withPorts(expectedStatus(es, "", metav1.ConditionFalse, ReasonTargetNotFound, t0), webPorts()...)))
			f.expectEvents("Warning " + ReasonTargetNotFound)

			wantWaiting(t, f.run(keyOf(es)), ReasonTargetNotFound)
			if msg := readyMessage(f.lastStatusUpdate()); !strings.Contains(msg, "Argo Rollouts CRD (rollouts.argoproj.io) is not installed") {
				t.Errorf("message = %q, want it to say the Argo Rollouts CRD is not installed", msg)
			}
		})
	}
}

func TestSyncStatefulSetAndLegacyDeploymentTargets(t *testing.T) {
	for _, tc := range []struct {
		name string
		ref  elastiv1alpha1.ScaleTargetRef
	}{
		{"StatefulSet", elastiv1alpha1.ScaleTargetRef{APIVersion: elastiv1alpha1.APIVersionApps, Kind: elastiv1alpha1.KindStatefulSet, Name: "db"}},
		{"legacy deployments", elastiv1alpha1.ScaleTargetRef{APIVersion: elastiv1alpha1.APIVersionApps, Kind: elastiv1alpha1.LegacyKindDeployments, Name: "web"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			es := proxySeed(f)
			es.Spec.ScaleTargetRef = tc.ref
			db := newStatefulSet("db", 0)
			db.Spec.Template = podTemplate("web")
			f.statefulSets = append(f.statefulSets, db)
			public := f.service("web")

			f.expectKube(expectCreate(endpointSlicesResource, resolverSliceFor(es, public, "10.0.0.1")))
			f.expectKube(expectCreate(servicesResource, privateServiceFor(es, public)))
			f.expectElasti(expectStatusUpdate(withPorts(expectedStatus(es, elastiv1alpha1.ModeProxy, metav1.ConditionTrue, ReasonReconciled, t0), webPorts()...)))
			// A first mode is an adoption, not a switch: no event.

			wantNoError(t, f.run(keyOf(es)))
		})
	}
}

// ---- regressions for bugs found by these tests ----

// The holder of a Service moved to another Service, but its own sync (which
// releases the old claim) has not run yet. The waiting ElastiService must
// not be parked in ServiceConflict with no retry.
func TestSyncConflictWithHolderThatMovedOn(t *testing.T) {
	f := newFixture(t)
	before := newElastiService("moved", "web", "web")
	moved := newElastiService("moved", "web-v2", "web")
	waiting := newElastiService("waiting", "web", "web")
	public := newPublicService("web")
	f.elastiServices = append(f.elastiServices, moved, waiting)
	f.services = append(f.services, public, newPublicService("web-v2"))
	f.deployments = append(f.deployments, newDeployment("web", 0))
	f.resolverSlices = readyResolver()
	f.directory.Claim(webKey, directory.EntryFor(before))

	f.expectKube(expectCreate(endpointSlicesResource, resolverSliceFor(waiting, public, "10.0.0.1")))
	f.expectKube(expectCreate(servicesResource, privateServiceFor(waiting, public)))
	f.expectElasti(expectStatusUpdate(withPorts(expectedStatus(waiting, elastiv1alpha1.ModeProxy, metav1.ConditionTrue, ReasonReconciled, t0), webPorts()...)))
	// A first mode is an adoption, not a switch: no event.
	wantNoError(t, f.run(keyOf(waiting)))
}
