package resolver

import (
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
)

// admission is the admit layer: it bounds how many requests and
// connections wait for a Service at once, per Service, per namespace, per
// client address and in all, and the header bytes they keep in memory, so
// one sleeping Service, one namespace or one client cannot take every slot
// and a flood cannot exhaust memory; and, per client address, how many
// wakes a client may start. It also keeps the budget every request in
// flight is charged to, held or not (charge). It only counts; waiting is
// the hold layer's.
type admission struct {
	maxPer, maxGlobal, maxSource int
	maxBytes                     int64
	// maxNSHeld, maxNSBytes and maxNSRequests are one namespace's shares
	// of maxGlobal, maxBytes and maxRequests (Config.NamespaceShare).
	maxNSHeld                 int
	maxNSBytes, maxNSRequests int64
	maxRequests               int64
	// wakes limits the wakes each source starts; nil means no limit.
	wakes *wakeLimiter
	now   func() time.Time
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

// refusal says why admit or charge took nothing: a full queue (scope
// ScopeService, ScopeGlobal or ScopeClient), a full header byte budget
// (ScopeBytes), a namespace at its share (ScopeNamespace), a full request
// budget (ScopeRequests), or a source out of wakes (ScopeSource, which may
// try again after retryAfter). The zero refusal admits.
type refusal struct {
	scope      string
	retryAfter time.Duration
}

// admissionLimits are the bounds admission enforces; see the Config fields
// of the same names.
type admissionLimits struct {
	perService, global, perSource int
	heldBytes, requestBytes       int64
	// namespaceShare is the percentage of global, heldBytes and
	// requestBytes one namespace may take.
	namespaceShare int
}

func admissionLimitsOf(cfg Config) admissionLimits {
	return admissionLimits{perService: cfg.PerServiceQueue, global: cfg.GlobalQueue, perSource: cfg.PerSourceQueue,
		heldBytes: cfg.MaxHeldBytes, requestBytes: cfg.MaxRequestBytes, namespaceShare: cfg.NamespaceShare}
}

func newAdmission(lim admissionLimits, wakes *wakeLimiter, queued prometheus.Gauge) *admission {
	share := func(n int64) int64 { return n * int64(lim.namespaceShare) / 100 }
	return &admission{maxPer: lim.perService, maxGlobal: lim.global, maxSource: lim.perSource, maxBytes: lim.heldBytes,
		maxRequests: lim.requestBytes, maxNSHeld: int(share(int64(lim.global))), maxNSBytes: share(lim.heldBytes),
		maxNSRequests: share(lim.requestBytes),
		wakes:         wakes, now: time.Now, queued: queued, per: map[clusterview.ServiceRef]int{}, sources: map[netip.Addr]int{},
		namespaces: map[string]*namespaceUse{}}
}

// namespaceLocked returns ns's entry, made if it has none; a.mu is held.
func (a *admission) namespaceLocked(ns string) *namespaceUse {
	u := a.namespaces[ns]
	if u == nil {
		u = &namespaceUse{}
		a.namespaces[ns] = u
	}
	return u
}

// forgetLocked drops ns's entry once it takes nothing; a.mu is held.
func (a *admission) forgetLocked(ns string, u *namespaceUse) {
	if u.held <= 0 && u.bytes <= 0 && u.requests <= 0 {
		delete(a.namespaces, ns)
	}
}

// charge takes size bytes of the request budget (Config.MaxRequestBytes)
// for a request in flight for a Service of namespace ns, held or not,
// within ns's share of it. When it refuses (ScopeRequests or
// ScopeNamespace) it takes nothing; otherwise release gives the bytes back
// and may be called more than once.
func (a *admission) charge(ns string, size int64) (release func(), refused refusal) {
	return a.chargeIf(ns, size, false)
}

// chargeAnyway is charge without the bounds: for a held request as it is
// forwarded, which waited its turn within the held queue and is not
// refused when its Service wakes. Those together exceed the budget by at
// most GlobalQueue × forwardOverheadBytes, and meanwhile every other
// request sees the budget as full.
func (a *admission) chargeAnyway(ns string, size int64) (release func()) {
	release, _ = a.chargeIf(ns, size, true)
	return release
}

func (a *admission) chargeIf(ns string, size int64, anyway bool) (release func(), refused refusal) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var use namespaceUse
	if u := a.namespaces[ns]; u != nil {
		use = *u
	}
	switch {
	case anyway:
	case a.requests+size > a.maxRequests:
		return nil, refusal{scope: ScopeRequests}
	case use.requests+size > a.maxNSRequests:
		return nil, refusal{scope: ScopeNamespace}
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
	}), refusal{}
}

// admit takes a slot for svc on behalf of the client at source, and size
// bytes of the held-bytes budget for what the hold keeps in memory (see
// heldRequestBytes and heldConnBytes). When it refuses it takes nothing;
// otherwise release gives both back and may be called more than once.
//
// The first slot of a Service with none taken starts a wake: the hold
// layer asks the operator at once (see holder.join). Only that slot costs
// source a wake. Requests that join a wake under way cost no wake, but
// they do take one of source's slots: the per-source bound is what keeps
// one client from filling a Service's queue, or every queue, by itself.
func (a *admission) admit(svc clusterview.ServiceRef, source netip.Addr, size int64) (release func(), refused refusal) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.total >= a.maxGlobal:
		return nil, refusal{scope: ScopeGlobal}
	case a.per[svc] >= a.maxPer:
		return nil, refusal{scope: ScopeService}
	case a.sources[source] >= a.maxSource:
		return nil, refusal{scope: ScopeClient}
	case a.bytes+size > a.maxBytes:
		return nil, refusal{scope: ScopeBytes}
	}
	var use namespaceUse
	if u := a.namespaces[svc.Namespace]; u != nil {
		use = *u
	}
	if use.held >= a.maxNSHeld || use.bytes+size > a.maxNSBytes {
		return nil, refusal{scope: ScopeNamespace}
	}
	// Decided under the lock that counts the slots, so of two clients that
	// arrive together for a cold Service exactly one pays for its wake.
	if a.per[svc] == 0 && a.wakes != nil {
		if wait, ok := a.wakes.take(source, a.now()); !ok {
			return nil, refusal{scope: ScopeSource, retryAfter: wait}
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
	return sync.OnceFunc(func() { a.release(svc, source, size) }), refusal{}
}

func (a *admission) release(svc clusterview.ServiceRef, source netip.Addr, size int64) {
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

// admitted returns the slots svc holds.
func (a *admission) admitted(svc clusterview.ServiceRef) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.per[svc]
}

// usage returns the slots taken, the client addresses holding them and
// the bytes charged.
func (a *admission) usage() (slots, sources int, bytes int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.total, len(a.sources), a.bytes
}

// requestUsage returns the bytes charged to the request budget and the
// namespaces charged.
func (a *admission) requestUsage() (bytes int64, namespaces int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.requests, len(a.namespaces)
}

// requestOverheadBytes is what every request in flight is charged besides
// its headers (requestBytes): the handler's goroutine stack, the parsed
// request, the response writer's buffer and, for HTTP/2, the stream's
// state. BenchmarkFilledBounds measures the true figure, with
// forwardOverheadBytes (KiB/stalled-stream in docs/benchmarks.md).
const requestOverheadBytes = 16 << 10

// forwardOverheadBytes is what a request is charged besides requestBytes
// while it is forwarded: the connection to the pod, its buffers and its
// two goroutines, and the deeper stack of the handler. A request held is
// not charged it until it is forwarded.
const forwardOverheadBytes = 20 << 10

// requestBytes is what an HTTP request in flight, held or not, is charged
// against Config.MaxRequestBytes while it is served: what heldRequestBytes
// counts, as if its body streamed, plus requestOverheadBytes. A body
// read into memory is charged on its own when it is (holdRequest).
func requestBytes(req *http.Request) int64 {
	return requestOverheadBytes + heldRequestBytes(req, false)
}

// heldRequestBytes is what a held HTTP request is charged against
// Config.MaxHeldBytes: its header names and values, its request
// target and its Host, the parts of a request the server keeps in memory
// while it is held whatever their size; and, for an HTTP/2 request whose
// body streams (buffered is false; see body.go), the stream's receive
// window, which the server fills with body it keeps in memory until the
// pod is Ready. The parsed form takes some more memory than the bytes
// counted; the worst case in config.go allows for that.
func heldRequestBytes(req *http.Request, buffered bool) int64 {
	n := int64(len(req.RequestURI) + len(req.Host))
	if req.RequestURI == "" && req.URL != nil {
		n += int64(len(req.URL.Path) + len(req.URL.RawQuery))
	}
	for k, vs := range req.Header {
		for _, v := range vs {
			n += int64(len(k) + len(v))
		}
	}
	if req.ProtoMajor == 2 && !buffered && req.Body != nil && req.Body != http.NoBody && req.ContentLength != 0 {
		n += serverMaxReceiveBufferPerStream
	}
	return n
}

// heldConnBytes is what a held TCP connection is charged: its read-ahead
// buffer, which holds its first bytes and which watchClientClose may fill
// while it waits.
func heldConnBytes(c *peekedConn) int64 { return int64(c.r.Size()) }
