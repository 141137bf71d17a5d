// Package workloop drains a rate-limited typed workqueue with a pool of
// workers. The controller's queues and the local cluster's process node and
// kubelet share it, so retry, backoff and shutdown behave the same for each
// queue.
package workloop

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// DefaultMaxRetries bounds how often a failing key is retried before it is
// dropped. With the default controller rate limiter the per-key delays are
// 5ms, 10ms, 20ms, ... doubling to about 82s at the 15th retry: roughly
// 2.7 minutes of retrying in all. A dropped key comes back on the next
// informer event or resync, so nothing is lost for good.
const DefaultMaxRetries = 15

// SyncFunc reconciles one key. A nil error forgets the key's failures.
type SyncFunc[T comparable] func(ctx context.Context, key T) error

// Loop owns a queue and the workers that drain it.
type Loop[T comparable] struct {
	name       string
	tenantOf   func(T) string
	queue      workqueue.TypedRateLimitingInterface[T]
	lanes      *lanes[T]
	sync       SyncFunc[T]
	maxRetries int
	onDrop     []DropFunc[T]
}

// DropFunc is told of a key that exhausted its retries (Sentry reporting).
type DropFunc[T comparable] func(ctx context.Context, key T, err error)

// New makes a loop with a named queue; name labels the queue's metrics.
// Each of onDrop is told of every key the loop gives up on. Its keys wait
// in arrival order (urgent ones first).
func New[T comparable](name string, sync SyncFunc[T], metrics workqueue.MetricsProvider, onDrop ...DropFunc[T]) *Loop[T] {
	return NewFair(name, func(T) string { return "" }, sync, metrics, onDrop...)
}

// NewFair is New with keys that belong to tenants (tenantOf): the tenants
// with keys waiting take turns, so one tenant's burst delays another's
// keys by a turn each, not by the whole burst.
func NewFair[T comparable](name string, tenantOf func(T) string, sync SyncFunc[T], metrics workqueue.MetricsProvider, onDrop ...DropFunc[T]) *Loop[T] {
	l := &Loop[T]{name: name, tenantOf: tenantOf, sync: sync, maxRetries: DefaultMaxRetries, onDrop: onDrop}
	l.newQueue(metrics, clock.RealClock{})
	return l
}

// newQueue gives the loop a rate-limited queue over fresh lanes.
func (l *Loop[T]) newQueue(metrics workqueue.MetricsProvider, clk clock.WithTicker) {
	l.lanes = newLanes(l.tenantOf)
	l.queue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[T](),
		workqueue.TypedRateLimitingQueueConfig[T]{
			Name: l.name, MetricsProvider: metrics, Clock: clk,
			DelayingQueue: workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[T]{
				Name: l.name, MetricsProvider: metrics, Clock: clk,
				Queue: workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[T]{
					Name: l.name, MetricsProvider: metrics, Clock: clk, Queue: l.lanes,
				}),
			}),
		})
}

// Name is the queue's name.
func (l *Loop[T]) Name() string { return l.name }

// Add queues key for the workers.
func (l *Loop[T]) Add(key T) { l.queue.Add(key) }

// AddUrgent queues key in the urgent lane, or moves it there if it already
// waits: for a sync that keeps traffic from being dropped, which must not
// wait behind status updates, its own tenant's or another's. Urgent keys go
// first, up to urgentPerPlain for each plain key while both wait; the
// tenants take turns in each lane, and a tenant's keys added urgently are
// synced in the order they were added (see lanes).
func (l *Loop[T]) AddUrgent(key T) {
	l.lanes.mark(key)
	l.queue.Add(key)
}

// AddAfter queues key once d has passed; used to batch bursts and to revisit
// a key on a deadline.
func (l *Loop[T]) AddAfter(key T, d time.Duration) { l.queue.AddAfter(key, d) }

// Len is the number of keys waiting.
func (l *Loop[T]) Len() int { return l.queue.Len() }

// SyncTimeout bounds one sync. Syncs run on a context that shutdown does
// not cancel, so a sync in flight when the loop stops finishes its writes
// instead of failing halfway; this keeps a stuck one from holding shutdown.
const SyncTimeout = 30 * time.Second

// Run starts workers and blocks until ctx ends and every in-flight sync has
// returned. Once ctx ends, workers take no new keys; those still queued are
// left for the next leader, which re-lists everything anyway.
func (l *Loop[T]) Run(ctx context.Context, workers int) {
	logger := klog.FromContext(ctx).WithValues("queue", l.name)
	syncCtx := klog.NewContext(context.WithoutCancel(ctx), logger)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for l.processNextWorkItem(syncCtx) {
			}
		})
	}
	logger.V(2).Info("Workers started", "count", workers)
	<-ctx.Done()
	l.queue.ShutDown()
	wg.Wait()
	logger.V(2).Info("Workers stopped")
}

// ShutDown stops the queue without waiting for Run (tests and early exits).
func (l *Loop[T]) ShutDown() { l.queue.ShutDown() }

func (l *Loop[T]) processNextWorkItem(ctx context.Context) bool {
	key, quit := l.queue.Get()
	if quit {
		return false
	}
	defer l.queue.Done(key)
	syncCtx, cancel := context.WithTimeout(ctx, SyncTimeout)
	defer cancel()
	err := l.sync(syncCtx, key)
	l.handleErr(ctx, err, key)
	return true
}

// RequeueAfter asks the loop to revisit a key after a delay without treating
// it as a failure, e.g. while waiting on a deadline.
type RequeueAfter time.Duration

func (r RequeueAfter) Error() string { return fmt.Sprintf("requeue after %s", time.Duration(r)) }

func (l *Loop[T]) handleErr(ctx context.Context, err error, key T) {
	logger := klog.FromContext(ctx)
	if err == nil {
		l.queue.Forget(key)
		return
	}
	var after RequeueAfter
	if errors.As(err, &after) {
		l.queue.Forget(key)
		l.queue.AddAfter(key, time.Duration(after))
		return
	}
	if n := l.queue.NumRequeues(key); n < l.maxRetries {
		// An optimistic-lock conflict, or a create of an object that
		// exists, means our cache was stale and the fresh object is on
		// its way: retry, but quietly.
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			logger.V(4).Info("Conflict, retrying with fresh state", "key", key)
		} else {
			logger.V(2).Info("Sync failed, will retry", "key", key, "retries", n, "err", err)
		}
		l.queue.AddRateLimited(key)
		return
	}
	l.queue.Forget(key)
	utilruntime.HandleErrorWithContext(ctx, err, "Dropping key after too many retries", "key", key, "queue", l.name)
	for _, drop := range l.onDrop {
		drop(ctx, key, err)
	}
}
