package operator_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/controller"
	"github.com/elasti-dev/elasti/pkg/idle"
	"github.com/elasti-dev/elasti/pkg/schedule"
	"github.com/elasti-dev/elasti/test/testenv"
)

// TestPreWarmWakesASleepingTargetBeforeTheWindowCloses: a target asleep
// inside its enabled period, read in New York time, is woken by the
// pre-warm lead before the period closes, through the ordinary wake (the
// Service goes to serve mode once a pod is Ready), and not by the closing.
// The window is computed from now: it opened 40 minutes ago and closes in
// 50, so the test has 50 minutes before the closing could wake it instead.
func TestPreWarmWakesASleepingTargetBeforeTheWindowCloses(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	prom := testenv.NewFakePrometheus(t)
	startScaling(e, prom)
	e.Resolver(1)
	e.App("web", 0)

	const zone = "America/New_York"
	loc, err := schedule.LoadZone(zone)
	if err != nil {
		t.Fatal(err)
	}
	opened := time.Now().In(loc).Add(-40 * time.Minute)
	period := &elastiv1alpha1.EnabledPeriod{
		Schedule: fmt.Sprintf("%d %d * * *", opened.Minute(), opened.Hour()),
		Duration: "1h30m",
		TimeZone: zone,
	}
	es := e.ElastiServiceWith("web", "web", elastiv1alpha1.KindDeployment, "web", func(es *elastiv1alpha1.ElastiService) {
		es.Spec.CooldownPeriod = 1
		es.Spec.Triggers = testenv.IdleTrigger("1")
		es.Spec.EnabledPeriod = period
	})
	// Asleep in the open window: the resolver fronts the Service.
	e.WaitMode("web", elastiv1alpha1.ModeProxy)
	if w, err := schedule.FromSpec(period); err != nil || !w.Active(time.Now()) {
		t.Fatalf("the window %v (%v) is not open now", w, err)
	}

	// A lead of an hour puts now inside it.
	patch := []byte(`{"spec":{"enabledPeriod":{"preWarm":"1h"}}}`)
	if _, err := e.Elasti.ElastiV1alpha1().ElastiServices(e.NS).Patch(e.Ctx(), es.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.WaitReplicas(elastiv1alpha1.KindDeployment, "web", es.Spec.MinTargetReplicas)
	e.WaitMode("web", elastiv1alpha1.ModeServe)
	var msg string
	e.Eventually("a PreWarmed event", func() (bool, string) {
		var ok bool
		ok, msg = e.HasEvent("web", idle.ReasonPreWarmed)
		return ok, msg
	})
	t.Logf("event: %s", msg)

	// The wake was the lead's, inside the window, not the closing's.
	evs, err := e.Kube.CoreV1().Events(e.NS).List(e.Ctx(), metav1.ListOptions{FieldSelector: "involvedObject.name=web"})
	if err != nil {
		t.Fatal(err)
	}
	period.PreWarm = "1h"
	w, err := schedule.FromSpec(period)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs.Items {
		switch ev.Reason {
		case idle.ReasonOutsideEnabledRange:
			t.Errorf("woken as outside the enabled period: %s", ev.Message)
		case idle.ReasonPreWarmed:
			if at := ev.FirstTimestamp.Time; !w.Active(at) {
				t.Errorf("pre-warmed at %s, outside the window %s", at, w)
			} else if _, inLead := w.PreWarming(at); !inLead {
				t.Errorf("pre-warmed at %s, before the lead of %s", at, w)
			}
		}
	}
}

// TestUnknownTimeZoneIsInvalidSpec: a zone the schema lets through (it
// only bounds the name's length and characters) but no zone database
// knows is refused by the operator with Ready=False InvalidSpec, a message
// naming the field and the zone, and a Warning event; fixed (to a window
// that is always open, so the sleeping target stays asleep), it is served.
func TestUnknownTimeZoneIsInvalidSpec(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.StartOperator()
	e.Resolver(1)
	e.App("web", 0)
	e.ElastiServiceWith("web", "web", elastiv1alpha1.KindDeployment, "web", func(es *elastiv1alpha1.ElastiService) {
		es.Spec.EnabledPeriod = &elastiv1alpha1.EnabledPeriod{Schedule: "0 20 * * *", Duration: "12h", TimeZone: "Europe/Berlinn"}
	})
	got := e.WaitReason("web", metav1.ConditionFalse, controller.ReasonInvalidSpec)
	want := `spec.enabledPeriod.timeZone: Invalid value: "Europe/Berlinn": unknown time zone; use an IANA name such as Europe/Berlin or America/New_York`
	if msg := testenv.Describe(got); !strings.Contains(msg, want) {
		t.Errorf("condition %s\nwant the message %s", msg, want)
	}
	e.Eventually("a Warning InvalidSpec event", func() (bool, string) { return e.HasEvent("web", controller.ReasonInvalidSpec) })

	patch := []byte(`{"spec":{"enabledPeriod":{"timeZone":"Europe/Berlin","schedule":"0 0 * * *","duration":"24h"}}}`)
	if _, err := e.Elasti.ElastiV1alpha1().ElastiServices(e.NS).Patch(e.Ctx(), "web", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.WaitMode("web", elastiv1alpha1.ModeProxy)
}
