package idle

import (
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/outcome"
	"github.com/elasti-dev/elasti/pkg/schedule"
)

// passing are facts every gate lets through: a managed, idle ElastiService
// an hour old, its target up, no window, no recent wake.
func passing(t *testing.T) *facts {
	t.Helper()
	window, err := schedule.FromSpec(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &facts{es: elastiService(nil), manages: true, window: window, replicas: 2,
		now: now, cooldown: time.Minute, idle: true}
}

func TestGates(t *testing.T) {
	weekdays := &elastiv1alpha1.EnabledPeriod{Schedule: "0 9 * * 1-5", Duration: "8h"} // now is a Saturday
	cases := []struct {
		name       string
		gate       gate
		change     func(*facts)
		want       outcome.Idle // "" lets the evaluation go on
		wantReason string
		wantAction action
	}{
		{"deleting", deleting, func(f *facts) { f.es.DeletionTimestamp = &metav1.Time{Time: now} }, outcome.IdleDeleting, "", conclude},
		{"not deleting", deleting, nil, "", "", conclude},
		{"not managed", notManaged, func(f *facts) { f.manages = false }, outcome.IdleNotManaged, "", conclude},
		{"managed", notManaged, nil, "", "", conclude},
		{"moving", moving, func(f *facts) { f.moving = true }, outcome.IdleMoving, "", conclude},
		{"not moving", moving, nil, "", "", conclude},
		{"invalid schedule", invalidSchedule, func(f *facts) { f.windowErr = errors.New("bad cron") }, outcome.IdleInvalidSchedule, ReasonInvalidSchedule, conclude},
		{"valid schedule", invalidSchedule, nil, "", "", conclude},
		{"target missing", targetMissing, func(f *facts) { f.targetErr = errors.New("not found") }, outcome.IdleTargetMissing, "", conclude},
		{"target read", targetMissing, nil, "", "", conclude},
		{"outside the window, up", outsideWindow, func(f *facts) { f.window, _ = schedule.FromSpec(weekdays) }, outcome.IdleOutsideWindow, "", conclude},
		{"outside the window at zero wakes", outsideWindow, func(f *facts) {
			f.window, _ = schedule.FromSpec(weekdays)
			f.replicas = 0
		}, outcome.IdleOutsideWindow, "", wakeOutsideWindow},
		{"inside the window", outsideWindow, nil, "", "", conclude},
		{"in the pre-warm lead", preWarming, func(f *facts) { f.preWarming = true }, outcome.IdlePreWarm, "", preWarm},
		{"before the pre-warm lead", preWarming, nil, "", "", conclude},
		{"sleep requested", sleepRequested, func(f *facts) { f.sleepRequested = true }, outcome.IdleScaledToZero, "", sleepNow},
		{"no sleep request", sleepRequested, nil, "", "", conclude},
		{"already zero", alreadyZero, func(f *facts) { f.replicas = 0 }, outcome.IdleAlreadyZero, "", sleepDependencies},
		{"up", alreadyZero, nil, "", "", conclude},
		{"created within the cooldown", justCreated, func(f *facts) { f.es.CreationTimestamp = metav1.NewTime(now.Add(-30 * time.Second)) }, outcome.IdleCooldown, "", conclude},
		{"created a cooldown ago", justCreated, func(f *facts) { f.es.CreationTimestamp = metav1.NewTime(now.Add(-time.Minute)) }, "", "", conclude},
		{"woken within the cooldown", recentlyWoken, func(f *facts) { f.lastWake = now.Add(-10 * time.Second) }, outcome.IdleCooldown, "", conclude},
		{"woken a cooldown ago", recentlyWoken, func(f *facts) { f.lastWake = now.Add(-time.Minute) }, "", "", conclude},
		{"never woken", recentlyWoken, nil, "", "", conclude},
		{"served within the cooldown of a slow wake", recentlyWoken, func(f *facts) {
			f.lastWake, f.servedAt = now.Add(-2*time.Minute), now.Add(-30*time.Second)
		}, outcome.IdleCooldown, "", conclude},
		{"served a cooldown ago", recentlyWoken, func(f *facts) {
			f.lastWake, f.servedAt = now.Add(-3*time.Minute), now.Add(-time.Minute)
		}, "", "", conclude},
		{"unserved, asked for just now", wakeUnserved, func(f *facts) {
			f.lastWake, f.waking, f.lastAsked = now.Add(-5*time.Minute), true, now.Add(-time.Second)
		}, outcome.IdleWaking, "", conclude},
		{"unserved, asked for within the grace", wakeUnserved, func(f *facts) {
			f.lastWake, f.waking, f.lastAsked = now.Add(-5*time.Minute), true, now.Add(-heldAskGrace+time.Millisecond)
		}, outcome.IdleWaking, "", conclude},
		{"unserved, last asked for a grace ago", wakeUnserved, func(f *facts) {
			f.lastWake, f.waking, f.lastAsked = now.Add(-5*time.Minute), true, now.Add(-heldAskGrace)
		}, "", "", conclude},
		{"unserved, never asked for", wakeUnserved, func(f *facts) { f.lastWake, f.waking = now.Add(-5*time.Minute), true }, "", "", conclude},
		{"served, still asked for", wakeUnserved, func(f *facts) { f.lastWake, f.lastAsked = now.Add(-5*time.Minute), now }, "", "", conclude},
		{"triggers failed", triggersFailed, func(f *facts) { f.triggersErr = errors.New("unreachable") }, outcome.IdleTriggerError, ReasonTriggerError, conclude},
		{"triggers evaluated", triggersFailed, nil, "", "", conclude},
		{"busy", notIdle, func(f *facts) { f.idle = false }, outcome.IdleBusy, "", conclude},
		{"idle", notIdle, nil, "", "", conclude},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := passing(t)
			if c.change != nil {
				c.change(f)
			}
			v := c.gate(f)
			switch {
			case c.want == "" && v != nil:
				t.Fatalf("verdict %+v, want none", *v)
			case c.want == "":
				return
			case v == nil:
				t.Fatalf("no verdict, want %q", c.want)
			}
			if v.outcome != c.want || v.reason != c.wantReason || v.action != c.wantAction {
				t.Errorf("verdict %+v, want outcome %q, reason %q, action %v", *v, c.want, c.wantReason, c.wantAction)
			}
			if v.reason != "" && v.message == "" {
				t.Errorf("verdict %+v has a reason without a message", *v)
			}
		})
	}
}

// The chains let clean facts through, and the first verdict wins.
func TestGateChains(t *testing.T) {
	for name, chain := range map[string]gates{"admission": admissionGates, "window": windowGates, "trigger": triggerGates} {
		if v := chain.First(passing(t)); v != nil {
			t.Errorf("%s gates stop clean facts: %+v", name, *v)
		}
	}
	f := passing(t)
	f.es.DeletionTimestamp = &metav1.Time{Time: now}
	f.manages, f.targetErr = false, errors.New("not found")
	if v := admissionGates.First(f); v == nil || v.outcome != outcome.IdleDeleting {
		t.Errorf("admission verdict %+v, want %q, the first gate's", v, outcome.IdleDeleting)
	}
	f = passing(t)
	f.replicas, f.lastWake = 0, now
	if v := windowGates.First(f); v == nil || v.outcome != outcome.IdleAlreadyZero {
		t.Errorf("window verdict %+v, want %q before the cooldown", v, outcome.IdleAlreadyZero)
	}
}

// wakeProgress reads from the mode whether the latest wake has served,
// and from status when.
func TestWakeProgress(t *testing.T) {
	up := now.Add(-time.Minute)
	slept := &metav1.Time{Time: up.Add(-time.Hour)}
	status := func(mode string, wakes int64, up time.Time, coldStart time.Duration) elastiv1alpha1.ElastiServiceStatus {
		st := elastiv1alpha1.ElastiServiceStatus{Mode: mode, Wakes: wakes, LastScaledDownTime: slept, LastScaledUpTime: &metav1.Time{Time: up}}
		if coldStart > 0 {
			st.LastColdStart = &metav1.Duration{Duration: coldStart}
		}
		return st
	}
	proxy, serve := elastiv1alpha1.ModeProxy, elastiv1alpha1.ModeServe
	second := up.Truncate(time.Second)
	cases := []struct {
		name       string
		status     elastiv1alpha1.ElastiServiceStatus
		lastWake   time.Time
		wantServed time.Time
		wantWaking bool
	}{
		{"never woken", elastiv1alpha1.ElastiServiceStatus{Mode: serve}, time.Time{}, time.Time{}, false},
		{"served", status(serve, 1, up, 8*time.Second), up, up.Add(8 * time.Second), false},
		{"cold start under way", status(proxy, 1, up, 0), up, time.Time{}, true},
		{"a wake newer than status records", status(proxy, 1, up, 8*time.Second), now, time.Time{}, true},
		{"a new wake whose lastScaledUpTime landed before its cold start", status(proxy, 1, now, 8*time.Second), now, time.Time{}, true},
		// The wake's own patch of lastScaledUpTime and the informer's
		// record of the same scale-up, a millisecond apart across a
		// second's edge, landed in the other order (CI, 29 Nov: web slept
		// 32.6 s after it served, the ask's grace, not 2 s).
		{"served, status's record of the wake a second older than this replica's", status(serve, 1, second, 8*time.Second),
			second.Add(time.Second + time.Millisecond), second.Add(8 * time.Second), false},
		{"served, a wake the controller did not see begin", elastiv1alpha1.ElastiServiceStatus{Mode: serve, LastScaledUpTime: &metav1.Time{Time: up}},
			up, time.Time{}, false},
		{"not serving, no measured cold start", elastiv1alpha1.ElastiServiceStatus{Mode: proxy, LastScaledUpTime: &metav1.Time{Time: up}},
			up, time.Time{}, true},
		{"no mode yet", elastiv1alpha1.ElastiServiceStatus{LastScaledUpTime: &metav1.Time{Time: up}}, up, time.Time{}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			es := elastiService(nil)
			es.Status = c.status
			served, waking := wakeProgress(es, c.lastWake)
			if !served.Equal(c.wantServed) || waking != c.wantWaking {
				t.Errorf("wakeProgress = %v, %v; want %v, %v", served, waking, c.wantServed, c.wantWaking)
			}
		})
	}
}
