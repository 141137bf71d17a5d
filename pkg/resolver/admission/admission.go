package admission

import (
	"cmp"
	"net/netip"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
)

// Admission bounds how many requests and
// connections wait for a Service at once, per Service, per namespace, per
// client address and in all, and the header bytes they keep in memory, so
// one sleeping Service, one namespace or one client cannot take every slot
// and a flood cannot exhaust memory; and, per client address, how many
// wakes a client may start. It also keeps the budget every request in
// flight is charged to, held or not (Charge). It only counts; waiting is
// the hold's.
type Admission struct {
	maxPer, maxGlobal, maxSource int
	maxBytes                     int64
	// maxNSHeld, maxNSBytes and maxNSRequests are one namespace's shares
	// of maxGlobal, maxBytes and maxRequests (the resolver's Config.NamespaceShare).
	maxNSHeld                 int
	maxNSBytes, maxNSRequests int64
	maxRequests               int64
	// wakes limits the wakes each source starts; nil means no limit.
	wakes *WakeLimiter
	// now is the wake limit's clock.
	now func() time.Time
	// queued follows the number of slots taken.
	queued prometheus.Gauge

	mu    sync.Mutex
	total int
	bytes int64
	// requests is the bytes charged for every request in flight.
	requests int64
	per      map[clusterview.ServiceRef]int
	// sources counts the slots each client address holds. An entry is
	// removed when its count reaches zero, so the map never has more
	// entries than slots are taken (at most maxGlobal).
	sources map[netip.Addr]int
	// namespaces is what each namespace takes of the pools. An entry is
	// removed when it takes nothing, so the map never has more entries
	// than requests are in flight.
	namespaces map[string]*namespaceUse
}

// namespaceUse is what one namespace takes of the pools.
type namespaceUse struct {
	held            int
	bytes, requests int64
}

// Refusal says why Admit or Charge took nothing: a full queue (scope
// ScopeService, ScopeGlobal or ScopeClient), a full header byte budget
// (ScopeBytes), a namespace at its share (ScopeNamespace), a full request
// budget (ScopeRequests), or a source out of wakes (ScopeSource, which may
// try again after RetryAfter). The zero Refusal admits.
type Refusal struct {
	Scope      string
	RetryAfter time.Duration
}

// The scopes of a Refusal, the values of the refusal metrics' scope label.
const (
	ScopeService = "service"
	ScopeGlobal  = "global"
	// ScopeSource is a client out of wakes (see Config.SourceWakeRate).
	ScopeSource = "source"
	// ScopeClient is a client holding its share of the queues (see
	// Config.PerSourceQueue), ScopeBytes the held-bytes budget full (see
	// Config.MaxHeldBytes).
	ScopeClient = "client"
	ScopeBytes  = "bytes"
	// ScopeNamespace is the namespace of the Service asked for holding its
	// share of a pool (see Config.NamespaceShare); ScopeRequests the
	// budget of every request in flight full (see Config.MaxRequestBytes).
	ScopeNamespace = "namespace"
	ScopeRequests  = "requests"
)

// The defaults of the wake limit per client address (the resolver's
// --source-wake-rate, --source-wake-burst and the sources it tracks). A
// client behind an ingress controller shares the controller pod's address
// with every other client of the ingress, so the defaults let one address
// wake a hundred Services at once and ten a second after that: far more
// than one client's page needs, far less than a fleet.
const (
	DefaultSourceWakeRate    = 10
	DefaultSourceWakeBurst   = 100
	DefaultSourceWakeTracked = 10000
)

// Limits are the bounds an Admission enforces; see the resolver's Config
// fields PerServiceQueue, GlobalQueue, PerSourceQueue, MaxHeldBytes,
// MaxRequestBytes and NamespaceShare.
type Limits struct {
	PerService, Global, PerSource int
	HeldBytes, RequestBytes       int64
	// NamespaceShare is the percentage of Global, HeldBytes and
	// RequestBytes one namespace may take.
	NamespaceShare int
}

// New returns an Admission within lim. wakes limits the wakes each client
// address starts (nil: no limit), on the time clk tells; queued follows
// the slots taken.
func New(lim Limits, wakes *WakeLimiter, clk clock.PassiveClock, queued prometheus.Gauge) *Admission {
	share := func(n int64) int64 { return n * int64(lim.NamespaceShare) / 100 }
	return &Admission{maxPer: lim.PerService, maxGlobal: lim.Global, maxSource: lim.PerSource, maxBytes: lim.HeldBytes,
		maxRequests: lim.RequestBytes, maxNSHeld: int(share(int64(lim.Global))), maxNSBytes: share(lim.HeldBytes),
		maxNSRequests: share(lim.RequestBytes),
		wakes:         wakes, now: clk.Now, queued: queued, per: map[clusterview.ServiceRef]int{}, sources: map[netip.Addr]int{},
		namespaces: map[string]*namespaceUse{}}
}

// namespaceLocked returns ns's entry, made if it has none; a.mu is held.
func (a *Admission) namespaceLocked(ns string) *namespaceUse {
	u := a.namespaces[ns]
	if u == nil {
		u = &namespaceUse{}
		a.namespaces[ns] = u
	}
	return u
}

// forgetLocked drops ns's entry once it takes nothing; a.mu is held.
func (a *Admission) forgetLocked(ns string, u *namespaceUse) {
	if u.held <= 0 && u.bytes <= 0 && u.requests <= 0 {
		delete(a.namespaces, ns)
	}
}

// Charge takes size bytes of the request budget (Config.MaxRequestBytes)
// for a request in flight for a Service of namespace ns, held or not,
// within ns's share of it. When it refuses (ScopeRequests or
// ScopeNamespace) it takes nothing; otherwise release gives the bytes back
// and may be called more than once.
func (a *Admission) Charge(ns string, size int64) (release func(), refused Refusal) {
	return a.chargeIf(ns, size, false)
}

// ChargeAnyway is Charge without the bounds: for a held request as it is
// forwarded, which waited its turn within the held queue and is not
// refused when its Service wakes. Those together exceed the budget by at
// most GlobalQueue times what each is charged, and meanwhile every other
// request sees the budget as full.
func (a *Admission) ChargeAnyway(ns string, size int64) (release func()) {
	release, _ = a.chargeIf(ns, size, true)
	return release
}

func (a *Admission) chargeIf(ns string, size int64, anyway bool) (release func(), refused Refusal) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var use namespaceUse
	if u := a.namespaces[ns]; u != nil {
		use = *u
	}
	switch {
	case anyway:
	case a.requests+size > a.maxRequests:
		return nil, Refusal{Scope: ScopeRequests}
	case use.requests+size > a.maxNSRequests:
		return nil, Refusal{Scope: ScopeNamespace}
	}
	u := a.namespaceLocked(ns)
	u.requests += size
	a.requests += size
	return sync.OnceFunc(func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.requests -= size
		u := a.namespaces[ns]
		u.requests -= size
		a.forgetLocked(ns, u)
	}), Refusal{}
}

// Admit takes a slot for svc, within maxHeld held at once for svc (its
// spec.hold.maxRequests; 0 takes Limits.PerService), on behalf of the
// client at source, and size bytes of the held-bytes budget for what the
// hold keeps in memory (the resolver counts it: heldRequestBytes,
// heldConnBytes). The other bounds hold whatever maxHeld says: a Service
// cannot hold past the global queue or its namespace's share of it. When
// it refuses it takes nothing;
// otherwise release gives both back and may be called more than once.
//
// The first slot of a Service with none taken starts a wake: the hold
// asks the operator at once (the resolver's holder.join). Only that slot costs
// source a wake. Requests that join a wake under way cost no wake, but
// they do take one of source's slots: the per-source bound is what keeps
// one client from filling a Service's queue, or every queue, by itself.
func (a *Admission) Admit(svc clusterview.ServiceRef, maxHeld int, source netip.Addr, size int64) (release func(), refused Refusal) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.total >= a.maxGlobal:
		return nil, Refusal{Scope: ScopeGlobal}
	case a.per[svc] >= cmp.Or(maxHeld, a.maxPer):
		return nil, Refusal{Scope: ScopeService}
	case a.sources[source] >= a.maxSource:
		return nil, Refusal{Scope: ScopeClient}
	case a.bytes+size > a.maxBytes:
		return nil, Refusal{Scope: ScopeBytes}
	}
	var use namespaceUse
	if u := a.namespaces[svc.Namespace]; u != nil {
		use = *u
	}
	if use.held >= a.maxNSHeld || use.bytes+size > a.maxNSBytes {
		return nil, Refusal{Scope: ScopeNamespace}
	}
	// Decided under the lock that counts the slots, so of two clients that
	// arrive together for a cold Service exactly one pays for its wake.
	if a.per[svc] == 0 && a.wakes != nil {
		if wait, ok := a.wakes.Take(source, a.now()); !ok {
			return nil, Refusal{Scope: ScopeSource, RetryAfter: wait}
		}
	}
	a.per[svc]++
	a.sources[source]++
	u := a.namespaceLocked(svc.Namespace)
	u.held++
	u.bytes += size
	a.total++
	a.bytes += size
	a.queued.Inc()
	return sync.OnceFunc(func() { a.release(svc, source, size) }), Refusal{}
}

func (a *Admission) release(svc clusterview.ServiceRef, source netip.Addr, size int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.per[svc]--; a.per[svc] <= 0 {
		delete(a.per, svc)
	}
	if a.sources[source]--; a.sources[source] <= 0 {
		delete(a.sources, source)
	}
	u := a.namespaces[svc.Namespace]
	u.held--
	u.bytes -= size
	a.forgetLocked(svc.Namespace, u)
	a.total--
	a.bytes -= size
	a.queued.Dec()
}

// Admitted returns the slots svc holds.
func (a *Admission) Admitted(svc clusterview.ServiceRef) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.per[svc]
}

// Usage returns the slots taken, the client addresses holding them and
// the bytes charged.
func (a *Admission) Usage() (slots, sources int, bytes int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.total, len(a.sources), a.bytes
}

// RequestUsage returns the bytes charged to the request budget and the
// namespaces charged.
func (a *Admission) RequestUsage() (bytes int64, namespaces int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.requests, len(a.namespaces)
}
