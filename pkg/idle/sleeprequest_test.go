package idle

import (
	"github.com/elasti-dev/elasti/pkg/outcome"

	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	elastilisters "github.com/elasti-dev/elasti/pkg/generated/listers/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/scaletarget/scaletargettest"
	"github.com/elasti-dev/elasti/pkg/triggers"
)

// A pending sleep request (kubectl elasti sleep) makes a busy target in its
// cooldown idle now, through the ordinary scale-down: fronted first. A
// request older than the last wake, outside the enabled period, for an
// unmanaged Service or that cannot be fronted changes nothing.
func TestSleepRequest(t *testing.T) {
	requested := func(ago time.Duration) func(*elastiv1alpha1.ElastiService) {
		return func(es *elastiv1alpha1.ElastiService) {
			es.Annotations = map[string]string{elastiv1alpha1.AnnotationSleepRequestedAt: now.Add(-ago).Format(time.RFC3339)}
			// Woken 30s ago: well inside its 60s cooldown.
			es.Status.LastScaledUpTime = &metav1.Time{Time: now.Add(-30 * time.Second)}
		}
	}
	both := func(fs ...func(*elastiv1alpha1.ElastiService)) func(*elastiv1alpha1.ElastiService) {
		return func(es *elastiv1alpha1.ElastiService) {
			for _, f := range fs {
				f(es)
			}
		}
	}
	cases := []struct {
		name       string
		es         *elastiv1alpha1.ElastiService
		replicas   int32
		recentWake time.Duration // ago, in memory only; 0 means none
		frontErr   error
		want       outcome.Idle
		wantScaled []int32
		wantEvent  bool
	}{
		{"a request after the last wake sleeps a busy target in its cooldown", elastiService(requested(5 * time.Second)), 2, 0, nil,
			outcome.IdleScaledToZero, []int32{0}, true},
		{"a request before the last wake is stale", elastiService(requested(time.Minute)), 2, 0, nil,
			outcome.IdleCooldown, nil, false},
		{"a wake the status does not show yet makes it stale", elastiService(requested(5 * time.Second)), 2, 2 * time.Second, nil,
			outcome.IdleCooldown, nil, false},
		{"an unreadable request is none", elastiService(both(requested(5*time.Second), func(es *elastiv1alpha1.ElastiService) {
			es.Annotations[elastiv1alpha1.AnnotationSleepRequestedAt] = "soon"
		})), 2, 0, nil, outcome.IdleCooldown, nil, false},
		{"outside the enabled period it is not honoured", elastiService(both(requested(5*time.Second), func(es *elastiv1alpha1.ElastiService) {
			es.Spec.EnabledPeriod = &elastiv1alpha1.EnabledPeriod{Schedule: "0 9 * * 1-5", Duration: "8h"}
		})), 2, 0, nil, outcome.IdleOutsideWindow, nil, false},
		{"an unmanaged Service is left alone", elastiService(both(requested(5*time.Second), func(es *elastiv1alpha1.ElastiService) {
			es.Labels = map[string]string{"unmanaged": "yes"}
		})), 2, 0, nil, outcome.IdleNotManaged, nil, false},
		{"a target at zero already", elastiService(requested(5 * time.Second)), 0, 0, nil, outcome.IdleAlreadyZero, nil, false},
		{"no resolver in front, no scale-down", elastiService(requested(5 * time.Second)), 2, 0, fmt.Errorf("no ready resolver pod"),
			outcome.IdleNotFronted, nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			scaler := scaletargettest.New(c.replicas)
			indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
			_ = indexer.Add(c.es)
			recorder := record.NewFakeRecorder(10)
			var order []string
			router := fakeRouter{
				manages: func(es *elastiv1alpha1.ElastiService) bool { return es.Labels["unmanaged"] == "" },
				front: func(context.Context, *elastiv1alpha1.ElastiService) (func(bool), error) {
					if c.frontErr != nil {
						return nil, c.frontErr
					}
					order = append(order, fmt.Sprintf("fronted with %d replicas", scaler.Replicas()))
					return func(scaled bool) { order = append(order, fmt.Sprintf("done(%v)", scaled)) }, nil
				},
			}
			var wakes wakeLog
			if c.recentWake > 0 {
				wakes = func(types.NamespacedName) (time.Time, bool) { return now.Add(-c.recentWake), true }
			}
			// Busy triggers: only the request can make it idle.
			p := New(elastilisters.NewElastiServiceLister(indexer), scaler, router, wakes, recorder, observer{}, noEvaluations{}, Config{
				Interval: time.Second, Parallelism: 1, QueryTimeout: time.Second,
				Defaults: triggers.Defaults{ServerAddress: prometheus(t, "5")},
			})
			p.clock = clocktesting.NewFakePassiveClock(now)
			got, _ := p.Evaluate(context.Background(), c.es)
			if got != c.want {
				t.Errorf("outcome %q, want %q", got, c.want)
			}
			if fmt.Sprint(scaler.Scaled()) != fmt.Sprint(c.wantScaled) {
				t.Errorf("scaled %v, want %v", scaler.Scaled(), c.wantScaled)
			}
			if c.wantScaled != nil && fmt.Sprint(order) != "[fronted with 2 replicas done(true)]" {
				t.Errorf("order %v: the resolver must be in front before the scale to zero", order)
			}
			var events []string
			for len(recorder.Events) > 0 {
				events = append(events, <-recorder.Events)
			}
			if hasEvent := len(events) == 1 && events[0] == "Normal "+ReasonScaledToZero+" Sleep requested at "+
				now.Add(-5*time.Second).Format(time.RFC3339)+`: scaled Deployment "web" to 0`; hasEvent != c.wantEvent {
				t.Errorf("events %q; want the ScaledToZero event: %v", events, c.wantEvent)
			}
		})
	}
}
