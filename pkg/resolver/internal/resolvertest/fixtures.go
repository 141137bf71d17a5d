// Package resolvertest has the fixtures and checks the tests of the
// resolver's packages share: Services, slices and pods as Kubernetes
// writes them, fake pod reads and a fake pod API, and a check that no
// goroutine of the resolver outlives its test. It imports none of the
// resolver's packages, so each may use it in its own tests.
package resolvertest

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"

	"github.com/elasti-dev/elasti/pkg/names"
	"github.com/elasti-dev/elasti/pkg/portalloc"
)

// serviceUID is the UID service gives a Service, and slice names as the
// owner of the slices it makes, as the EndpointSlice controller does.
func serviceUID(ns, name string) types.UID { return types.UID("uid-" + ns + "-" + name) }

// service is a Service with a selector, whose slices Kubernetes keeps.
func Service(ns, name string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: serviceUID(ns, name)},
		Spec:       corev1.ServiceSpec{Ports: ports, Selector: map[string]string{"app": name}},
	}
}

// SvcPort is a TCP port of a Service.
func SvcPort(name string, port int32, target intstr.IntOrString) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Port: port, TargetPort: target, Protocol: corev1.ProtocolTCP}
}

// SliceEP is an endpoint of Slice: its address and conditions (nil:
// unset, which Kubernetes reads as ready and not terminating).
type SliceEP struct {
	IP                 string
	Ready, Terminating *bool
}

// Slice is an EndpointSlice of svcName as the EndpointSlice controller
// writes it: its labels, the Service as its controller, ports by name.
func Slice(ns, name, svcName string, ports map[string]int32, eps ...SliceEP) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			Labels: map[string]string{
				discoveryv1.LabelServiceName: svcName,
				discoveryv1.LabelManagedBy:   "endpointslice-controller.k8s.io",
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Service", Name: svcName, UID: serviceUID(ns, svcName), Controller: ptr.To(true),
			}},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	for n, p := range ports {
		s.Ports = append(s.Ports, discoveryv1.EndpointPort{Name: ptr.To(n), Port: ptr.To(p)})
	}
	for _, e := range eps {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{e.IP},
			Conditions: discoveryv1.EndpointConditions{Ready: e.Ready, Terminating: e.Terminating},
		})
	}
	return s
}

// EP is an endpoint at ip with no conditions set.
func EP(ip string) SliceEP { return SliceEP{IP: ip} }

// ManagedBy sets s's managed-by label; "" removes it.
func ManagedBy(s *discoveryv1.EndpointSlice, by string) *discoveryv1.EndpointSlice {
	if by == "" {
		delete(s.Labels, discoveryv1.LabelManagedBy)
	} else {
		s.Labels[discoveryv1.LabelManagedBy] = by
	}
	return s
}

// resolverSlice is a slice as the operator writes it for svcName: its
// managed-by value and an ElastiService as its controller.
func ResolverSlice(ns, svcName string) *discoveryv1.EndpointSlice {
	s := ManagedBy(Slice(ns, names.ResolverSlice(svcName), svcName, map[string]int32{"http": 8012}, EP("10.244.9.9")), names.ResolverSliceManagedBy)
	s.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: elastiv1alpha1.SchemeGroupVersion.String(), Kind: "ElastiService", Name: svcName, UID: "es-uid", Controller: ptr.To(true),
	}}
	return s
}

// elastiServiceFor is the ElastiService whose resolver slice resolverSlice
// makes for svcName: of that name, with its UID, naming svcName.
func ElastiServiceFor(ns, svcName string) *elastiv1alpha1.ElastiService {
	return &elastiv1alpha1.ElastiService{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svcName, UID: "es-uid"},
		Spec:       elastiv1alpha1.ElastiServiceSpec{Service: svcName},
	}
}

// ViewPod is a pod of team/web at ips, Ready or not, whose container
// names port 8080 "web".
func ViewPod(name string, uid types.UID, ready bool, ips ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name, UID: uid},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app",
			Ports: []corev1.ContainerPort{{Name: "web", ContainerPort: 8080}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	if len(ips) > 0 {
		p.Status.PodIP = ips[0]
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
	return p
}

// Terminating marks p as being deleted.
func Terminating(p *corev1.Pod) *corev1.Pod {
	p.DeletionTimestamp = &metav1.Time{}
	return p
}

// Labelled sets p's labels to l.
func Labelled(p *corev1.Pod, l map[string]string) *corev1.Pod {
	p.Labels = l
	return p
}

// ElastiService is an ElastiService of generation gen that names svc, with
// probeResponse rules.
func ElastiService(ns, name, svc string, gen int64, rules ...elastiv1alpha1.ProbeResponseRule) *elastiv1alpha1.ElastiService {
	return &elastiv1alpha1.ElastiService{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: gen, UID: types.UID("uid-" + name)},
		Spec:       elastiv1alpha1.ElastiServiceSpec{Service: svc, ProbeResponse: rules},
	}
}

// CannedAnswer is a probe rule's answer.
func CannedAnswer(status int32, body string) elastiv1alpha1.ProbeCannedAnswer {
	return elastiv1alpha1.ProbeCannedAnswer{Status: status, Body: body}
}

// ESWithPorts is an ElastiService of namespace team that names the
// Service web and whose status records ports, the resolver ports.
func ESWithPorts(name string, ports ...elastiv1alpha1.ResolverPort) *elastiv1alpha1.ElastiService {
	return &elastiv1alpha1.ElastiService{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name, CreationTimestamp: metav1.Now()},
		Spec:       elastiv1alpha1.ElastiServiceSpec{Service: "web"},
		Status:     elastiv1alpha1.ElastiServiceStatus{ResolverPorts: ports},
	}
}

// AnyPort is a resolver port range that takes the ephemeral ports the
// tests listen on.
var AnyPort = portalloc.Range{First: 1, Last: 65535}
