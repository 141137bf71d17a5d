package validation

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestFrontableService(t *testing.T) {
	sel := map[string]string{"app": "web"}
	for _, tc := range []struct {
		name   string
		spec   corev1.ServiceSpec
		reason string
		says   string
	}{
		{"selector", corev1.ServiceSpec{Selector: sel}, "", ""},
		{"selector, LoadBalancer", corev1.ServiceSpec{Selector: sel, Type: corev1.ServiceTypeLoadBalancer}, "", ""},
		{"no selector", corev1.ServiceSpec{}, ReasonServiceHasNoSelector, `Service "web" has no selector`},
		{"empty selector", corev1.ServiceSpec{Selector: map[string]string{}}, ReasonServiceHasNoSelector, `Service "web" has no selector`},
		// The operator accepted this one before: the selector is there,
		// but Kubernetes keeps no slices for an ExternalName Service.
		{"ExternalName with selector", corev1.ServiceSpec{Selector: sel, Type: corev1.ServiceTypeExternalName}, ReasonServiceNotSelectable, `Service "web" is of type ExternalName`},
		{"ExternalName without selector", corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName}, ReasonServiceNotSelectable, `Service "web" is of type ExternalName`},
	} {
		svc := &corev1.Service{Spec: tc.spec}
		svc.Name = "web"
		reason, msg := FrontableService(svc)
		if reason != tc.reason || !strings.Contains(msg, tc.says) || (tc.reason == "") != (msg == "") {
			t.Errorf("%s: %q, %q; want %q saying %q", tc.name, reason, msg, tc.reason, tc.says)
		}
	}
}
