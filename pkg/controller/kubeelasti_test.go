package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/names"
)

// kubeElastiResolverIP is a pod IP of KubeElasti's resolver.
const kubeElastiResolverIP = "10.0.0.7"

// kubeElastiSeed is web asleep as KubeElasti v0.1.30 left it: status mode
// proxy with no conditions, and the two objects it wrote at the switch to
// proxy (see test/testenv's KubeElastiService for the facts):
//   - a private Service copied whole from the public one, NodePort type
//     and its labels included, under KubeElasti's controller reference;
//   - a resolver slice with only the service-name label, no owner, one
//     port (the Service's first, on the proxy port) and bare addresses.
func kubeElastiSeed(f *fixture) (*elastiv1alpha1.ElastiService, *corev1.Service, *discoveryv1.EndpointSlice) {
	es := proxySeed(f)
	es.Status = elastiv1alpha1.ElastiServiceStatus{Mode: elastiv1alpha1.ModeProxy, LastReconciledTime: ptr.To(metav1.NewTime(t0))}
	public := f.service("web")
	public.Labels = map[string]string{"team": "shop"}
	private := public.DeepCopy()
	private.Name = names.PrivateService("web")
	private.ResourceVersion = ""
	for i := range private.Spec.Ports {
		private.Spec.Ports[i].NodePort = 31000 + int32(i)
	}
	owner := esOwner(es)
	owner.BlockOwnerDeletion = ptr.To(true)
	private.OwnerReferences = []metav1.OwnerReference{owner}
	f.services = append(f.services, private)
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: names.ResolverSlice("web"), Namespace: testNamespace,
			Labels: map[string]string{discoveryv1.LabelServiceName: "web"},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{kubeElastiResolverIP}}},
		Ports: []discoveryv1.EndpointPort{{
			Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(resolverProxyPort),
		}},
	}
	f.endpointSlices = append(f.endpointSlices, slice)
	return es, private, slice
}

// adoptedPrivateService is KubeElasti's private Service once elasti keeps
// it in step: a ClusterIP copy of the public Service's selector and ports
// (no node ports of its own), marked as elasti's, under the same owner.
func adoptedPrivateService(es *elastiv1alpha1.ElastiService, public, private *corev1.Service) *corev1.Service {
	want := private.DeepCopy()
	want.Spec = privateServiceFor(es, public).Spec
	want.Labels = map[string]string{"team": "shop", LabelManagedBy: AgentName}
	return want
}

// KubeElasti's resolver slice is adopted in place by one update, onto
// elasti's resolver: the same name, elasti's labels and owner, every TCP
// port of the Service; never a second slice. Its private Service is kept
// and brought in step, not doubled.
func TestSyncAdoptsKubeElastiObjects(t *testing.T) {
	f := newFixture(t)
	es, private, _ := kubeElastiSeed(f)
	public := f.service("web")

	f.expectKube(expectUpdate(servicesResource, adoptedPrivateService(es, public, private)))
	f.expectKube(expectUpdate(endpointSlicesResource, resolverSliceFor(es, public, "10.0.0.1")))
	f.expectElasti(expectStatusUpdate(withPorts(expectedStatus(es, elastiv1alpha1.ModeProxy, metav1.ConditionTrue, ReasonReconciled, t0), webPorts()...)))

	wantNoError(t, f.run(keyOf(es)))
}

// An operator that knows no resolver pod yet (it started before the
// resolver Service's slices were published, or in a switch from
// KubeElasti before elasti's resolver is Ready) adopts KubeElasti's slice
// but keeps the resolver endpoints it lists, which may still answer,
// instead of leaving the Service with no endpoint at all; its condition
// says the resolver is unavailable.
func TestSyncWithNoResolverKeepsTheSlicesEndpoints(t *testing.T) {
	f := newFixture(t)
	es, private, slice := kubeElastiSeed(f)
	public := f.service("web")
	f.resolverSlices = nil

	adopted := resolverSliceFor(es, public)
	adopted.Endpoints = slice.Endpoints
	f.expectKube(expectUpdate(servicesResource, adoptedPrivateService(es, public, private)))
	f.expectKube(expectUpdate(endpointSlicesResource, adopted))
	f.expectElasti(expectStatusUpdate(withPorts(expectedStatus(es, elastiv1alpha1.ModeProxy, metav1.ConditionFalse, ReasonResolverUnavailable, t0), webPorts()...)))
	f.expectEvents("Warning " + ReasonResolverUnavailable)

	wantWaiting(t, f.run(keyOf(es)), ReasonResolverUnavailable)
}

// KubeElasti's private Service for a ClusterIP Service differs from
// elasti's only in the managed-by label: elasti adds it, so every private
// Service is marked as elasti's after a switch.
func TestSyncMarksKubeElastisPrivateServiceOfAClusterIPService(t *testing.T) {
	f := newFixture(t)
	es, private, _ := kubeElastiSeed(f)
	public := f.service("web")
	for _, s := range []*corev1.Service{public, private} {
		s.Spec.Type = corev1.ServiceTypeClusterIP
		for i := range s.Spec.Ports {
			s.Spec.Ports[i].NodePort = 0
		}
	}
	f = f.converged(keyOf(es))
	// converged let the controller adopt everything; put KubeElasti's
	// label set back on the private Service.
	for _, s := range f.services {
		if s.Name == private.Name {
			s.Labels = map[string]string{"team": "shop"}
			private = s
		}
	}

	f.expectKube(expectUpdate(servicesResource, adoptedPrivateService(es, f.service("web"), private)))

	wantNoError(t, f.run(keyOf(es)))
}
