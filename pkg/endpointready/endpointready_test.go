package endpointready

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

func TestServing(t *testing.T) {
	for _, tc := range []struct {
		ready, terminating *bool
		want               bool
	}{
		{nil, nil, true},
		{ptr.To(true), nil, true},
		{ptr.To(false), nil, false},
		{ptr.To(true), ptr.To(true), false},
		{nil, ptr.To(false), true},
	} {
		ep := discoveryv1.Endpoint{Conditions: discoveryv1.EndpointConditions{Ready: tc.ready, Terminating: tc.terminating}}
		if got := Serving(ep); got != tc.want {
			t.Errorf("ready=%v terminating=%v: %v, want %v", ptr.Deref(tc.ready, true), ptr.Deref(tc.terminating, false), got, tc.want)
		}
	}
}

func TestUnkept(t *testing.T) {
	sel := map[string]string{"app": "web"}
	for _, tc := range []struct {
		name string
		spec corev1.ServiceSpec
		want string
	}{
		{"selector", corev1.ServiceSpec{Selector: sel}, ""},
		{"selector, ClusterIP", corev1.ServiceSpec{Selector: sel, Type: corev1.ServiceTypeClusterIP}, ""},
		{"selector, NodePort", corev1.ServiceSpec{Selector: sel, Type: corev1.ServiceTypeNodePort}, ""},
		{"no selector", corev1.ServiceSpec{}, "has no selector"},
		{"empty selector", corev1.ServiceSpec{Selector: map[string]string{}}, "has no selector"},
		{"ExternalName with selector", corev1.ServiceSpec{Selector: sel, Type: corev1.ServiceTypeExternalName, ExternalName: "example.com"}, "is of type ExternalName"},
		{"ExternalName without selector", corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName}, "is of type ExternalName"},
	} {
		if got := Unkept(&corev1.Service{Spec: tc.spec}); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
