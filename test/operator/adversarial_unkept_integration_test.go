package operator_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/controller"
	elastiinformers "github.com/elasti-dev/elasti/pkg/generated/informers/externalversions"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
	"github.com/elasti-dev/elasti/test/testenv"
)

// A Service changed after the resolver is in front of it. Removing its
// selector, or making it ExternalName, stops Kubernetes keeping its
// EndpointSlices; the old slice stays, with its genuine owner UID, and an
// owner reference to the Service can also be written by hand. The attack
// then needs EndpointSlice write in the namespace (which the default
// "edit" role does not grant; a team may hold it): the attacker points a
// slice of the Service at another address, hoping the resolver forwards
// there with its own source address, past the victim's NetworkPolicies.
//
// The resolver's endpoint view (InformerEndpoints over this cluster, with
// the command's cache transform) must never yield the forged address. The
// ElastiService is handed back with the reason; while the Service's
// remaining slices list nothing serving, the resolver stays in front
// (answering 503, see resolver's TestRequestForUnkeptServiceIsRefused), and
// once they do, it steps out with a ResolverWithdrawn event: kube-proxy
// then sends clients there with their own source address, which is what
// the same slice does to a selectorless Service without elasti.
func TestServiceChangedAfterProxyIsNeverForwardedTo(t *testing.T) {
	e := startWithResolver(t, 1)
	view := resolverEndpointView(t, e)
	variants := []struct {
		name, reason string
		change       func(*corev1.Service)
	}{
		{"nosel", controller.ReasonServiceHasNoSelector, func(s *corev1.Service) { s.Spec.Selector = nil }},
		{"extname", controller.ReasonServiceNotSelectable, func(s *corev1.Service) {
			// The selector stays: the operator used to accept this one.
			s.Spec.Type, s.Spec.ExternalName = corev1.ServiceTypeExternalName, "example.com"
			s.Spec.ClusterIP, s.Spec.ClusterIPs, s.Spec.IPFamilies, s.Spec.IPFamilyPolicy = "", nil, nil, nil
			s.Spec.InternalTrafficPolicy = nil
		}},
	}
	for _, v := range variants {
		e.Fronted(v.name, 0)
	}
	for _, v := range variants {
		svc, err := e.Kube.CoreV1().Services(e.NS).Get(e.Ctx(), v.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		v.change(svc)
		if _, err := e.Kube.CoreV1().Services(e.NS).Update(e.Ctx(), svc, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
	}

	for _, v := range variants {
		// Handed back, and not left dark silently: the resolver stays in
		// front, and the condition says why.
		es := e.WaitReason(v.name, metav1.ConditionFalse, v.reason)
		if c := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionReady); !strings.Contains(c.Message, "resolver stays in front") {
			t.Errorf("%s: condition %q does not say the resolver stays", v.name, c.Message)
		}
		e.Eventually(v.name+": a Warning "+v.reason+" event", func() (bool, string) { return e.HasEvent(v.name, v.reason) })
		if _, err := e.ResolverSlice(v.name); err != nil {
			t.Errorf("%s: resolver slice: %v; want it kept while nothing else serves", v.name, err)
		}
		e.Eventually(v.name+": the resolver's view refuses it", func() (bool, string) {
			b, err := view.Lookup(clusterview.ServiceRef{Namespace: e.NS, Name: v.name}, "80")
			return errors.Is(err, clusterview.ErrServiceNotSelectable), fmt.Sprintf("%v, %v", b.Addrs, err)
		})
	}

	// The forgery: every slice of the Service, the controller's old one
	// and one made by hand with the Service's UID as controller, lists a
	// serving endpoint at the attacker's address.
	// An apiserver-like ClusterIP: the apiserver refuses loopback
	// addresses in a slice, and nothing here dials it (the view is read,
	// no request is sent).
	const forgedIP = "10.96.0.1"
	for _, v := range variants {
		forgeSlices(t, e, v.name, forgedIP)
	}
	for _, v := range variants {
		e.Eventually(v.name+": the operator steps out once the Service's own slices serve", func() (bool, string) {
			_, err := e.ResolverSlice(v.name)
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
		e.Eventually(v.name+": a Warning "+controller.ReasonResolverWithdrawn+" event", func() (bool, string) {
			return e.HasEvent(v.name, controller.ReasonResolverWithdrawn)
		})
		e.WaitReason(v.name, metav1.ConditionFalse, v.reason)
	}
	// By now the operator has seen the forged slices, so the view's cache,
	// on the same apiserver, is given a moment more; over it the view
	// must never name the forged address.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		for _, v := range variants {
			b, err := view.Lookup(clusterview.ServiceRef{Namespace: e.NS, Name: v.name}, "80")
			for _, a := range b.Addrs {
				if strings.HasPrefix(a, forgedIP+":") {
					t.Fatalf("%s: the resolver's view forwards to the forged %s", v.name, a)
				}
			}
			if !errors.Is(err, clusterview.ErrServiceNotSelectable) {
				t.Fatalf("%s: Lookup = %v, %v; want ErrServiceNotSelectable", v.name, b.Addrs, err)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// resolverEndpointView is the resolver's endpoint view of e's namespace,
// built as cmd/elasti-resolver builds it.
func resolverEndpointView(t *testing.T, e *testenv.Env) *clusterview.InformerEndpoints {
	t.Helper()
	ctx := klog.NewContext(e.Ctx(), klog.Background().WithValues("test", t.Name()))
	factory := informers.NewSharedInformerFactoryWithOptions(e.Kube, 0, informers.WithNamespace(e.NS), informers.WithTransform(clusterview.TrimForCache))
	elastiFactory := elastiinformers.NewSharedInformerFactoryWithOptions(e.Elasti, 0, elastiinformers.WithNamespace(e.NS), elastiinformers.WithTransform(clusterview.TrimForCache))
	named, err := clusterview.NewNamedIndex(elastiFactory.Elasti().V1alpha1().ElastiServices())
	if err != nil {
		t.Fatal(err)
	}
	view, err := clusterview.NewInformerEndpoints(ctx, factory.Core().V1().Services(), factory.Discovery().V1().EndpointSlices(), named, clusterview.DefaultFrontDrain)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	elastiFactory.Start(ctx.Done())
	t.Cleanup(factory.Shutdown)
	t.Cleanup(elastiFactory.Shutdown)
	e.Eventually("the resolver's view to sync", func() (bool, string) { return view.HasSynced(), "" })
	return view
}

// forgeSlices points every EndpointSlice the EndpointSlice controller left
// for service at ip, and adds one made by hand that claims to be the
// controller's: its label, and the Service's UID as its controller.
func forgeSlices(t *testing.T, e *testenv.Env, service, ip string) {
	t.Helper()
	svc, err := e.Kube.CoreV1().Services(e.NS).Get(e.Ctx(), service, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	serving := []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}}
	ports := []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}}
	for _, s := range e.SlicesFor(service) {
		if s.Labels[discoveryv1.LabelManagedBy] != "endpointslice-controller.k8s.io" {
			continue
		}
		s.Endpoints, s.Ports = serving, ports
		if _, err := e.Kube.DiscoveryV1().EndpointSlices(e.NS).Update(e.Ctx(), &s, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("forge %s: %v", s.Name, err)
		}
	}
	byHand := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: service + "-forged", Namespace: e.NS,
			Labels: map[string]string{
				discoveryv1.LabelServiceName: service,
				discoveryv1.LabelManagedBy:   "endpointslice-controller.k8s.io",
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: service, UID: svc.UID, Controller: ptr.To(true)}},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   serving,
		Ports:       ports,
	}
	if _, err := e.Kube.DiscoveryV1().EndpointSlices(e.NS).Create(e.Ctx(), byHand, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
