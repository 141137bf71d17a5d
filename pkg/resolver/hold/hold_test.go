package hold

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
	"github.com/elasti-dev/elasti/pkg/resolver/internal/resolvertest"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
)

// countingWaker stands in for the operator and counts POSTs.
type countingWaker struct {
	posts atomic.Int64
	seen  chan struct{}
}

func newCountingWaker() *countingWaker {
	return &countingWaker{seen: make(chan struct{}, 100)}
}

func (n *countingWaker) wake(context.Context, klog.Logger, clusterview.ServiceRef) string {
	n.posts.Add(1)
	n.seen <- struct{}{}
	return OutcomeSuccess
}

func (n *countingWaker) waitPost(t *testing.T, what string) {
	t.Helper()
	select {
	case <-n.seen:
	case <-time.After(5 * time.Second):
		t.Fatalf("no POST to the operator: %s", what)
	}
}

// newHoldBed returns a holder over empty endpoints, its counting waker
// and the Service the tests hold for.
func newHoldBed(t *testing.T, retryMax time.Duration) (*clusterview.MemoryEndpoints, *countingWaker, *Holder, clusterview.ServiceRef) {
	eps := clusterview.NewMemoryEndpoints()
	n := newCountingWaker()
	return eps, n, newTestHolder(t, eps, n, retryMax), clusterview.ServiceRef{Namespace: "shop", Name: "web"}
}

func newTestHolder(t *testing.T, eps clusterview.EndpointSource, n *countingWaker, retryMax time.Duration) *Holder {
	_, ctx := ktesting.NewTestContext(t)
	h := New(ctx, Config{RetryInitial: 10 * time.Millisecond, RetryMax: retryMax}, eps, n.wake, Options{Logger: klog.FromContext(ctx)})
	t.Cleanup(h.Close)
	return h
}

// A hold after every earlier one was released, while the wake loop still
// waits out its interval, must reach the operator at once: the Service
// went back to zero.
func TestHoldAfterAllReleasedAsksForAWakeAtOnce(t *testing.T) {
	_, n, h, svc := newHoldBed(t, time.Hour)

	first := h.join(svc)
	n.waitPost(t, "first hold")
	first.leave() // woke; the loop now waits an hour before asking again

	second := h.join(svc)
	defer second.leave()
	n.waitPost(t, "a hold after all were released")
	if got := n.posts.Load(); got != 2 {
		t.Fatalf("%d POSTs, want 2", got)
	}
}

// One wake loop per Service, however many wait.
func TestManyHoldsShareOneWakeLoop(t *testing.T) {
	_, n, h, svc := newHoldBed(t, time.Hour)
	for range 50 {
		defer h.join(svc).leave()
	}
	n.waitPost(t, "50 holds")
	time.Sleep(100 * time.Millisecond)
	if got := n.posts.Load(); got != 1 {
		t.Fatalf("%d POSTs for one Service, want 1", got)
	}
	if got := h.Held(svc); got != 50 {
		t.Fatalf("held = %d, want 50", got)
	}
}

// gatedEndpoints stops the next Lookup once armed, until open closes: a
// test holds the wake loop as it looks, while holds come and go.
type gatedEndpoints struct {
	*clusterview.MemoryEndpoints
	armed   atomic.Bool
	entered chan struct{}
	open    chan struct{}
}

func (g *gatedEndpoints) Lookup(svc clusterview.ServiceRef, port string) (clusterview.Backends, error) {
	if g.armed.CompareAndSwap(true, false) {
		g.entered <- struct{}{}
		<-g.open
	}
	return g.MemoryEndpoints.Lookup(svc, port)
}

// A hold that joins and leaves while the wake loop pauses after a wake (a
// waiting page answered at once) must still reach the operator, and the
// loop must end after: the Service may have gone back to zero since the
// last wake, or that wake failed.
func TestHoldThatLeftDuringThePauseStillWakes(t *testing.T) {
	for i := range 3 {
		g := &gatedEndpoints{MemoryEndpoints: clusterview.NewMemoryEndpoints(), entered: make(chan struct{}, 1), open: make(chan struct{})}
		n := newCountingWaker()
		h := newTestHolder(t, g, n, time.Hour)
		svc := clusterview.ServiceRef{Namespace: "shop", Name: "web"}

		first := h.join(svc)
		n.waitPost(t, fmt.Sprintf("round %d: first hold", i+1))
		// Let the loop reach its hour's pause with first still held, so
		// the next join kicks it rather than starting another loop.
		time.Sleep(50 * time.Millisecond)
		first.leave()

		g.armed.Store(true)
		second := h.join(svc) // kicks the pause; the loop stops in its Lookup
		select {
		case <-g.entered:
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: the kicked wake loop never looked", i+1)
		}
		second.leave()
		close(g.open)

		n.waitPost(t, fmt.Sprintf("round %d: a hold that joined and left during the pause", i+1))
		resolvertest.Eventually(t, 5*time.Second, fmt.Sprintf("round %d: the wake loop to end with nothing held", i+1), func() bool { return !h.waiting(svc) })
		if got := n.posts.Load(); got != 2 {
			t.Fatalf("round %d: %d POSTs, want 2", i+1, got)
		}
	}
}

// wait returns the endpoints once the Service has one, and the context's
// error at the deadline.
func TestWaitEndsOnReadyOrDeadline(t *testing.T) {
	eps, _, h, svc := newHoldBed(t, time.Hour)

	hd := h.join(svc)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := hd.wait(ctx, ""); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait without endpoints = %v, want the deadline", err)
	}
	hd.leave()

	hd = h.join(svc)
	defer hd.leave()
	go func() { time.Sleep(20 * time.Millisecond); eps.Set(svc, "10.244.0.9:8080") }()
	b, err := hd.wait(t.Context(), "")
	if err != nil || len(b.Addrs) != 1 {
		t.Fatalf("wait = %v, %v; want the new endpoint", b, err)
	}
}

// When the endpoint the wake loop saw goes again before it stops, a hold
// that missed it keeps the wake loop going: nothing waits without the
// operator knowing.
func TestWakeLoopRestartsWhenEndpointsGoAgain(t *testing.T) {
	eps, n, h, svc := newHoldBed(t, 20*time.Millisecond)

	hd := h.join(svc)
	defer hd.leave()
	n.waitPost(t, "first hold")
	eps.Set(svc, "10.244.0.9:8080") // woke: the wake loop stops
	if _, err := hd.wait(t.Context(), ""); err != nil {
		t.Fatal(err)
	}
	eps.Set(svc) // and went back to zero while still held

	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	go func() { _, _ = hd.wait(ctx, "") }()
	n.waitPost(t, "a hold that saw the endpoint go")
}

// Close ends waits with ErrClosed.
func TestCloseEndsWaits(t *testing.T) {
	_, n, h, svc := newHoldBed(t, time.Hour)
	hd := h.join(svc)
	defer hd.leave()
	errs := make(chan error, 1)
	go func() { _, err := hd.wait(t.Context(), ""); errs <- err }()
	n.waitPost(t, "the hold")
	h.Close()
	if err := <-errs; !errors.Is(err, ErrClosed) {
		t.Fatalf("wait after close = %v, want ErrClosed", err)
	}
}

// A hold that ends before its wake loop runs (a waiting page answered at
// once, a client that gave up) still reaches the operator, once: each
// reload of a page would otherwise race the same way and the Service
// would never wake. Each round is a fresh holder, so no loop of an
// earlier round is still pausing (that loop may or may not have seen the
// hold, as its goroutine runs on another P).
func TestHoldEndedBeforeTheLoopRanStillWakes(t *testing.T) {
	for i := range 3 {
		_, n, h, svc := newHoldBed(t, time.Hour)
		h.join(svc).leave() // no yield between: the loop has usually not run yet
		n.waitPost(t, fmt.Sprintf("round %d: a hold ended at once", i+1))
		time.Sleep(100 * time.Millisecond)
		if got := n.posts.Load(); got != 1 {
			t.Fatalf("round %d: %d POSTs for one hold ended at once, want 1", i+1, got)
		}
		if got := h.Held(svc); got != 0 {
			t.Fatalf("round %d: held = %d after the hold ended, want 0", i+1, got)
		}
	}
}

// waiting reports whether svc still has a waiter: something held or its
// wake loop running.
func (h *Holder) waiting(svc clusterview.ServiceRef) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.waiters[svc]
	return ok
}
