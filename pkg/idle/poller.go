// Package idle scales targets to zero when their triggers say they are idle.
// Every interval it evaluates all ElastiServices concurrently, with bounded
// parallelism, and only ever scales down on a clean, unanimous verdict: any
// error leaves the target alone.
package idle

import (
	"context"
	"errors"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/directory"
	elastilisters "github.com/elasti-dev/elasti/pkg/generated/listers/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/outcome"
	"github.com/elasti-dev/elasti/pkg/scaletarget"
	"github.com/elasti-dev/elasti/pkg/schedule"
	"github.com/elasti-dev/elasti/pkg/triggers"
)

// Event reasons.
const (
	ReasonScaledToZero        = "ScaledToZero"
	ReasonTriggerError        = "TriggerError"
	ReasonInvalidSchedule     = "InvalidEnabledPeriod"
	ReasonOutsideEnabledRange = "ScaledUpOutsideEnabledPeriod"
	ReasonScaleFailed         = "ScaleFailed"
)

// frontTimeout bounds the wait for the resolver to be put in front before a
// scale to zero; past it the target is left alone until the next poll.
const frontTimeout = 10 * time.Second

// Config tunes the poller.
type Config struct {
	Interval    time.Duration
	Parallelism int
	// Defaults fill in trigger metadata (server address, Authorization).
	Defaults triggers.Defaults
	// QueryTimeout bounds each Prometheus query.
	QueryTimeout time.Duration
}

// Router is what the poller needs of the controller that routes each
// ElastiService's Service (controller.Controller is one).
type Router interface {
	// Manages says whether the controller currently drives es's Service
	// and has it Ready; the poller leaves every other one alone, so it
	// never scales a target nothing could wake.
	Manages(es *elastiv1alpha1.ElastiService) bool
	// Moving says whether a change of es's spec.service is still under
	// way. The move wakes the target and keeps the old Service fronted
	// until a pod serves it; scaling the target down meanwhile would only
	// have the move wake it again, so the poller waits.
	Moving(es *elastiv1alpha1.ElastiService) bool
	// FrontForScaleDown puts the resolver in front of es's Service before
	// its target is scaled to zero, and is told the scale's outcome
	// through done: make before break, so the Service never goes without
	// endpoints even if the operator dies right after the scale write.
	FrontForScaleDown(ctx context.Context, es *elastiv1alpha1.ElastiService) (done func(scaled bool), err error)
}

// WakeLog is where cooldowns start (Wakes is one).
type WakeLog interface {
	// LastWake reports a scale-up from zero that status.lastScaledUpTime
	// may not show yet, so a poll right after one never undoes it.
	LastWake(es types.NamespacedName) (time.Time, bool)
	// LastAsked reports when a resolver last asked to wake es's target:
	// it asks again while it holds a request for the Service.
	LastAsked(es types.NamespacedName) (time.Time, bool)
	// ObserveReplicas is told the replicas each evaluation reads, so a
	// poll that reads a target someone scaled up from zero before the
	// controller has reported it still starts its cooldown.
	ObserveReplicas(ctx context.Context, es types.NamespacedName, replicas int32)
	// Pending reports whether a wake of es's group (spec.wakeWith) is
	// under way while its target is at zero.
	Pending(es types.NamespacedName, st *elastiv1alpha1.ElastiServiceStatus) bool
}

// EvaluationReporter is told the outcome of every evaluation of es's
// triggers: nil when they ran clean, or why they could not (see
// TriggersCondition), and how the HPA es names relates to its target (see
// HPACondition). ConditionWriter is one.
type EvaluationReporter interface {
	Report(ctx context.Context, es *elastiv1alpha1.ElastiService, err error)
	ReportHPA(ctx context.Context, es *elastiv1alpha1.ElastiService, fit scaletarget.HPAFit)
}

// Observer receives each evaluation's outcome with the trigger failure
// reason (empty unless the outcome is trigger_error), and each poll's start
// and duration (metrics.Operator is one).
type Observer interface {
	ObserveIdleEvaluation(o outcome.Idle, reason triggers.Reason)
	ObservePoll(start time.Time, d time.Duration)
}

// Poller evaluates triggers and scales idle targets to zero.
type Poller struct {
	lister   elastilisters.ElastiServiceLister
	scaler   scaletarget.Interface
	router   Router
	wakes    WakeLog
	observer Observer
	// evaluations records whether each evaluation ran clean.
	evaluations EvaluationReporter
	client      *triggers.Client
	recorder    record.EventRecorder
	cfg         Config
	clock       clock.PassiveClock
}

// New returns a poller. Every collaborator is required.
func New(lister elastilisters.ElastiServiceLister, scaler scaletarget.Interface, router Router, wakes WakeLog,
	recorder record.EventRecorder, observer Observer, evaluations EvaluationReporter, cfg Config) *Poller {
	if cfg.Parallelism < 1 {
		cfg.Parallelism = 1
	}
	return &Poller{
		lister: lister, scaler: scaler, router: router, wakes: wakes, observer: observer,
		evaluations: evaluations, recorder: recorder, cfg: cfg, clock: clock.RealClock{},
		client: &triggers.Client{Timeout: cfg.QueryTimeout},
	}
}

// Run polls every interval until ctx ends. Run it only on the leader.
func (p *Poller) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithName("idle-poller")
	ctx = klog.NewContext(ctx, logger)
	logger.Info("Starting idle poller", "interval", p.cfg.Interval, "parallelism", p.cfg.Parallelism)
	ticker := time.NewTicker(p.cfg.Interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			p.PollOnce(ctx)
		}
	}
}

// PollOnce evaluates every ElastiService once and waits for all of them.
func (p *Poller) PollOnce(ctx context.Context) {
	start := p.clock.Now()
	all, err := p.lister.List(labels.Everything())
	if err != nil {
		klog.FromContext(ctx).Error(err, "Cannot list ElastiServices")
		return
	}
	// A fleet's triggers mostly share one Prometheus: share its answer to
	// whether it has been up, rather than ask once per ElastiService.
	client := *p.client
	client.Health = &triggers.HealthMemo{}
	work := make(chan *elastiv1alpha1.ElastiService)
	var wg sync.WaitGroup
	for range min(p.cfg.Parallelism, max(len(all), 1)) {
		wg.Go(func() {
			for es := range work {
				p.observer.ObserveIdleEvaluation(p.evaluateWith(ctx, es, &client))
			}
		})
	}
	for _, es := range all {
		select {
		case work <- es:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	p.observer.ObservePoll(start, p.clock.Since(start))
	klog.FromContext(ctx).V(4).Info("Poll finished", "elastiServices", len(all), "duration", p.clock.Since(start))
}

// Evaluate decides and acts for one ElastiService, with health checks of
// its own (PollOnce shares them among a poll's evaluations).
func (p *Poller) Evaluate(ctx context.Context, es *elastiv1alpha1.ElastiService) (outcome.Idle, triggers.Reason) {
	return p.evaluateWith(ctx, es, p.client)
}

// evaluateWith is Evaluate, querying through client. It gathers facts
// and passes them through the gates (gates.go); only what the gates let
// through reaches the triggers and then the scale-down.
func (p *Poller) evaluateWith(ctx context.Context, es *elastiv1alpha1.ElastiService, client *triggers.Client) (outcome.Idle, triggers.Reason) {
	logger := klog.FromContext(ctx).WithValues("elastiService", klog.KObj(es))
	f := &facts{es: es, manages: p.router.Manages(es), moving: p.router.Moving(es)}
	f.window, f.windowErr = schedule.FromSpec(es.Spec.EnabledPeriod)
	ref := scaletarget.RefFor(es)
	f.ref = ref
	state, err := p.scaler.Get(ref)
	f.targetErr, f.replicas = err, state.Replicas
	if v := admissionGates.First(f); v != nil {
		return p.act(ctx, f, v), ""
	}

	p.wakes.ObserveReplicas(ctx, es.Key(), state.Replicas)
	entry := directory.EntryFor(es)
	f.minReplicas = entry.MinTargetReplicas
	// Whether the HPA spec.autoscaler names scales this target, for the
	// HPAFound condition: a wrong name silently gives wakes without it.
	p.evaluations.ReportHPA(ctx, es, scaletarget.GoalFor(p.scaler, ref, entry.MinTargetReplicas, es.Spec.Autoscaler).HPA)
	f.now = p.clock.Now()
	f.cooldown = time.Duration(es.Spec.CooldownPeriod) * time.Second
	f.lastWake = p.lastWake(es)
	f.servedAt, f.waking = wakeProgress(es, f.lastWake)
	f.lastAsked, _ = p.wakes.LastAsked(es.Key())
	f.closes, f.preWarming = f.window.PreWarming(f.now)
	f.sleepRequestedAt, f.sleepRequested = elastiv1alpha1.SleepRequest(es, f.lastWake)
	if v := windowGates.First(f); v != nil {
		return p.act(ctx, f, v), ""
	}

	answer, err := triggers.Evaluate(ctx, client, es.Spec.Triggers, f.cooldown, p.cfg.Defaults)
	f.triggersErr, f.idle = err, answer.Idle
	if err != nil {
		reason := triggers.ReasonOf(err)
		if errors.Is(ctx.Err(), context.Canceled) {
			return outcome.IdleTriggerError, reason
		}
		p.evaluations.Report(ctx, es, err)
		logger.V(2).Info("Triggers could not be evaluated; not scaling down", "reason", reason, "err", err)
		return p.act(ctx, f, triggerGates.First(f)), reason
	}
	p.evaluations.Report(ctx, es, nil)
	if v := triggerGates.First(f); v != nil {
		logger.V(4).Info("Not idle", "reason", answer.Reason, "detail", answer.Detail)
		return p.act(ctx, f, v), ""
	}

	if o := p.scaleToZero(ctx, es, ref, f.now); o != outcome.IdleScaledToZero {
		return o, ""
	}
	logger.V(2).Info("Scaled to zero", "target", ref.String(), "detail", answer.Detail)
	p.recorder.Eventf(es, corev1.EventTypeNormal, ReasonScaledToZero, "Idle for %s (%s): scaled %s %q to 0", f.cooldown, answer.Detail, ref.Kind, ref.Name)
	p.sleepDependencies(ctx, es, f.now)
	return outcome.IdleScaledToZero, ""
}

// act does what verdict v says, on the facts f it was reached on, and
// returns the evaluation's outcome. It is the one place a verdict is
// acted on.
func (p *Poller) act(ctx context.Context, f *facts, v *verdict) outcome.Idle {
	es, ref := f.es, f.ref
	switch v.action {
	case preWarm:
		return p.preWarm(ctx, f)
	case sleepNow:
		return p.sleepOnRequest(ctx, es, ref, f.sleepRequestedAt, f.now)
	case sleepDependencies:
		p.sleepDependencies(ctx, es, time.Time{})
	case wakeOutsideWindow:
		replicas := scaletarget.GoalFor(p.scaler, ref, f.minReplicas, es.Spec.Autoscaler).Replicas
		if !p.wakeOutsideWindow(ctx, es, ref, replicas) {
			return outcome.IdleScaleFailed
		}
		p.recorder.Eventf(es, corev1.EventTypeNormal, ReasonOutsideEnabledRange,
			"Outside the enabled period %s: scaled %s %q to %d", f.window, ref.Kind, ref.Name, replicas)
	case conclude:
	}
	if v.reason != "" {
		p.recorder.Event(es, v.eventType, v.reason, v.message)
	}
	return v.outcome
}

// scaleToZero puts the resolver in front, then scales the target to zero.
// A wake that lands in between (after decided) calls the scale-down off.
func (p *Poller) scaleToZero(ctx context.Context, es *elastiv1alpha1.ElastiService, ref scaletarget.Ref, decided time.Time) outcome.Idle {
	frontCtx, cancel := context.WithTimeout(ctx, frontTimeout)
	done, err := p.router.FrontForScaleDown(frontCtx, es)
	cancel()
	if err != nil {
		p.recorder.Eventf(es, corev1.EventTypeWarning, ReasonScaleFailed, "Not scaling to zero: the resolver could not be put in front of Service %q: %v", es.Spec.Service, err)
		return outcome.IdleNotFronted
	}
	if p.lastWake(es).After(decided) {
		done(false)
		return outcome.IdleCooldown
	}
	// Pause KEDA first, so it does not scale the target straight back up.
	if err := scaletarget.PauseKEDA(ctx, p.scaler, es.Namespace, es.Spec.Autoscaler); err != nil {
		done(false)
		p.recorder.Eventf(es, corev1.EventTypeWarning, ReasonScaleFailed, "Not scaling to zero: %v", err)
		return outcome.IdleScaleFailed
	}
	if err := p.scaler.Scale(ctx, ref, 0); err != nil {
		done(false)
		p.recorder.Eventf(es, corev1.EventTypeWarning, ReasonScaleFailed, "Scaling to zero failed: %v", err)
		return outcome.IdleScaleFailed
	}
	done(true)
	return outcome.IdleScaledToZero
}

// wakeProgress says whether the latest wake, at lastWake, has served, and
// when its first pod was Ready if status measured it. A wake has served
// once the Service is in serve mode: the controller switches to serve when
// a pod of the target is Ready, and a wake happens only from zero, in
// proxy mode. The mode is the whole answer, not status's arithmetic on
// the wake's times: those are whole seconds, written by two writers that
// race (the wake's patch of lastScaledUpTime and the controller's switch),
// and a wake the controller did not see begin has no measured cold start.
// Either once kept a served wake "waking" for the ask's whole grace.
// servedAt is lastScaledUpTime plus lastColdStart, which the switch to
// serve writes; zero where status has none.
func wakeProgress(es *elastiv1alpha1.ElastiService, lastWake time.Time) (servedAt time.Time, waking bool) {
	if lastWake.IsZero() {
		return time.Time{}, false
	}
	if es.Status.Mode != elastiv1alpha1.ModeServe {
		return time.Time{}, true
	}
	served, _ := es.Status.WakeServedAt()
	return served, false
}

// lastWake is the later of status.lastScaledUpTime and a scale-up from
// zero this replica recorded that the status does not show yet.
func (p *Poller) lastWake(es *elastiv1alpha1.ElastiService) time.Time {
	var last time.Time
	if es.Status.LastScaledUpTime != nil {
		last = es.Status.LastScaledUpTime.Time
	}
	if t, ok := p.wakes.LastWake(es.Key()); ok && t.After(last) {
		last = t
	}
	return last
}

// wakeOutsideWindow wakes the target outside the enabled period and
// reports whether it is up (see scaletarget.Wake for the error policy).
func (p *Poller) wakeOutsideWindow(ctx context.Context, es *elastiv1alpha1.ElastiService, ref scaletarget.Ref, replicas int32) bool {
	err := scaletarget.Wake(ctx, p.scaler, ref, replicas, es.Spec.Autoscaler)
	if !scaletarget.Woken(err) {
		p.recorder.Eventf(es, corev1.EventTypeWarning, ReasonScaleFailed, "Scaling up outside the enabled period failed: %v", err)
		return false
	}
	if err != nil {
		p.recorder.Eventf(es, corev1.EventTypeWarning, ReasonScaleFailed, "Scaled up outside the enabled period, but resuming KEDA failed: %v", err)
	}
	return true
}
