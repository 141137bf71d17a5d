package resolver

import "sync"

// holdQueue counts held requests per service and overall, and records
// whether an operator-notification loop runs for a service. The requests
// themselves wait in their own goroutines (on the EndpointSource's Changed
// channel); the queue only enforces the bounds and coalesces notifications.
type holdQueue struct {
	maxPer, maxGlobal int

	mu    sync.Mutex
	total int
	svcs  map[ServiceRef]*svcHold
}

type svcHold struct {
	held      int
	notifying bool
	// kick wakes a notification loop that is waiting between POSTs when a
	// request is held again after every earlier one was released: the
	// target went back to zero, and the operator must hear of it now, not
	// when the loop's wait ends.
	kick chan struct{}
}

func newHoldQueue(maxPer, maxGlobal int) *holdQueue {
	return &holdQueue{maxPer: maxPer, maxGlobal: maxGlobal, svcs: map[ServiceRef]*svcHold{}}
}

// acquire takes a slot for svc. On overflow it returns the full scope
// (ScopeService or ScopeGlobal) and takes nothing. startNotifier is true
// when no notification loop runs for svc: the caller must start one.
func (q *holdQueue) acquire(svc ServiceRef) (overflow string, startNotifier bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.total >= q.maxGlobal {
		return ScopeGlobal, false
	}
	s := q.svcs[svc]
	if s == nil {
		s = &svcHold{kick: make(chan struct{}, 1)}
		q.svcs[svc] = s
	}
	if s.held >= q.maxPer {
		return ScopeService, false
	}
	if s.held == 0 && s.notifying {
		select {
		case s.kick <- struct{}{}:
		default: // a kick is already pending
		}
	}
	s.held++
	q.total++
	if !s.notifying {
		s.notifying = true
		startNotifier = true
	}
	return "", startNotifier
}

// release gives back a slot taken by acquire.
func (q *holdQueue) release(svc ServiceRef) {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.svcs[svc]
	if s == nil || s.held == 0 {
		return
	}
	s.held--
	q.total--
	if s.held == 0 && !s.notifying {
		delete(q.svcs, svc)
	}
}

// ensureNotifier reports whether the caller must start a notification loop
// for svc: a request is held and none runs.
func (q *holdQueue) ensureNotifier(svc ServiceRef) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.svcs[svc]
	if s == nil || s.held == 0 || s.notifying {
		return false
	}
	s.notifying = true
	return true
}

// continueNotifying is asked by the notification loop before each POST. It
// stops the loop, atomically with acquire, when no request is held or svc
// has a Ready endpoint; ready is called under the lock.
func (q *holdQueue) continueNotifying(svc ServiceRef, ready func() bool) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.svcs[svc]
	if s == nil {
		return false
	}
	if s.held > 0 && !ready() {
		return true
	}
	s.notifying = false
	if s.held == 0 {
		delete(q.svcs, svc)
	}
	return false
}

// stopNotifying marks svc's loop as gone without conditions (shutdown).
func (q *holdQueue) stopNotifying(svc ServiceRef) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if s := q.svcs[svc]; s != nil {
		s.notifying = false
		if s.held == 0 {
			delete(q.svcs, svc)
		}
	}
}

// kicks is the channel that wakes svc's notification loop early; nil
// (which never fires) when svc has no entry.
func (q *holdQueue) kicks(svc ServiceRef) <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	if s := q.svcs[svc]; s != nil {
		return s.kick
	}
	return nil
}

// held returns the number of requests held for svc.
func (q *holdQueue) held(svc ServiceRef) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	if s := q.svcs[svc]; s != nil {
		return s.held
	}
	return 0
}
