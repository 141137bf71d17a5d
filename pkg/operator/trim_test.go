package operator

import (
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/controller"
	"github.com/elasti-dev/elasti/pkg/names"
	"github.com/elasti-dev/elasti/pkg/scaletarget"
)

func trimmed[T any](t *testing.T, obj T) T {
	t.Helper()
	out, err := trimForCache(obj)
	if err != nil {
		t.Fatal(err)
	}
	return out.(T)
}

func fullMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: name, Namespace: "ns", UID: "uid-" + types.UID(name), ResourceVersion: "7", Generation: 3, GenerateName: "x-",
		Labels:          map[string]string{"app": "a", "team": "t"},
		Annotations:     map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "svc", UID: "o"}},
		ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
	}
}

func wantIdentity(t *testing.T, got metav1.ObjectMeta, name string) {
	t.Helper()
	want := metav1.ObjectMeta{Name: name, Namespace: "ns", UID: "uid-" + types.UID(name), ResourceVersion: "7", Generation: 3}
	got.Labels = nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("metadata = %+v, want only %+v", got, want)
	}
}

// Scale targets are cached as scaletarget.Cached: what Scaler.Get and the
// event handlers read.
func TestTrimScaleTargets(t *testing.T) {
	for _, obj := range []any{
		&appsv1.Deployment{ObjectMeta: fullMeta("d"), Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "a"}, Annotations: map[string]string{"x": "y"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}},
			},
		}, Status: appsv1.DeploymentStatus{Replicas: 2, ReadyReplicas: 1, Conditions: []appsv1.DeploymentCondition{{Type: "Available"}}}},
		&appsv1.StatefulSet{ObjectMeta: fullMeta("s"), Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](2), VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{}},
		}, Status: appsv1.StatefulSetStatus{Replicas: 2, ReadyReplicas: 1}},
	} {
		out, err := trimForCache(obj)
		if err != nil {
			t.Fatal(err)
		}
		c, ok := out.(*scaletarget.Cached)
		if !ok {
			t.Fatalf("%T cached as %T, want *scaletarget.Cached", obj, out)
		}
		wantIdentity(t, c.ObjectMeta, obj.(metav1.Object).GetName())
		wantPodLabels := map[string]string(nil)
		if _, ok := obj.(*appsv1.Deployment); ok {
			wantPodLabels = map[string]string{"app": "a"}
		}
		if c.Labels != nil || ptr.Deref(c.Replicas, 0) != 2 || !reflect.DeepEqual(c.PodLabels, wantPodLabels) || c.ReadyReplicas != 1 {
			t.Errorf("%T cached as %+v", obj, c)
		}
	}
}

// An HPA is cached with what scaletarget.GoalFor reads: its target and its
// replica bounds, not its metrics, behavior or status.
func TestTrimHPAs(t *testing.T) {
	full := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: fullMeta("h"), Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
		MinReplicas:    ptr.To[int32](2), MaxReplicas: 5,
		Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ExternalMetricSourceType}},
	}, Status: autoscalingv2.HorizontalPodAutoscalerStatus{CurrentReplicas: 3}}
	want := full.Spec.ScaleTargetRef
	got := trimmed(t, full)
	wantIdentity(t, got.ObjectMeta, "h")
	if got.Spec.ScaleTargetRef != want || ptr.Deref(got.Spec.MinReplicas, 0) != 2 || got.Spec.MaxReplicas != 5 {
		t.Errorf("HPA spec cached as %+v", got.Spec)
	}
	if got.Spec.Metrics != nil || got.Status.CurrentReplicas != 0 {
		t.Errorf("HPA cached with its metrics or status: %+v", got)
	}
}

// A public Service keeps its type, selector and ports; a private Service, which
// is updated from the cache, keeps everything but managedFields.
func TestTrimServices(t *testing.T) {
	spec := corev1.ServiceSpec{
		Type: corev1.ServiceTypeNodePort, ClusterIP: "10.0.0.1", ClusterIPs: []string{"10.0.0.1"},
		Selector: map[string]string{"app": "a"},
		Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http"), NodePort: 30080, AppProtocol: ptr.To("h2c")}},
	}
	public := trimmed(t, &corev1.Service{ObjectMeta: fullMeta("web"), Spec: *spec.DeepCopy(),
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "1.2.3.4"}}}}})
	wantIdentity(t, public.ObjectMeta, "web")
	if public.Labels != nil || !reflect.DeepEqual(public.Spec, corev1.ServiceSpec{Type: spec.Type, Selector: spec.Selector, Ports: spec.Ports}) ||
		!reflect.DeepEqual(public.Status, corev1.ServiceStatus{}) {
		t.Errorf("public service: %+v", public)
	}

	for name, meta := range map[string]metav1.ObjectMeta{
		"private by name": fullMeta(names.PrivateService("web")),
		"owned by elasti": func() metav1.ObjectMeta { m := fullMeta("other"); m.OwnerReferences = esOwner(); return m }(),
	} {
		in := &corev1.Service{ObjectMeta: meta, Spec: *spec.DeepCopy()}
		want := in.DeepCopy()
		want.ManagedFields = nil
		if got := trimmed(t, in); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: kept %+v, want it whole %+v", name, got, want)
		}
	}
}

func esOwner() []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: elastiv1alpha1.SchemeGroupVersion.String(), Kind: "ElastiService", Name: "es", UID: "es-uid"}}
}

// The cluster's slices keep what servingEndpoints, the indexes and
// podStays read; the resolver slices, updated from the cache, keep
// everything but managedFields and what of their endpoints the update
// replaces without comparing.
func TestTrimEndpointSlices(t *testing.T) {
	endpoint := discoveryv1.Endpoint{
		Addresses:  []string{"10.1.0.1"},
		Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
		TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "web-1", UID: "pod-uid"},
		NodeName:   ptr.To("node"), Zone: ptr.To("z"), Hostname: ptr.To("h"),
		Hints: &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "z"}}},
	}
	slice := func(meta metav1.ObjectMeta) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: meta, AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{*endpoint.DeepCopy()},
			Ports:     []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}}}
	}
	meta := fullMeta("web-abcde")
	meta.Labels = map[string]string{discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io", "app": "a"}
	got := trimmed(t, slice(meta))
	wantIdentity(t, got.ObjectMeta, "web-abcde")
	if want := map[string]string{discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}; !reflect.DeepEqual(got.Labels, want) {
		t.Errorf("labels = %v, want %v", got.Labels, want)
	}
	wantEndpoint := discoveryv1.Endpoint{Addresses: endpoint.Addresses, Conditions: endpoint.Conditions, TargetRef: endpoint.TargetRef}
	if got.AddressType != discoveryv1.AddressTypeIPv4 || got.Ports != nil || len(got.Endpoints) != 1 || !reflect.DeepEqual(got.Endpoints[0], wantEndpoint) {
		t.Errorf("cluster slice: %+v", got)
	}

	resolverByName := fullMeta(names.ResolverSlice("web"))
	byLabel := fullMeta("adopted")
	byLabel.Labels = map[string]string{discoveryv1.LabelManagedBy: controller.ManagedByValue}
	byOwner := fullMeta("owned")
	byOwner.OwnerReferences = esOwner()
	for _, m := range []metav1.ObjectMeta{resolverByName, byLabel, byOwner} {
		in := slice(m)
		want := in.DeepCopy()
		want.ManagedFields = nil
		want.Endpoints = []discoveryv1.Endpoint{{Addresses: endpoint.Addresses, Conditions: endpoint.Conditions}}
		if got := trimmed(t, in); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: kept %+v, want it whole but for the endpoints' addresses and conditions", m.Name, got)
		}
	}

	// The resolver's own slices keep their ports, nodeName and zone.
	in := slice(meta)
	want := in.DeepCopy()
	want.ManagedFields = nil
	if got, _ := keepForCache(in); !reflect.DeepEqual(got, want) {
		t.Errorf("keepForCache changed more than managedFields: %+v", got)
	}
}
