package operator_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/controller"
	"github.com/elasti-dev/elasti/test/testenv"
)

// The right to create an ElastiService is not the right to steer another
// workload's traffic or to scale it to zero. With an idle Prometheus and a
// fast poller, three ElastiServices try: one names a selectorless Service
// and the victim Deployment, one names the victim's Service and a
// Deployment of its own, one names a Service selecting its own pods and
// the victim Deployment. Each is refused with its reason and a Warning
// event; none gets a resolver slice or a private Service; the victim
// keeps its replicas while a well-formed control in the same namespace is
// scaled to zero by the same poller.
func TestServiceMustSelectTheTargetsPods(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	prom := testenv.NewFakePrometheus(t)
	startScaling(e, prom)
	e.Resolver(1)
	e.App("victim", 2)
	e.Deployment("mine", 0, nil)
	e.Service("lure", "mine")
	dark := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "dark", Namespace: e.NS},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}
	if _, err := e.Kube.CoreV1().Services(e.NS).Create(e.Ctx(), dark, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	idleSoon := func(es *elastiv1alpha1.ElastiService) {
		es.Spec.CooldownPeriod = 1
		es.Spec.Triggers = testenv.IdleTrigger("0.5")
	}
	attacks := []struct{ es, service, target, reason string }{
		{"selectorless", "dark", "victim", controller.ReasonServiceHasNoSelector},
		{"steal-traffic", "victim", "mine", controller.ReasonServiceSelectsOtherPods},
		{"scale-victim", "lure", "victim", controller.ReasonServiceSelectsOtherPods},
	}
	for _, a := range attacks {
		e.ElastiServiceWith(a.es, a.service, elastiv1alpha1.KindDeployment, a.target, idleSoon)
	}
	e.App("control", 2)
	e.ElastiServiceWith("control", "control", elastiv1alpha1.KindDeployment, "control", idleSoon)

	for _, a := range attacks {
		e.WaitReason(a.es, metav1.ConditionFalse, a.reason)
		e.Eventually(a.es+": a Warning "+a.reason+" event", func() (bool, string) { return e.HasEvent(a.es, a.reason) })
	}
	// The poller works here: it scales the control down...
	e.WaitReplicas(elastiv1alpha1.KindDeployment, "control", 0)
	// ...and, given time for several more polls, never the victim.
	e.HoldsReplicas(elastiv1alpha1.KindDeployment, "victim", 2, 2*time.Second)
	for _, a := range attacks {
		if _, err := e.ResolverSlice(a.service); !apierrors.IsNotFound(err) {
			t.Errorf("%s: resolver slice for Service %q: %v, want none", a.es, a.service, err)
		}
		if _, err := e.PrivateService(a.service); !apierrors.IsNotFound(err) {
			t.Errorf("%s: private Service for %q: %v, want none", a.es, a.service, err)
		}
		if es := e.Get(a.es); es.Status.Mode != "" || len(es.Status.ResolverPorts) != 0 {
			t.Errorf("%s: mode %q, resolver ports %v; want neither", a.es, es.Status.Mode, es.Status.ResolverPorts)
		}
	}

	// Fixing a Service lets its ElastiService in: the lure now selects the
	// victim's pods, which is what an ElastiService for the victim needs.
	lure, err := e.Kube.CoreV1().Services(e.NS).Get(e.Ctx(), "lure", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lure.Spec.Selector = map[string]string{"app": "victim"}
	if _, err := e.Kube.CoreV1().Services(e.NS).Update(e.Ctx(), lure, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Eventually("scale-victim reconciled once its Service selects the target's pods", func() (bool, string) {
		es := e.Get("scale-victim")
		return es.Status.Mode != "", fmt.Sprintf("mode %q: %s", es.Status.Mode, testenv.Describe(es))
	})
}
