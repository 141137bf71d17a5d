package admission

import (
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
)

// WakeLimiter is a token bucket per source address that bounds how many
// wakes one client may start, so a single client cannot wake the whole
// fleet over and over. Admission spends a token only for a request that
// starts a wake (see Admission.Admit).
//
// Memory is bounded: a bucket unused for long enough to have refilled is
// the same as no bucket and is dropped, and at most max sources are
// tracked. Past that the least recently seen source is forgotten early,
// which lets it start afresh; a client that rotates addresses faster than
// that defeats any per-address limit anyway.
//
// Admission calls it under its lock, which also guards the clock the
// cache reads (at); the cache locks itself.
type WakeLimiter struct {
	limit rate.Limit
	burst int
	// idle is how long an unused bucket takes to refill completely.
	idle time.Duration
	// buckets holds each source's *rate.Limiter by netip.Addr, least
	// recently used dropped first past the cap, each kept until idle
	// after its last use.
	buckets *utilcache.LRUExpireCache
	// at is the cache's clock: the time of the latest Take, so one time
	// decides both a bucket's tokens and whether it has expired.
	at *takeClock
}

// takeClock tells the time the wake limiter was last given by its
// caller. It has a lock of its own: a scrape reads it (Sources) outside
// the Admission's lock.
type takeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *takeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *takeClock) set(now time.Time) {
	c.mu.Lock()
	c.now = now
	c.mu.Unlock()
}

// NewWakeLimiter returns a limiter of perSecond wakes with bursts of
// burst per source, tracking at most maxSources sources; nil when
// perSecond or burst is 0, which turns the limit off.
func NewWakeLimiter(perSecond float64, burst, maxSources int) *WakeLimiter {
	if perSecond <= 0 || burst <= 0 {
		return nil
	}
	at := &takeClock{}
	return &WakeLimiter{
		limit: rate.Limit(perSecond), burst: burst,
		idle:    time.Duration(float64(burst) / perSecond * float64(time.Second)),
		buckets: utilcache.NewLRUExpireCacheWithClock(max(maxSources, 1), at),
		at:      at,
	}
}

// Take spends one wake from source's bucket at now. When the bucket is
// empty it spends nothing and returns how long until a wake is available.
func (l *WakeLimiter) Take(source netip.Addr, now time.Time) (wait time.Duration, ok bool) {
	l.at.set(now)
	lim := l.bucket(source)
	if lim.AllowN(now, 1) {
		return 0, true
	}
	missing := 1 - lim.TokensAt(now)
	return time.Duration(missing / float64(l.limit) * float64(time.Second)), false
}

// bucket returns source's bucket, kept for idle from now. A bucket unused
// for idle has refilled, the same as a new one, so the cache lets it
// expire then: it keeps an entry up to and including its expiry, hence
// one nanosecond less.
func (l *WakeLimiter) bucket(source netip.Addr) *rate.Limiter {
	v, found := l.buckets.Get(source)
	lim, _ := v.(*rate.Limiter)
	if !found {
		lim = rate.NewLimiter(l.limit, l.burst)
	}
	l.buckets.Add(source, lim, l.idle-time.Nanosecond)
	return lim
}

// Sources returns the number of sources whose bucket had not expired at
// the latest Take; 0 when l is nil (no limit). It walks the cache, so it
// is read when the metric is scraped, not on every Take.
func (l *WakeLimiter) Sources() int {
	if l == nil {
		return 0
	}
	return len(l.buckets.Keys())
}

// SourceOf returns the address of a connection's remote end, written
// host:port, with IPv4-mapped IPv6 addresses as IPv4. An address that
// does not parse is the zero Addr: such clients share one bucket.
func SourceOf(remote string) netip.Addr {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}
