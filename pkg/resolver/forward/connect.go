package forward

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/klog/v2"

	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
)

// DialFunc opens a connection to a pod. Tests inject one that maps pod
// addresses to loopback listeners.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// connectAttempts are the connect timeouts of the attempts dialPatiently
// makes while attempts time out, the last capped by Config.DialTimeout. A
// lost SYN is only resent by the kernel after a second; a fresh, short
// attempt gets through sooner, so a held request is not delayed a second
// for a pod that is about to accept.
var connectAttempts = []time.Duration{250 * time.Millisecond, 750 * time.Millisecond, 0}

// Connect rounds. When no endpoint of a Service accepted a connection, the
// resolver tries again after a pause, from the endpoints as they are then:
// a pod is often Ready a moment before its process listens (it has no
// readiness probe, or one that does not check the port it serves), and
// until then its connects are refused; and the endpoint list lags pods
// that are gone. The pauses start at connectBackoff and double up to
// MaxConnectBackoff. An HTTP request, and a TCP connection, tries for up
// to the connect patience (DefaultConnectPatience unless
// Config.ConnectPatience says otherwise) from its first connect, so a pod
// that never listens costs it a 502 (a TCP connection: closed, with a
// log line and
// elasti_resolver_spliced_connections_total{outcome="unreachable"}) after
// at most 15 rounds.
const (
	connectBackoff         = 50 * time.Millisecond
	MaxConnectBackoff      = time.Second
	DefaultConnectPatience = 10 * time.Second
)

// errNoEndpoint is what connect rounds end with when there was no
// endpoint to try.
var errNoEndpoint = errors.New("no ready endpoint")

// ErrEndpointsGone is what connect rounds end with when, after a round in
// which no endpoint accepted, the Service lists no Ready endpoint any
// more: its pods went away (it was put to sleep, or they were deleted)
// between the lookup that sent the request on and the connect. Nothing
// was sent, so the caller holds the request as it holds any for a
// Service with no Ready endpoint, and the hold wakes the Service. Before,
// the rounds went on trying the gone pods' addresses for the whole
// patience and ended in a 502, and nothing woke the Service: it stayed
// asleep under the client that had asked for it.
var ErrEndpointsGone = errors.New("the service has no ready endpoint any more")

// maxReportedEndpoints bounds the endpoints a connectError names.
const maxReportedEndpoints = 8

// connectError is how connect rounds give up after retrying: which
// endpoints they tried, for how many rounds and how long, and the last
// attempt's error (which it wraps). It is what a failed connect's log
// line says, so a 502 names the addresses that did not answer.
type connectError struct {
	endpoints []string
	rounds    int
	after     time.Duration
	err       error
}

func (e *connectError) Error() string {
	return fmt.Sprintf("no endpoint accepted in %d rounds over %s (tried %s): %v",
		e.rounds, e.after.Round(time.Millisecond), strings.Join(e.endpoints, ", "), e.err)
}

func (e *connectError) Unwrap() error { return e.err }

// connector is the one connect strategy of the forward layer: the HTTP
// transport (proxy.go) and the TCP splice (splice.go) both reach a pod
// through its rounds.
type connector struct {
	eps         clusterview.EndpointSource
	dial        DialFunc
	dialTimeout time.Duration
	logger      klog.Logger
	// next holds a round-robin counter (*atomic.Uint64) per Service, for
	// at most maxRoundRobin Services and roundRobinIdle after their last
	// use: Services come and go for as long as the resolver runs.
	next *utilcache.LRUExpireCache
}

// maxRoundRobin bounds the Services whose round-robin counter is kept,
// and roundRobinIdle how long one is kept unused. A counter dropped
// early only restarts its Service's rotation, which is harmless; 4,096
// counters take under 1 MiB.
const (
	maxRoundRobin  = 4096
	roundRobinIdle = 10 * time.Minute
)

func newConnector(eps clusterview.EndpointSource, dial DialFunc, dialTimeout time.Duration, logger klog.Logger) *connector {
	return &connector{eps: eps, dial: dial, dialTimeout: dialTimeout, logger: logger,
		next: utilcache.NewLRUExpireCache(maxRoundRobin)}
}

// tracked returns the number of Services with a round-robin counter.
func (c *connector) tracked() int { return len(c.next.Keys()) }

// Tracked returns the number of Services whose round-robin counter is
// kept: they come and go for as long as the resolver runs, and a request
// that reached no pod leaves none.
func (f *Forwarder) Tracked() int { return f.conn.tracked() }

// order returns at most two endpoints: the next in round-robin order, then
// its successor, the fallback when the endpoints cannot be read again.
func (c *connector) order(svc clusterview.ServiceRef, addrs []string) []string {
	n := len(addrs)
	if n <= 1 {
		return addrs
	}
	ctr, ok := c.next.Get(svc)
	if !ok {
		// Two requests that miss together may each start a counter; one
		// is kept, and the rotation stays as fair.
		ctr = new(atomic.Uint64)
	}
	// Added again on every use, so the counter lives roundRobinIdle after
	// its last one.
	c.next.Add(svc, ctr, roundRobinIdle)
	i := int(ctr.(*atomic.Uint64).Add(1) % uint64(n))
	return []string{addrs[i], addrs[(i+1)%n]}
}

// rounds calls attempt with one endpoint of port of svc after another
// until an attempt succeeds (returns a nil error) or fails for good
// (retry false), and returns that attempt's error. A round starts with
// addrs[0] (addrs in try order, see order) and, after a failed attempt,
// goes on with an endpoint not tried yet this round (see nextEndpoint).
// When none is left it pauses, then starts another round from the
// endpoints as they are then. It gives up with the last error when ctx
// ends, or, when patience is positive, when the next pause would end
// more than patience after the first attempt.
func (c *connector) rounds(ctx context.Context, svc clusterview.ServiceRef, port string, addrs []string, patience time.Duration,
	attempt func(addr string) (retry bool, err error)) error {
	var err error
	began := time.Now()
	backoff := connectBackoff
	var endpoints []string // every endpoint tried, in order, at most maxReportedEndpoints
	for round := 1; ; round++ {
		tried := make(map[string]bool, len(addrs))
		for addr := c.nextEndpoint(svc, port, addrs, tried); addr != ""; addr = c.nextEndpoint(svc, port, addrs, tried) {
			tried[addr] = true
			if len(endpoints) < maxReportedEndpoints && !slices.Contains(endpoints, addr) {
				endpoints = append(endpoints, addr)
			}
			var retry bool
			if retry, err = attempt(addr); err == nil || !retry {
				return err
			}
			c.logger.V(2).Info("Connecting to endpoint failed", "service", svc.KRef(), "endpoint", addr, "round", round, "err", err)
		}
		if err == nil {
			return errNoEndpoint
		}
		// The next round starts from the endpoints as they are now; none
		// at all means the pods went away, and the request is for a hold.
		b, lerr := c.eps.Lookup(svc, port)
		if lerr == nil && len(b.Addrs) == 0 {
			return &connectError{endpoints: endpoints, rounds: round, after: time.Since(began), err: errors.Join(ErrEndpointsGone, err)}
		}
		if (patience > 0 && time.Since(began)+backoff > patience) || !pause(ctx, backoff) {
			return &connectError{endpoints: endpoints, rounds: round, after: time.Since(began), err: err}
		}
		backoff = min(2*backoff, MaxConnectBackoff)
		if b, lerr := c.eps.Lookup(svc, port); lerr == nil && len(b.Addrs) > 0 {
			addrs = c.order(svc, b.Addrs)
		}
	}
}

// nextEndpoint is the endpoint to try after those in tried this round:
// the first of addrs, then, after a failed connect, one not tried yet
// from the endpoints as they are now, "" when none is left. The endpoints
// are read again because they lag the pods: a deleted pod stays listed
// until its EndpointSlice update arrives, and no longer accepts. By the
// time a connect to it has failed the list has often caught up, so the
// retry goes to a pod that is listed now rather than to another stale
// entry, and a connection fails only when no endpoint it could find
// accepts it within the connect patience.
func (c *connector) nextEndpoint(svc clusterview.ServiceRef, port string, addrs []string, tried map[string]bool) string {
	if len(tried) == 0 {
		if len(addrs) == 0 {
			return ""
		}
		return addrs[0]
	}
	if b, err := c.eps.Lookup(svc, port); err == nil && len(b.Addrs) > 0 {
		addrs = b.Addrs
	}
	for _, a := range addrs {
		if !tried[a] {
			return a
		}
	}
	return ""
}

// connect opens a TCP connection to one of addrs (see rounds), trying
// until ctx ends or, when patience is positive, for patience.
func (c *connector) connect(ctx context.Context, svc clusterview.ServiceRef, port string, addrs []string, patience time.Duration) (net.Conn, error) {
	var conn net.Conn
	err := c.rounds(ctx, svc, port, c.order(svc, addrs), patience, func(addr string) (bool, error) {
		var err error
		conn, err = dialPatiently(ctx, c.dial, addr, c.dialTimeout)
		return true, err
	})
	return conn, err
}

// dialPatiently connects to addr. An attempt that times out is followed at
// once by a fresh one with a longer timeout (connectAttempts); an attempt
// that fails otherwise (refused, unreachable) ends it, and the connect
// rounds decide when to try addr again. It returns the last error.
func dialPatiently(ctx context.Context, dial DialFunc, addr string, maxTimeout time.Duration) (net.Conn, error) {
	var err error
	for _, timeout := range connectAttempts {
		if timeout == 0 || timeout > maxTimeout {
			timeout = maxTimeout
		}
		attemptCtx, cancel := context.WithTimeout(ctx, timeout)
		var c net.Conn
		c, err = dial(attemptCtx, "tcp", addr)
		timedOut := errors.Is(attemptCtx.Err(), context.DeadlineExceeded)
		cancel()
		if err == nil {
			return c, nil
		}
		if ctx.Err() != nil || !timedOut {
			break
		}
	}
	return nil, err
}

// pause waits d, or until ctx ends; it reports whether d passed.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// countFailures is dial, counting its failed attempts in failures.
func countFailures(dial DialFunc, failures prometheus.Counter) DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			failures.Inc()
		}
		return c, err
	}
}
