package resolver

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// admission is the admit layer: it bounds how many requests and
// connections wait for a Service at once, per Service and in all, so one
// sleeping Service cannot take every slot and a flood cannot exhaust
// memory. It only counts; waiting is the hold layer's.
type admission struct {
	maxPer, maxGlobal int
	// queued follows the number of slots taken.
	queued prometheus.Gauge

	mu    sync.Mutex
	total int
	per   map[ServiceRef]int
}

func newAdmission(maxPer, maxGlobal int, queued prometheus.Gauge) *admission {
	return &admission{maxPer: maxPer, maxGlobal: maxGlobal, queued: queued, per: map[ServiceRef]int{}}
}

// admit takes a slot for svc. On overflow it returns the full scope
// (ScopeService or ScopeGlobal) and takes nothing; otherwise release gives
// the slot back and may be called more than once.
func (a *admission) admit(svc ServiceRef) (release func(), overflow string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.total >= a.maxGlobal {
		return nil, ScopeGlobal
	}
	if a.per[svc] >= a.maxPer {
		return nil, ScopeService
	}
	a.per[svc]++
	a.total++
	a.queued.Inc()
	var once sync.Once
	return func() { once.Do(func() { a.release(svc) }) }, ""
}

func (a *admission) release(svc ServiceRef) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.per[svc]--; a.per[svc] <= 0 {
		delete(a.per, svc)
	}
	a.total--
	a.queued.Dec()
}

// admitted returns the slots svc holds.
func (a *admission) admitted(svc ServiceRef) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.per[svc]
}
