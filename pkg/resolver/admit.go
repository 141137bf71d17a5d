package resolver

import (
	"net/netip"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// admission is the admit layer: it bounds how many requests and
// connections wait for a Service at once, per Service and in all, so one
// sleeping Service cannot take every slot and a flood cannot exhaust
// memory; and, per client address, how many wakes a client may start. It
// only counts; waiting is the hold layer's.
type admission struct {
	maxPer, maxGlobal int
	// wakes limits the wakes each source starts; nil means no limit.
	wakes *wakeLimiter
	now   func() time.Time
	// queued follows the number of slots taken.
	queued prometheus.Gauge

	mu    sync.Mutex
	total int
	per   map[ServiceRef]int
}

// refusal says why admit took nothing: a full queue (scope ScopeService
// or ScopeGlobal), or a source out of wakes (ScopeSource, which may try
// again after retryAfter). The zero refusal admits.
type refusal struct {
	scope      string
	retryAfter time.Duration
}

func newAdmission(maxPer, maxGlobal int, wakes *wakeLimiter, queued prometheus.Gauge) *admission {
	return &admission{maxPer: maxPer, maxGlobal: maxGlobal, wakes: wakes, now: time.Now, queued: queued, per: map[ServiceRef]int{}}
}

// admit takes a slot for svc on behalf of the client at source. When it
// refuses it takes nothing; otherwise release gives the slot back and may
// be called more than once.
//
// The first slot of a Service with none taken starts a wake: the hold
// layer tells the operator at once (see holder.join). Only that slot costs
// source a wake. Requests that join a wake under way cost nothing, and
// requests for a Service that is up never get here.
func (a *admission) admit(svc ServiceRef, source netip.Addr) (release func(), refused refusal) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.total >= a.maxGlobal {
		return nil, refusal{scope: ScopeGlobal}
	}
	if a.per[svc] >= a.maxPer {
		return nil, refusal{scope: ScopeService}
	}
	// Decided under the lock that counts the slots, so of two clients that
	// arrive together for a cold Service exactly one pays for its wake.
	if a.per[svc] == 0 && a.wakes != nil {
		if wait, ok := a.wakes.take(source, a.now()); !ok {
			return nil, refusal{scope: ScopeSource, retryAfter: wait}
		}
	}
	a.per[svc]++
	a.total++
	a.queued.Inc()
	var once sync.Once
	return func() { once.Do(func() { a.release(svc) }) }, refusal{}
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
