package idle

import (
	"github.com/elasti-dev/elasti/pkg/outcome"

	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	elastilisters "github.com/elasti-dev/elasti/pkg/generated/listers/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/scaletarget/scaletargettest"
	"github.com/elasti-dev/elasti/pkg/triggers"
)

// TestPreWarm: in the lead before the window closes the target is woken
// and held up, as outside the window; before the lead the window lets it
// sleep as ever. now is 12:00 UTC, 13:00 in Berlin.
func TestPreWarm(t *testing.T) {
	berlin := func(schedule, duration, preWarm string) *elastiv1alpha1.ElastiService {
		return elastiService(func(es *elastiv1alpha1.ElastiService) {
			es.Spec.EnabledPeriod = &elastiv1alpha1.EnabledPeriod{Schedule: schedule, Duration: duration, TimeZone: "Europe/Berlin", PreWarm: preWarm}
		})
	}
	cases := []struct {
		name       string
		es         *elastiv1alpha1.ElastiService
		replicas   int32
		want       outcome.Idle
		wantScaled []int32
		wantEvent  string
	}{
		// The window 05:00-13:10 Berlin closes at 12:10 UTC.
		{"in the lead at zero wakes", berlin("0 5 * * *", "8h10m", "15m"), 0, outcome.IdlePreWarm, []int32{2},
			`Normal PreWarmed The enabled period closes at 2026-11-21T12:10:00Z ("0 5 * * *" for 8h10m0s in Europe/Berlin, pre-warmed 15m0s before it closes): scaled Deployment "web" to 2`},
		{"in the lead and up stays up, idle or not", berlin("0 5 * * *", "8h10m", "15m"), 2, outcome.IdlePreWarm, nil, ""},
		{"before the lead sleeps", berlin("0 5 * * *", "8h10m", "5m"), 2, outcome.IdleScaledToZero, []int32{0}, ""},
		{"before the lead at zero stays at zero", berlin("0 5 * * *", "8h10m", "5m"), 0, outcome.IdleAlreadyZero, nil, ""},
		// Read in UTC, the same window would have closed at 13:10 UTC.
		{"the zone places the closing", elastiService(func(es *elastiv1alpha1.ElastiService) {
			es.Spec.EnabledPeriod = &elastiv1alpha1.EnabledPeriod{Schedule: "0 5 * * *", Duration: "8h10m", PreWarm: "15m"}
		}), 2, outcome.IdleScaledToZero, []int32{0}, ""},
		// Closed at 13:00 Berlin: outside, as before.
		{"after the closing is outside", berlin("0 5 * * *", "8h", "15m"), 0, outcome.IdleOutsideWindow, []int32{2},
			"Normal " + ReasonOutsideEnabledRange},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			scaler := scaletargettest.New(c.replicas)
			indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
			_ = indexer.Add(c.es)
			recorder := record.NewFakeRecorder(10)
			p := New(elastilisters.NewElastiServiceLister(indexer), scaler, fakeRouter{}, wakeLog(nil), recorder, observer{}, noEvaluations{}, Config{
				Interval: time.Second, Parallelism: 1, QueryTimeout: time.Second,
				Defaults: triggers.Defaults{ServerAddress: prometheus(t, "0")},
			})
			p.clock = clocktesting.NewFakePassiveClock(now)
			if got, _ := p.Evaluate(context.Background(), c.es); got != c.want {
				t.Errorf("outcome %q, want %q", got, c.want)
			}
			if fmt.Sprint(scaler.Scaled()) != fmt.Sprint(c.wantScaled) {
				t.Errorf("scaled %v, want %v", scaler.Scaled(), c.wantScaled)
			}
			var event string
			select {
			case event = <-recorder.Events:
			default:
			}
			if c.wantEvent != "" && !strings.HasPrefix(event, c.wantEvent) || c.wantEvent == "" && strings.Contains(event, ReasonPreWarmed) {
				t.Errorf("event %q, want %q", event, c.wantEvent)
			}
		})
	}
}
