package idle

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	elastilisters "github.com/elasti-dev/elasti/pkg/generated/listers/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/outcome"
	"github.com/elasti-dev/elasti/pkg/scaletarget"
	"github.com/elasti-dev/elasti/pkg/scaletarget/scaletargettest"
	"github.com/elasti-dev/elasti/pkg/triggers"
)

// fakeRouter manages every ElastiService, moves none and fronts at once,
// unless a test says otherwise.
type fakeRouter struct {
	manages func(*elastiv1alpha1.ElastiService) bool
	moving  func(*elastiv1alpha1.ElastiService) bool
	front   func(context.Context, *elastiv1alpha1.ElastiService) (func(bool), error)
}

func (r fakeRouter) Manages(es *elastiv1alpha1.ElastiService) bool {
	return r.manages == nil || r.manages(es)
}
func (r fakeRouter) Moving(es *elastiv1alpha1.ElastiService) bool {
	return r.moving != nil && r.moving(es)
}
func (r fakeRouter) FrontForScaleDown(ctx context.Context, es *elastiv1alpha1.ElastiService) (func(bool), error) {
	if r.front == nil {
		return func(bool) {}, nil
	}
	return r.front(ctx, es)
}

// wakeLog is a WakeLog; nil knows of no wake.
type wakeLog func(types.NamespacedName) (time.Time, bool)

func (w wakeLog) LastWake(es types.NamespacedName) (time.Time, bool) {
	if w == nil {
		return time.Time{}, false
	}
	return w(es)
}

func (w wakeLog) ObserveReplicas(context.Context, types.NamespacedName, int32) {}

// LastAsked knows of no resolver's ask; wakes_test.go tests Wakes's.
func (w wakeLog) LastAsked(types.NamespacedName) (time.Time, bool) { return time.Time{}, false }

// askedWakeLog is a wakeLog that knows of a resolver's ask at asked.
type askedWakeLog struct {
	wakeLog
	asked time.Time
}

func (w askedWakeLog) LastAsked(types.NamespacedName) (time.Time, bool) { return w.asked, true }

// woken is a status that records a wake up ago whose first pod was Ready
// coldStart after it, in serve mode; a negative coldStart leaves the cold
// start under way in proxy mode, as the controller's status does until it
// sees a Ready pod.
func woken(up, coldStart time.Duration) func(*elastiv1alpha1.ElastiService) {
	return func(es *elastiv1alpha1.ElastiService) {
		st := &es.Status
		st.Wakes = 1
		st.LastScaledDownTime = &metav1.Time{Time: now.Add(-up - time.Hour)}
		st.LastScaledUpTime = &metav1.Time{Time: now.Add(-up)}
		st.Mode = elastiv1alpha1.ModeProxy
		if coldStart >= 0 {
			st.Mode = elastiv1alpha1.ModeServe
			st.LastColdStart = &metav1.Duration{Duration: coldStart}
		}
	}
}

// Pending knows of no group wake; pending_test.go tests Wakes's.
func (w wakeLog) Pending(types.NamespacedName, *elastiv1alpha1.ElastiServiceStatus) bool {
	return false
}

// observer is an Observer; nil fields ignore what they are told.
type observer struct {
	evaluation func(outcome.Idle, triggers.Reason)
	poll       func(time.Time, time.Duration)
}

func (o observer) ObserveIdleEvaluation(result outcome.Idle, reason triggers.Reason) {
	if o.evaluation != nil {
		o.evaluation(result, reason)
	}
}

func (o observer) ObservePoll(start time.Time, d time.Duration) {
	if o.poll != nil {
		o.poll(start, d)
	}
}

var now = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC) // a Saturday

// prometheus answers value for the metric and 1 for the uptime query.
func prometheus(t *testing.T, value string) string {
	url, _ := countingPrometheus(t, value)
	return url
}

// countingPrometheus is prometheus, and counts the uptime queries it gets.
func countingPrometheus(t *testing.T, value string) (string, *atomic.Int64) {
	var uptime atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := value
		if strings.HasPrefix(r.URL.Query().Get("query"), "min_over_time(") {
			uptime.Add(1)
			v = "1"
		}
		fmt.Fprintf(w, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"%s"]}]}}`, v)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &uptime
}

func elastiService(mutate func(*elastiv1alpha1.ElastiService)) *elastiv1alpha1.ElastiService {
	es := &elastiv1alpha1.ElastiService{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))},
		Spec: elastiv1alpha1.ElastiServiceSpec{
			Service:           "web",
			ScaleTargetRef:    elastiv1alpha1.ScaleTargetRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinTargetReplicas: 2,
			CooldownPeriod:    60,
			Triggers:          []elastiv1alpha1.ScaleTrigger{{Type: "prometheus", Metadata: []byte(`{"query":"q","threshold":"1"}`)}},
		},
	}
	if mutate != nil {
		mutate(es)
	}
	return es
}

func TestEvaluate(t *testing.T) {
	idleProm := func(t *testing.T) string { return prometheus(t, "0") }
	busyProm := func(t *testing.T) string { return prometheus(t, "5") }
	cases := []struct {
		name       string
		es         *elastiv1alpha1.ElastiService
		replicas   int32
		prom       func(*testing.T) string
		recentWake time.Duration // ago; 0 means none
		recentAsk  time.Duration // ago; 0 means none
		want       outcome.Idle
		wantScaled []int32
		wantKEDA   []bool
	}{
		{"idle scales to zero", elastiService(nil), 2, idleProm, 0, 0, outcome.IdleScaledToZero, []int32{0}, nil},
		{"busy stays", elastiService(nil), 2, busyProm, 0, 0, outcome.IdleBusy, nil, nil},
		{"younger than cooldown", elastiService(func(es *elastiv1alpha1.ElastiService) {
			es.CreationTimestamp = metav1.NewTime(now.Add(-30 * time.Second))
		}), 2, idleProm, 0, 0, outcome.IdleCooldown, nil, nil},
		{"woken within cooldown (status)", elastiService(func(es *elastiv1alpha1.ElastiService) {
			es.Status.LastScaledUpTime = &metav1.Time{Time: now.Add(-30 * time.Second)}
		}), 2, idleProm, 0, 0, outcome.IdleCooldown, nil, nil},
		{"woken within cooldown (status not written yet)", elastiService(nil), 2, idleProm, 10 * time.Second, 0, outcome.IdleCooldown, nil, nil},
		{"served within the cooldown of its first Ready pod", elastiService(woken(90*time.Second, 40*time.Second)), 2, idleProm, 0, 0, outcome.IdleCooldown, nil, nil},
		{"served a cooldown ago", elastiService(woken(3*time.Minute, 40*time.Second)), 2, idleProm, 0, 0, outcome.IdleScaledToZero, []int32{0}, nil},
		{"not served, a cooldown after the wake, a request held", elastiService(woken(2*time.Minute, -1)), 2, idleProm, 0, 5 * time.Second, outcome.IdleWaking, nil, nil},
		{"not served, a request held, status behind the wake", elastiService(func(es *elastiv1alpha1.ElastiService) {
			woken(10*time.Minute, 40*time.Second)(es)
			es.Status.Mode = elastiv1alpha1.ModeProxy // it slept since
		}), 2, idleProm, 2 * time.Minute, 5 * time.Second, outcome.IdleWaking, nil, nil},
		{"not served and no longer asked for", elastiService(woken(2*time.Minute, -1)), 2, idleProm, 0, time.Minute, outcome.IdleScaledToZero, []int32{0}, nil},
		{"old wake does not block", elastiService(nil), 2, idleProm, 2 * time.Minute, 0, outcome.IdleScaledToZero, []int32{0}, nil},
		{"already zero", elastiService(nil), 0, idleProm, 0, 0, outcome.IdleAlreadyZero, nil, nil},
		{"keda paused before zero", elastiService(func(es *elastiv1alpha1.ElastiService) {
			es.Spec.Autoscaler = &elastiv1alpha1.AutoscalerSpec{Type: "keda", Name: "so"}
		}), 2, idleProm, 0, 0, outcome.IdleScaledToZero, []int32{0}, []bool{true}},
		{"hpa left alone", elastiService(func(es *elastiv1alpha1.ElastiService) {
			es.Spec.Autoscaler = &elastiv1alpha1.AutoscalerSpec{Type: "hpa", Name: "web"}
		}), 2, idleProm, 0, 0, outcome.IdleScaledToZero, []int32{0}, nil},
		{"outside the window at zero scales up", elastiService(func(es *elastiv1alpha1.ElastiService) {
			es.Spec.EnabledPeriod = &elastiv1alpha1.EnabledPeriod{Schedule: "0 9 * * 1-5", Duration: "8h"}
		}), 0, idleProm, 0, 0, outcome.IdleOutsideWindow, []int32{2}, nil},
		{"outside the window and up stays", elastiService(func(es *elastiv1alpha1.ElastiService) {
			es.Spec.EnabledPeriod = &elastiv1alpha1.EnabledPeriod{Schedule: "0 9 * * 1-5", Duration: "8h"}
		}), 2, idleProm, 0, 0, outcome.IdleOutsideWindow, nil, nil},
		{"inside the window scales to zero", elastiService(func(es *elastiv1alpha1.ElastiService) {
			es.Spec.EnabledPeriod = &elastiv1alpha1.EnabledPeriod{Schedule: "0 10 * * *", Duration: "4h"}
		}), 2, idleProm, 0, 0, outcome.IdleScaledToZero, []int32{0}, nil},
		{"invalid schedule does nothing", elastiService(func(es *elastiv1alpha1.ElastiService) {
			es.Spec.EnabledPeriod = &elastiv1alpha1.EnabledPeriod{Schedule: "61 * * * *", Duration: "1h"}
		}), 2, idleProm, 0, 0, outcome.IdleInvalidSchedule, nil, nil},
		{"bad trigger metadata does nothing", elastiService(func(es *elastiv1alpha1.ElastiService) {
			es.Spec.Triggers[0].Metadata = []byte(`{"query":"q","threshold":"lots"}`)
		}), 2, idleProm, 0, 0, outcome.IdleTriggerError, nil, nil},
		{"no triggers does nothing", elastiService(func(es *elastiv1alpha1.ElastiService) { es.Spec.Triggers = nil }),
			2, idleProm, 0, 0, outcome.IdleBusy, nil, nil},
		{"not managed does nothing", elastiService(func(es *elastiv1alpha1.ElastiService) { es.Labels = map[string]string{"unmanaged": "yes"} }),
			2, idleProm, 0, 0, outcome.IdleNotManaged, nil, nil},
		{"moving spec.service does nothing", elastiService(func(es *elastiv1alpha1.ElastiService) { es.Labels = map[string]string{"moving": "yes"} }),
			2, idleProm, 0, 0, outcome.IdleMoving, nil, nil},
		{"being deleted does nothing", elastiService(func(es *elastiv1alpha1.ElastiService) {
			es.DeletionTimestamp = &metav1.Time{Time: now}
		}), 2, idleProm, 0, 0, outcome.IdleDeleting, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			scaler := scaletargettest.New(c.replicas)
			indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
			_ = indexer.Add(c.es)
			recorder := record.NewFakeRecorder(10)
			router := fakeRouter{
				manages: func(es *elastiv1alpha1.ElastiService) bool { return es.Labels["unmanaged"] == "" },
				moving:  func(es *elastiv1alpha1.ElastiService) bool { return es.Labels["moving"] != "" },
			}
			var wakes WakeLog = wakeLog(nil)
			if c.recentWake > 0 {
				wakes = wakeLog(func(types.NamespacedName) (time.Time, bool) { return now.Add(-c.recentWake), true })
			}
			if c.recentAsk > 0 {
				wakes = askedWakeLog{wakeLog: wakes.(wakeLog), asked: now.Add(-c.recentAsk)}
			}
			p := New(elastilisters.NewElastiServiceLister(indexer), scaler, router, wakes, recorder, observer{}, noEvaluations{}, Config{
				Interval: time.Second, Parallelism: 2, QueryTimeout: time.Second,
				Defaults: triggers.Defaults{ServerAddress: c.prom(t)},
			})
			p.clock = clocktesting.NewFakePassiveClock(now)
			got, _ := p.Evaluate(context.Background(), c.es)
			if got != c.want {
				t.Errorf("outcome %q, want %q", got, c.want)
			}
			if fmt.Sprint(scaler.Scaled()) != fmt.Sprint(c.wantScaled) || fmt.Sprint(scaler.KEDA()) != fmt.Sprint(c.wantKEDA) {
				t.Errorf("scaled %v keda %v; want %v and %v", scaler.Scaled(), scaler.KEDA(), c.wantScaled, c.wantKEDA)
			}
		})
	}
}

func TestPollOnceEvaluatesEveryElastiServiceWithBoundedParallelism(t *testing.T) {
	scaler := scaletargettest.New(2)
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for i := range 40 {
		_ = indexer.Add(elastiService(func(es *elastiv1alpha1.ElastiService) { es.Name = fmt.Sprintf("web-%d", i) }))
	}
	server, uptimeQueries := countingPrometheus(t, "5")
	var mu sync.Mutex
	outcomes := map[outcome.Idle]int{}
	ran := false
	obs := observer{
		evaluation: func(o outcome.Idle, _ triggers.Reason) { mu.Lock(); outcomes[o]++; mu.Unlock() },
		poll:       func(time.Time, time.Duration) { ran = true },
	}
	p := New(elastilisters.NewElastiServiceLister(indexer), scaler, fakeRouter{}, wakeLog(nil), record.NewFakeRecorder(100), obs, noEvaluations{}, Config{
		Interval: time.Second, Parallelism: 4, QueryTimeout: time.Second,
		Defaults: triggers.Defaults{ServerAddress: server},
	})
	p.clock = clocktesting.NewFakePassiveClock(now)
	p.PollOnce(context.Background())
	if outcomes[outcome.IdleBusy] != 40 || !ran {
		t.Errorf("outcomes %v, run observed %v; want 40 busy verdicts", outcomes, ran)
	}
	// All 40 share one Prometheus: one uptime check per poll.
	if n := uptimeQueries.Load(); n != 1 {
		t.Errorf("%d uptime queries in one poll, want 1", n)
	}
	p.PollOnce(context.Background())
	if n := uptimeQueries.Load(); n != 2 {
		t.Errorf("%d uptime queries after two polls, want 2: each poll asks afresh", n)
	}
}

// The resolver is put in front before the scale to zero, and told how the
// scale went; a scale-down it could not front, or that a wake overtook,
// does not happen.
func TestScaleDownIsMadeBeforeBreak(t *testing.T) {
	frontErr := fmt.Errorf("no ready resolver pod")
	cases := []struct {
		name       string
		frontErr   error
		wakeInGap  bool
		want       outcome.Idle
		wantScaled []int32
		wantDone   []bool
	}{
		{"fronted then scaled", nil, false, outcome.IdleScaledToZero, []int32{0}, []bool{true}},
		{"not fronted, not scaled", frontErr, false, outcome.IdleNotFronted, nil, nil},
		{"a wake while fronting calls it off", nil, true, outcome.IdleCooldown, nil, []bool{false}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			scaler := scaletargettest.New(2)
			es := elastiService(nil)
			recorder := record.NewFakeRecorder(10)
			var woke time.Time
			wakes := wakeLog(func(types.NamespacedName) (time.Time, bool) { return woke, !woke.IsZero() })
			var done []bool
			front := func(ctx context.Context, got *elastiv1alpha1.ElastiService) (func(bool), error) {
				if _, ok := ctx.Deadline(); !ok {
					t.Error("Front was called without a deadline")
				}
				if len(scaler.Scaled()) != 0 {
					t.Error("Front was called after the scale write")
				}
				if c.wakeInGap {
					woke = now.Add(time.Second)
				}
				if c.frontErr != nil {
					return nil, c.frontErr
				}
				return func(scaled bool) { done = append(done, scaled) }, nil
			}
			p := New(nil, scaler, fakeRouter{front: front}, wakes, recorder, observer{}, noEvaluations{},
				Config{QueryTimeout: time.Second, Defaults: triggers.Defaults{ServerAddress: prometheus(t, "0")}})
			p.clock = clocktesting.NewFakePassiveClock(now)
			got, _ := p.Evaluate(context.Background(), es)
			if got != c.want {
				t.Errorf("outcome %q, want %q", got, c.want)
			}
			if fmt.Sprint(scaler.Scaled()) != fmt.Sprint(c.wantScaled) || fmt.Sprint(done) != fmt.Sprint(c.wantDone) {
				t.Errorf("scaled %v, done %v; want %v and %v", scaler.Scaled(), done, c.wantScaled, c.wantDone)
			}
		})
	}
}

// A target someone scaled up from zero by hand gets the cooldown a wake
// gets, even when the poll reads it before the controller reports it: the
// triggers are idle, but it stays up until the cooldown has passed.
func TestScaleUpFromZeroByHandIsNotUndoneWithinTheCooldown(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	scaler := scaletargettest.New(0)
	es := elastiService(nil)
	status := &statusWrites{}
	wakes := NewWakes(ctx, status, time.Second)
	clock := clocktesting.NewFakePassiveClock(now)
	wakes.clock = clock
	p := New(nil, scaler, fakeRouter{}, wakes, record.NewFakeRecorder(10), observer{}, noEvaluations{},
		Config{QueryTimeout: time.Second, Defaults: triggers.Defaults{ServerAddress: prometheus(t, "0")}})
	p.clock = clock

	if got, _ := p.Evaluate(ctx, es); got != outcome.IdleAlreadyZero {
		t.Fatalf("at zero: outcome %q, want %q", got, outcome.IdleAlreadyZero)
	}
	clock.SetTime(now.Add(time.Second))
	scaler.ScaleBySomeoneElse(1) // kubectl scale --replicas=1
	if got, _ := p.Evaluate(ctx, es); got != outcome.IdleCooldown {
		t.Errorf("scaled up by hand: outcome %q, want %q", got, outcome.IdleCooldown)
	}
	clock.SetTime(now.Add(time.Second + time.Duration(es.Spec.CooldownPeriod)*time.Second))
	if got, _ := p.Evaluate(ctx, es); got != outcome.IdleScaledToZero {
		t.Errorf("after the cooldown: outcome %q, want %q", got, outcome.IdleScaledToZero)
	}
	wakes.Wait()
	if got := fmt.Sprint(status.writes); got != "[shop/web@1s]" {
		t.Errorf("status writes %s, want the scale-up's", got)
	}
}

// noEvaluations discards evaluation reports; condition_test.go tests the
// real reporter.
type noEvaluations struct{}

func (noEvaluations) Report(context.Context, *elastiv1alpha1.ElastiService, error) {}

func (noEvaluations) ReportHPA(context.Context, *elastiv1alpha1.ElastiService, scaletarget.HPAFit) {}
