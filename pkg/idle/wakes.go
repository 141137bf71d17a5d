package idle

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

// StatusRecorder stores status.lastScaledUpTime and status.lastHeld.
type StatusRecorder interface {
	RecordScaledUp(ctx context.Context, es types.NamespacedName, at time.Time) error
	RecordHeld(ctx context.Context, es types.NamespacedName, held time.Duration) error
}

// wakeMemory is how long Wakes remembers a wake in memory; by then its
// status write has landed or failed for good.
const wakeMemory = 10 * time.Minute

// Wakes records each ElastiService's last scale-up from zero, where its
// cooldown starts: in memory at once, for the poller's next evaluation
// (LastWake), and in status.lastScaledUpTime asynchronously, for the next
// leader. A scale-up counts whoever made it: a wake through the scale
// endpoint (Record) or anyone else, a person's `kubectl scale` included,
// seen in the target's informer (ObserveReplicas).
type Wakes struct {
	status StatusRecorder
	// writeTimeout bounds one status write.
	writeTimeout time.Duration
	baseCtx      context.Context
	clock        clock.PassiveClock

	mu sync.Mutex
	// woken holds each ElastiService's last wake for wakeMemory.
	woken *cache.Expiring
	// asked holds, for wakeMemory, when a resolver last asked to wake each
	// ElastiService's target, whatever the answer: it asks again every
	// few seconds for as long as it holds a request for the Service.
	asked *cache.Expiring
	// held holds, for heldSpacing, the ElastiServices whose lastHeld was
	// just written.
	held *cache.Expiring
	// atZero holds when each ElastiService's target was first seen at
	// zero since its last scale-up was seen.
	atZero map[types.NamespacedName]time.Time
	// up holds the ElastiServices whose target was last seen above zero,
	// and sleptAt when each target was last seen going from above zero to
	// zero: a sleep seen happening, unlike atZero, which a first look at
	// a target long asleep sets too (see Pending).
	up      map[types.NamespacedName]struct{}
	sleptAt map[types.NamespacedName]time.Time
	// writes tracks the asynchronous status writes; stopping (under mu)
	// refuses new ones once Wait has begun.
	writes   sync.WaitGroup
	stopping bool
}

// NewWakes returns an empty record. Status writes run under baseCtx's
// values, not its cancellation: a wake that happened is recorded even
// during shutdown, so the next leader's cooldown counts from it.
func NewWakes(baseCtx context.Context, status StatusRecorder, writeTimeout time.Duration) *Wakes {
	return &Wakes{
		status: status, writeTimeout: writeTimeout, baseCtx: context.WithoutCancel(baseCtx), clock: clock.RealClock{},
		woken:   cache.NewExpiring(),
		asked:   cache.NewExpiring(),
		held:    cache.NewExpiring(),
		atZero:  map[types.NamespacedName]time.Time{},
		up:      map[types.NamespacedName]struct{}{},
		sleptAt: map[types.NamespacedName]time.Time{},
	}
}

// LastWake returns the last scale-up from zero of es this replica
// recorded; status.lastScaledUpTime may not show it yet.
func (w *Wakes) LastWake(es types.NamespacedName) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastWake(es)
}

// lastWake is LastWake under w.mu.
func (w *Wakes) lastWake(es types.NamespacedName) (time.Time, bool) {
	t, ok := w.woken.Get(es)
	if !ok {
		return time.Time{}, false
	}
	return t.(time.Time), true
}

// Asked notes that a resolver asked at at to wake es's target, scaled up
// already or not. Only ElastiServices the operator knows are asked for
// (the wake server looks them up first), so the record is as small as
// the set of ElastiServices.
func (w *Wakes) Asked(es types.NamespacedName, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if last, ok := w.asked.Get(es); !ok || at.After(last.(time.Time)) {
		w.asked.Set(es, at, wakeMemory)
	}
}

// LastAsked returns when a resolver last asked this replica to wake es's
// target.
func (w *Wakes) LastAsked(es types.NamespacedName) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t, ok := w.asked.Get(es)
	if !ok {
		return time.Time{}, false
	}
	return t.(time.Time), true
}

// heldSpacing is the least time between two writes of one
// ElastiService's lastHeld: the requests a wake held are released
// together, and each resolver replica reports the first, the longest, so
// a wake writes it once or twice; more reports than that are dropped.
const heldSpacing = time.Second

// Held writes held, a resolver's report of how long a request held for
// es waited, to status.lastHeld, at most once per heldSpacing. The write
// never delays the caller.
func (w *Wakes) Held(ctx context.Context, es types.NamespacedName, held time.Duration) {
	logger := klog.FromContext(ctx).WithValues("elastiService", klog.KRef(es.Namespace, es.Name))
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, recent := w.held.Get(es); recent || w.stopping {
		return
	}
	w.held.Set(es, struct{}{}, heldSpacing)
	w.writes.Go(func() {
		ctx, cancel := context.WithTimeout(w.baseCtx, w.writeTimeout)
		defer cancel()
		if err := w.status.RecordHeld(ctx, es, held); err != nil {
			logger.V(2).Info("Could not record lastHeld", "err", err)
		}
	})
}

// Record starts es's cooldown at at, the time of a scale-up from zero.
// The status write never delays the caller.
func (w *Wakes) Record(ctx context.Context, es types.NamespacedName, at time.Time) {
	logger := klog.FromContext(ctx).WithValues("elastiService", klog.KRef(es.Namespace, es.Name))
	w.mu.Lock()
	defer w.mu.Unlock()
	if last, _ := w.lastWake(es); at.After(last) {
		w.woken.Set(es, at, wakeMemory)
	}
	if w.stopping {
		logger.Info("Shutting down: lastScaledUpTime not recorded; the next leader sees the scaled-up target")
		return
	}
	w.writes.Go(func() {
		ctx, cancel := context.WithTimeout(w.baseCtx, w.writeTimeout)
		defer cancel()
		if err := w.status.RecordScaledUp(ctx, es, at); err != nil {
			logger.Error(err, "Could not record lastScaledUpTime")
		}
	})
}

// ObserveReplicas is told the replicas of es's target each time its
// informer shows a change. A target seen at zero and then above it was
// scaled up from zero; unless a wake recorded since it was seen at zero
// explains that, someone else scaled it, and the cooldown starts now, as
// it does for a wake. Without it, a target scaled up by hand while its
// triggers are idle would be scaled straight back to zero. A wake whose
// informer event overtakes its Record is recorded twice, a moment apart,
// which only moves the cooldown's start by that moment.
func (w *Wakes) ObserveReplicas(ctx context.Context, es types.NamespacedName, replicas int32) {
	now := w.clock.Now()
	w.mu.Lock()
	if replicas == 0 {
		if _, ok := w.atZero[es]; !ok {
			w.atZero[es] = now
		}
		if _, wasUp := w.up[es]; wasUp {
			delete(w.up, es)
			w.sleptAt[es] = now
		}
		w.mu.Unlock()
		return
	}
	w.up[es] = struct{}{}
	since, wasZero := w.atZero[es]
	delete(w.atZero, es)
	last, _ := w.lastWake(es)
	explained := !last.Before(since)
	w.mu.Unlock()
	if !wasZero || explained {
		return
	}
	klog.FromContext(ctx).V(2).Info("Target scaled up from zero by someone else: the cooldown starts now",
		"elastiService", klog.KRef(es.Namespace, es.Name), "replicas", replicas)
	w.Record(ctx, es, now)
}

// Pending reports whether a wake of es's group (spec.wakeWith) is under
// way while its target is at zero: a wake recorded, here or in status
// (lastScaledUpTime), after the target last went to zero, as seen here
// (a change from above zero to zero) or in status (lastScaledDownTime).
// The later of each pair counts, so a sleep the poller just made, whose
// status is not written yet, is never mistaken for a wake; a first look at
// a target already at zero is no sleep, so a wake recorded just before it
// still stands.
func (w *Wakes) Pending(es types.NamespacedName, st *elastiv1alpha1.ElastiServiceStatus) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	up, _ := w.lastWake(es)
	if t := st.LastScaledUpTime; t != nil && t.After(up) {
		up = t.Time
	}
	if up.IsZero() {
		return false
	}
	down := w.sleptAt[es]
	if t := st.LastScaledDownTime; t != nil && t.After(down) {
		down = t.Time
	}
	return up.After(down)
}

// Forget drops what is known of an ElastiService that no longer exists.
func (w *Wakes) Forget(es types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.atZero, es)
	delete(w.up, es)
	delete(w.sleptAt, es)
	w.woken.Delete(es)
	w.asked.Delete(es)
	w.held.Delete(es)
}

// Wait refuses further status writes and blocks until pending ones finish
// (shutdown and tests).
func (w *Wakes) Wait() {
	w.mu.Lock()
	w.stopping = true
	w.mu.Unlock()
	w.writes.Wait()
}
