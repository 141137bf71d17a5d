package controller

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/names"
)

// An ExternalName Service keeps its selector, but Kubernetes keeps no
// EndpointSlices for it: it is refused like a selectorless one, with its
// own reason, and nothing is written.
func TestSyncRefusesExternalNameService(t *testing.T) {
	f := newFixture(t)
	es := proxySeed(f)
	svc := f.service("web")
	svc.Spec.Type, svc.Spec.ExternalName = corev1.ServiceTypeExternalName, "example.com"

	f.expectElasti(expectStatusUpdate(expectedStatus(es, "", metav1.ConditionFalse, ReasonServiceNotSelectable, t0)))
	f.expectEvents("Warning " + ReasonServiceNotSelectable)
	wantNoError(t, f.run(keyOf(es)))
	if msg := readyMessage(f.lastStatusUpdate()); !strings.Contains(msg, `Service "web" is of type ExternalName`) {
		t.Errorf("message %q", msg)
	}
	if n := f.directory.Len(); n != 0 {
		t.Errorf("%d directory entries for a refused ElastiService", n)
	}
}

// After proxy mode the Service's selector goes, or it becomes ExternalName
// (an EndpointSlice writer may then point its old slices anywhere; the
// resolver forwards to none of them). While those slices list nothing
// serving, the resolver stays in front, answering 503, and the condition
// says so: taking it out would leave the Service dark without a word.
// Once they list a serving endpoint, the resolver steps out with a
// ResolverWithdrawn event, as it leaves the Service no darker.
func TestSyncServiceUnkeptAfterProxy(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*corev1.Service)
		reason string
	}{
		{"selector removed", func(s *corev1.Service) { s.Spec.Selector = nil }, ReasonServiceHasNoSelector},
		{"made ExternalName", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeExternalName }, ReasonServiceNotSelectable},
	} {
		t.Run(tc.name+", nothing else serves", func(t *testing.T) {
			f, es, _ := proxyClaimed(t)
			tc.change(f.service("web"))
			f.expectElasti(expectStatusUpdate(expectedStatus(es, elastiv1alpha1.ModeProxy, metav1.ConditionFalse, tc.reason, f.clock.Now())))
			f.expectEvents("Warning " + tc.reason)
			wantNoError(t, f.run(keyOf(es)))
			if msg := readyMessage(f.lastStatusUpdate()); !strings.Contains(msg, "the resolver stays in front") {
				t.Errorf("message %q does not say the resolver stays", msg)
			}
		})
		t.Run(tc.name+", its slices serve", func(t *testing.T) {
			f, es, _ := proxyClaimed(t)
			tc.change(f.service("web"))
			f.endpointSlices = append(f.endpointSlices, targetSlice("web", ep("10.1.0.9", nil, false)))
			f.expectKube(expectDelete(endpointSlicesResource, names.ResolverSlice("web")))
			f.expectElasti(expectStatusUpdate(expectedStatus(es, elastiv1alpha1.ModeProxy, metav1.ConditionFalse, tc.reason, f.clock.Now())))
			f.expectEvents("Warning "+ReasonResolverWithdrawn, "Warning "+tc.reason)
			wantNoError(t, f.run(keyOf(es)))
			if msg := readyMessage(f.lastStatusUpdate()); !strings.Contains(msg, "the resolver left the front") {
				t.Errorf("message %q does not say the resolver left", msg)
			}
		})
	}
}
