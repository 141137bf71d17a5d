package workloop

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"
)

// newTestLoop is a loop from New whose queue runs on a fake clock, so
// backoffs and delays pass only when the test steps the clock.
func newTestLoop(t *testing.T, sync SyncFunc[string], onDrop ...DropFunc[string]) (*Loop[string], *testingclock.FakeClock) {
	t.Helper()
	l := New("test", sync, nil, onDrop...)
	if l.maxRetries != DefaultMaxRetries || l.Name() != "test" {
		t.Fatalf("New: maxRetries=%d name=%q", l.maxRetries, l.Name())
	}
	l.queue.ShutDown()
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	l.newQueue(nil, clk)
	t.Cleanup(l.ShutDown)
	return l, clk
}

// waitLen waits (in real time, briefly) for the delaying queue's goroutine
// to move due keys into the queue.
func waitLen(t *testing.T, l *Loop[string], want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for l.Len() != want {
		if time.Now().After(deadline) {
			t.Fatalf("queue length = %d, want %d", l.Len(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// step advances the fake clock once the delaying queue is waiting on it
// for a key: its heartbeat ticker waits on the clock from the start, so
// one waiter is not enough. Stepping at the heartbeat alone moved the
// clock before the key's timer was made, which then fired a step late
// (seen once in CI under load).
func step(t *testing.T, clk *testingclock.FakeClock, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for clk.Waiters() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("delaying queue never waited on the clock")
		}
		time.Sleep(time.Millisecond)
	}
	clk.Step(d)
}

func noSync(context.Context, string) error { return nil }

func TestHandleErrSuccessForgets(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	l, _ := newTestLoop(t, noSync)
	l.queue.AddRateLimited("k")
	l.queue.AddRateLimited("k")
	if n := l.queue.NumRequeues("k"); n != 2 {
		t.Fatalf("NumRequeues = %d, want 2", n)
	}
	l.handleErr(ctx, nil, "k")
	if n := l.queue.NumRequeues("k"); n != 0 {
		t.Errorf("NumRequeues after success = %d, want 0", n)
	}
	if l.Len() != 0 {
		t.Errorf("success re-queued the key")
	}
}

func TestHandleErrBacksOffThenDrops(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	var dropped []error
	l, clk := newTestLoop(t, noSync, func(_ context.Context, key string, err error) {
		if key != "k" {
			t.Errorf("OnDrop key = %q", key)
		}
		dropped = append(dropped, err)
	})
	boom := errors.New("boom")

	// The first failure comes back after the rate limiter's 5ms, not before.
	l.handleErr(ctx, boom, "k")
	step(t, clk, 4*time.Millisecond)
	if l.Len() != 0 {
		t.Fatal("failed key re-queued before its backoff")
	}
	step(t, clk, time.Millisecond)
	waitLen(t, l, 1)

	for i := 1; i < DefaultMaxRetries; i++ {
		l.handleErr(ctx, boom, "k")
	}
	if n := l.queue.NumRequeues("k"); n != DefaultMaxRetries || len(dropped) != 0 {
		t.Fatalf("after %d failures: NumRequeues = %d, dropped %d times; want %d and none", DefaultMaxRetries, n, len(dropped), DefaultMaxRetries)
	}
	l.handleErr(ctx, boom, "k")
	if n := l.queue.NumRequeues("k"); n != 0 {
		t.Errorf("NumRequeues after drop = %d, want 0 (forgotten)", n)
	}
	if len(dropped) != 1 || !errors.Is(dropped[0], boom) {
		t.Errorf("OnDrop calls = %v, want one with the sync error", dropped)
	}
}

func TestHandleErrRequeueAfterIsNotAFailure(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	l, clk := newTestLoop(t, noSync)
	// An earlier failure, retried: the key is being processed again.
	l.queue.AddRateLimited("k")
	step(t, clk, 5*time.Millisecond)
	waitLen(t, l, 1)
	key, _ := l.queue.Get()

	l.handleErr(ctx, fmt.Errorf("finalize: %w", RequeueAfter(2*time.Second)), key)
	l.queue.Done(key)
	if n := l.queue.NumRequeues("k"); n != 0 {
		t.Errorf("NumRequeues = %d, want 0: waiting on a deadline is not a failure", n)
	}
	step(t, clk, time.Second)
	if l.Len() != 0 {
		t.Fatal("re-queued before the RequeueAfter delay")
	}
	step(t, clk, time.Second)
	waitLen(t, l, 1)
}

func TestHandleErrConflictRequeuesWithBackoff(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	l, clk := newTestLoop(t, noSync, func(context.Context, string, error) { t.Error("conflict dropped the key") })
	conflict := apierrors.NewConflict(schema.GroupResource{Group: "elasti.truefoundry.com", Resource: "elastiservices"}, "web", errors.New("stale"))

	l.handleErr(ctx, fmt.Errorf("update status: %w", conflict), "k")
	if n := l.queue.NumRequeues("k"); n != 1 {
		t.Errorf("NumRequeues = %d, want 1", n)
	}
	step(t, clk, 5*time.Millisecond)
	waitLen(t, l, 1)
}

func TestProcessNextWorkItem(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	var got []string
	l, _ := newTestLoop(t, func(_ context.Context, key string) error {
		got = append(got, key)
		return errors.New("boom")
	})
	l.Add("k")
	if !l.processNextWorkItem(ctx) {
		t.Fatal("processNextWorkItem returned false with a key queued")
	}
	if len(got) != 1 || got[0] != "k" {
		t.Errorf("synced %v, want [k]", got)
	}
	if n := l.queue.NumRequeues("k"); n != 1 {
		t.Errorf("NumRequeues = %d, want the failure counted", n)
	}
	l.ShutDown()
	if l.processNextWorkItem(ctx) {
		t.Error("processNextWorkItem returned true after shutdown")
	}
}

// Run returns only after the in-flight sync has finished.
func TestRunWaitsForInFlightSync(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	started, release := make(chan struct{}), make(chan struct{})
	l, _ := newTestLoop(t, func(context.Context, string) error {
		close(started)
		<-release
		return nil
	})
	done := make(chan struct{})
	go func() {
		l.Run(ctx, 2)
		close(done)
	}()
	l.Add("k")
	<-started
	cancel()
	select {
	case <-done:
		t.Fatal("Run returned while a sync was in flight")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after the sync finished")
	}
}
