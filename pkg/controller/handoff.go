package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/workloop"
)

// handoffTimeout bounds a scale-down handoff: how long the resolver may stay
// in front of a target that still has ready pods because the idle poller
// said it would scale the target to zero. Past it, serving resumes as if the
// handoff never began. Both routes lead to ready pods meanwhile (the
// resolver forwards to them), so the bound only limits an extra hop.
const handoffTimeout = 30 * time.Second

// ErrNoResolver says the resolver cannot be put in front of a Service: no
// resolver pod is ready, so nothing could hold a request or wake the target.
var ErrNoResolver = errors.New("no ready resolver pod")

// handoffs are the scale-downs under way, per ElastiService: make before
// break. The idle poller asks for the resolver to be in front before it
// scales a target to zero; the ElastiService's sync, the only writer of the
// resolver slice, puts it there and keeps it there while the target still
// has ready pods, where it would otherwise remove it. A handoff ends when a
// sync sees the target at zero, when the poller gives up, or after
// handoffTimeout. It lives only in memory: a new leader finds either the
// target still up (and serves, removing the slice) or at zero (and keeps
// the slice), and neither leaves the Service without endpoints.
type handoffs struct {
	mu sync.Mutex
	m  map[types.NamespacedName]*handoff
}

type handoff struct {
	began time.Time
	// fronted is closed once the resolver is in front, or with err set
	// once it cannot be.
	fronted chan struct{}
	err     error
	closed  bool
}

func (h *handoffs) begin(key types.NamespacedName, now time.Time) *handoff {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[types.NamespacedName]*handoff{}
	}
	ho := &handoff{began: now, fronted: make(chan struct{})}
	if old := h.m[key]; old != nil {
		old.close(errors.New("superseded by a newer scale-down"))
	}
	h.m[key] = ho
	return ho
}

// remaining reports how long key's handoff still holds, 0 if there is none.
func (h *handoffs) remaining(key types.NamespacedName, now time.Time) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	ho := h.m[key]
	if ho == nil {
		return 0
	}
	left := ho.began.Add(handoffTimeout).Sub(now)
	if left <= 0 {
		ho.close(errors.New("handoff timed out"))
		delete(h.m, key)
		return 0
	}
	return left
}

// underway reports whether key has a handoff that has not ended.
func (h *handoffs) underway(key types.NamespacedName) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.m[key] != nil
}

// settle tells key's waiting poller, if any, whether the resolver is in
// front (err nil) or cannot be.
func (h *handoffs) settle(key types.NamespacedName, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ho := h.m[key]; ho != nil {
		ho.close(err)
	}
}

// end forgets key's handoff, unless it is not the one given (a newer one
// replaced it); nil ends whichever there is.
func (h *handoffs) end(key types.NamespacedName, which *handoff) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ho := h.m[key]; ho != nil && (which == nil || ho == which) {
		ho.close(errors.New("handoff ended"))
		delete(h.m, key)
	}
}

func (ho *handoff) close(err error) {
	if !ho.closed {
		ho.closed = true
		ho.err = err
		close(ho.fronted)
	}
}

// FrontForScaleDown puts the resolver in front of es's Service and returns
// once it is there, so that the scale to zero that follows never leaves the
// Service without endpoints. The caller must call done with the outcome of
// its scale write. After a scale to zero the handoff stays until a sync sees
// the target at zero, so a sync whose cache still shows the pods keeps the
// resolver in front; without one, the resolver leaves at the next sync.
func (c *Controller) FrontForScaleDown(ctx context.Context, es *elastiv1alpha1.ElastiService) (done func(scaled bool), err error) {
	key := es.Key()
	ho := c.handoffs.begin(key, c.clock.Now())
	done = func(scaled bool) {
		if !scaled {
			c.handoffs.end(key, ho)
			c.queue.Add(key)
		}
	}
	// Ahead of the rest: a poller slot waits on this sync, and a
	// fleet-wide idle scale-down goes only as fast as the slots free up.
	c.queue.AddUrgent(key)
	select {
	case <-ho.fronted:
	case <-ctx.Done():
		done(false)
		return nil, ctx.Err()
	}
	if ho.err != nil {
		done(false)
		return nil, ho.err
	}
	return done, nil
}

// frontResult is how far a handoff's front step got.
type frontResult int

const (
	// frontNoResolver: no resolver pod is ready to take the traffic.
	frontNoResolver frontResult = iota
	// frontPending: a resolver that dials the private Service (KubeElasti's)
	// is in the pool, and that Service is not there yet or has no
	// EndpointSlice yet, so it could not reach the pods it would front;
	// their events (or privateServiceRecheck) bring the sync back.
	frontPending
	// frontDone: the resolver is in front.
	frontDone
)

// privateServiceRecheck is how soon a handoff waiting for its private
// Service's EndpointSlice looks again, should that slice's event be missed.
const privateServiceRecheck = time.Second

// holdForHandoff is the serve branch's make-before-break: while a
// scale-down is under way the resolver stays in front alongside the pods
// (it forwards to them), and the waiting poller is told once it is there.
// It reports false when no handoff is under way, and otherwise asks for the
// key again when the handoff times out.
func (c *Controller) holdForHandoff(ctx context.Context, es *elastiv1alpha1.ElastiService, front func() (frontResult, error)) (bool, error) {
	key := es.Key()
	left := c.handoffs.remaining(key, c.clock.Now())
	if left == 0 {
		return false, nil
	}
	result, err := front()
	switch {
	case err != nil:
		c.handoffs.settle(key, fmt.Errorf("put the resolver in front: %w", err))
		return true, err
	case result == frontPending:
		klog.FromContext(ctx).V(4).Info("Waiting for the private service's endpoints before fronting", "handoffLeft", left)
		return true, workloop.RequeueAfter(min(left, privateServiceRecheck))
	case result == frontNoResolver:
		c.handoffs.settle(key, ErrNoResolver)
	default:
		klog.FromContext(ctx).V(4).Info("Resolver in front for a scale-down", "handoffLeft", left)
		c.handoffs.settle(key, nil)
	}
	return true, workloop.RequeueAfter(left)
}
