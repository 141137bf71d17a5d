package controller

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/scaletarget"
)

// selectorAttacks are Services that do not route to the target's pods:
// naming one would let an ElastiService steer another workload's traffic
// to the resolver, or scale a workload on a Service that never sees its
// traffic.
var selectorAttacks = []struct {
	name     string
	selector map[string]string
	reason   string
	inMsg    string
}{
	{"no selector", nil, ReasonServiceHasNoSelector, `Service "web" has no selector`},
	{"other pods", map[string]string{"app": "victim"}, ReasonServiceSelectsOtherPods, `selects app=victim, which the pod template of Deployment "web" does not have`},
	{"a label the pods lack", map[string]string{"app": "web", "tier": "db"}, ReasonServiceSelectsOtherPods, "selects tier=db"},
}

// A new ElastiService whose Service does not select its target's pods gets
// Ready=False with its own reason and a Warning event, and nothing else:
// no resolver slice, no private Service, no scale, no directory claim. A
// second sync writes nothing.
func TestSyncRefusesServiceThatDoesNotSelectTargetPods(t *testing.T) {
	for _, tc := range selectorAttacks {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			es := proxySeed(f)
			f.service("web").Spec.Selector = tc.selector

			f.expectElasti(expectStatusUpdate(expectedStatus(es, "", metav1.ConditionFalse, tc.reason, t0)))
			f.expectEvents("Warning " + tc.reason)
			wantNoError(t, f.run(keyOf(es)))

			if msg := readyMessage(f.lastStatusUpdate()); !strings.Contains(msg, tc.inMsg) {
				t.Errorf("message %q, want it to say %q", msg, tc.inMsg)
			}
			if n := f.directory.Len(); n != 0 {
				t.Errorf("%d directory entries for a refused ElastiService", n)
			}

			f = f.converged(keyOf(es))
			wantNoError(t, f.run(keyOf(f.elastiService("web"))))
		})
	}
}

// An ElastiService in proxy mode whose Service stops selecting its
// target's pods is refused as an invalid spec is: its resolver slice,
// private Service, mode, resolver ports and directory claim stay as they
// were, so the Service still reaches the resolver and wakes, and nothing
// is written but the condition.
func TestSyncRefusedSelectorKeepsProxyObjects(t *testing.T) {
	for _, tc := range selectorAttacks {
		t.Run(tc.name, func(t *testing.T) {
			f, es, entry := proxyClaimed(t)
			f.service("web").Spec.Selector = tc.selector

			f.expectElasti(expectStatusUpdate(expectedStatus(es, elastiv1alpha1.ModeProxy, metav1.ConditionFalse, tc.reason, f.clock.Now())))
			f.expectEvents("Warning " + tc.reason)
			wantNoError(t, f.run(keyOf(es)))

			if got, ok := f.directory.Lookup(webKey); !ok || got.ElastiService != webKey || got.Target != entry.Target {
				t.Errorf("directory entry %+v, %v; want the last valid claim kept", got, ok)
			}
		})
	}
}

// Fixing the Service brings the refused ElastiService back to Reconciled.
func TestSyncFixedSelectorReconciles(t *testing.T) {
	f := newFixture(t)
	es := proxySeed(f)
	f.service("web").Spec.Selector = map[string]string{"app": "victim"}
	f = f.converged(keyOf(es))
	es = f.elastiService("web")
	if !conditionIs(es, metav1.ConditionFalse, ReasonServiceSelectsOtherPods) {
		t.Fatalf("seed: conditions %+v", es.Status.Conditions)
	}
	f.service("web").Spec.Selector = map[string]string{"app": "web"}
	public := f.service("web")

	f.expectKube(expectCreate(endpointSlicesResource, resolverSliceFor(es, public, "10.0.0.1")))
	f.expectKube(expectCreate(servicesResource, privateServiceFor(es, public)))
	f.expectElasti(expectStatusUpdate(withPorts(expectedStatus(es, elastiv1alpha1.ModeProxy, metav1.ConditionTrue, ReasonReconciled, f.clock.Now()), webPorts()...)))
	wantNoError(t, f.run(keyOf(es)))
}

// A selector matches the pods when each term is in the pod template, or is
// a label the workload's controller adds to every pod: real Services
// select one StatefulSet replica by pod name, and Argo Rollouts adds its
// template hash to the stable Service's selector.
func TestUnmatchedTerm(t *testing.T) {
	pods := map[string]string{"app": "web", "tier": "front"}
	deployment := scaletarget.Ref{Kind: elastiv1alpha1.KindDeployment, Name: "web"}
	sts := scaletarget.Ref{Kind: elastiv1alpha1.KindStatefulSet, Name: "db"}
	rollout := scaletarget.Ref{Kind: elastiv1alpha1.KindRollout, Name: "web"}
	for _, tc := range []struct {
		name     string
		ref      scaletarget.Ref
		pods     map[string]string
		selector map[string]string
		want     string
	}{
		{"same labels", deployment, pods, map[string]string{"app": "web", "tier": "front"}, ""},
		{"a subset", deployment, pods, map[string]string{"app": "web"}, ""},
		{"other value", deployment, pods, map[string]string{"app": "web", "tier": "back"}, "tier=back"},
		{"label not on pods", deployment, pods, map[string]string{"app": "web", "zone": "a"}, "zone=a"},
		{"no pod labels", deployment, nil, map[string]string{"app": "web"}, "app=web"},
		{"first bad term in key order", deployment, pods, map[string]string{"z": "1", "b": "2", "app": "web"}, "b=2"},
		{"deployment pod-template-hash", deployment, pods, map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: "5d8f"}, ""},
		{"statefulset pod name", sts, pods, map[string]string{"app": "web", appsv1.StatefulSetPodNameLabel: "db-0"}, ""},
		{"another statefulset's pod name", sts, pods, map[string]string{"app": "web", appsv1.StatefulSetPodNameLabel: "web-0"}, appsv1.StatefulSetPodNameLabel + "=web-0"},
		{"statefulset pod index", sts, pods, map[string]string{"app": "web", appsv1.PodIndexLabel: "0"}, ""},
		{"rollout template hash", rollout, pods, map[string]string{"app": "web", rolloutsPodTemplateHashLabel: "6c9f"}, ""},
		{"rollout hash on a deployment", deployment, pods, map[string]string{"app": "web", rolloutsPodTemplateHashLabel: "6c9f"}, rolloutsPodTemplateHashLabel + "=6c9f"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := &corev1.Service{Spec: corev1.ServiceSpec{Selector: tc.selector}}
			got, bad := unmatchedTerm(svc, tc.ref, tc.pods)
			if got != tc.want || bad != (tc.want != "") {
				t.Errorf("unmatchedTerm = %q, %v; want %q", got, bad, tc.want)
			}
		})
	}
}
