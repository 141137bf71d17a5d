package resolver

import (
	"container/list"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
)

// wakeLimiter is part of the admit layer: a token bucket per source
// address that bounds how many wakes one client may start, so a single
// client cannot wake the whole fleet over and over. Admission spends a
// token only for a request that starts a wake (see admission.admit).
//
// Memory is bounded: a bucket unused for long enough to have refilled is
// the same as no bucket and is dropped, and at most max sources are
// tracked. Past that the least recently seen source is forgotten early,
// which lets it start afresh; a client that rotates addresses faster than
// that defeats any per-address limit anyway.
//
// It has no lock of its own: admission calls it under its lock.
type wakeLimiter struct {
	limit rate.Limit
	burst int
	max   int
	// idle is how long an unused bucket takes to refill completely.
	idle time.Duration
	// lru holds *sourceBucket, most recently used first.
	lru     *list.List
	sources map[netip.Addr]*list.Element
	tracked prometheus.Gauge
}

type sourceBucket struct {
	addr netip.Addr
	lim  *rate.Limiter
	used time.Time
}

// newWakeLimiter returns a limiter of perSecond wakes with bursts of
// burst per source, tracking at most maxSources sources; nil when
// perSecond or burst is 0, which turns the limit off.
func newWakeLimiter(perSecond float64, burst, maxSources int, tracked prometheus.Gauge) *wakeLimiter {
	if perSecond <= 0 || burst <= 0 {
		return nil
	}
	return &wakeLimiter{
		limit: rate.Limit(perSecond), burst: burst, max: max(maxSources, 1),
		idle:    time.Duration(float64(burst) / perSecond * float64(time.Second)),
		lru:     list.New(),
		sources: map[netip.Addr]*list.Element{},
		tracked: tracked,
	}
}

// take spends one wake from source's bucket at now. When the bucket is
// empty it spends nothing and returns how long until a wake is available.
func (l *wakeLimiter) take(source netip.Addr, now time.Time) (wait time.Duration, ok bool) {
	l.forgetIdle(now)
	b := l.bucket(source, now)
	if b.lim.AllowN(now, 1) {
		return 0, true
	}
	missing := 1 - b.lim.TokensAt(now)
	return time.Duration(missing / float64(l.limit) * float64(time.Second)), false
}

// bucket returns source's bucket, marked used at now, making room for it
// if it is new.
func (l *wakeLimiter) bucket(source netip.Addr, now time.Time) *sourceBucket {
	if e, ok := l.sources[source]; ok {
		b := e.Value.(*sourceBucket)
		b.used = now
		l.lru.MoveToFront(e)
		return b
	}
	for l.lru.Len() >= l.max {
		l.remove(l.lru.Back())
	}
	b := &sourceBucket{addr: source, lim: rate.NewLimiter(l.limit, l.burst), used: now}
	l.sources[source] = l.lru.PushFront(b)
	l.tracked.Set(float64(l.lru.Len()))
	return b
}

// forgetIdle drops the buckets that have refilled since their last use.
func (l *wakeLimiter) forgetIdle(now time.Time) {
	for e := l.lru.Back(); e != nil && now.Sub(e.Value.(*sourceBucket).used) >= l.idle; e = l.lru.Back() {
		l.remove(e)
	}
}

func (l *wakeLimiter) remove(e *list.Element) {
	delete(l.sources, l.lru.Remove(e).(*sourceBucket).addr)
	l.tracked.Set(float64(l.lru.Len()))
}

// sourceOf returns the address of a connection's remote end, written
// host:port, with IPv4-mapped IPv6 addresses as IPv4. An address that
// does not parse is the zero Addr: such clients share one bucket.
func sourceOf(remote string) netip.Addr {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}
