package resolver

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

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
// maxConnectBackoff. An HTTP request tries for up to connectPatience from
// its first connect, so a pod that never listens costs it a 502 after at
// most 15 rounds; a held TCP connection tries until its hold deadline.
const (
	connectBackoff    = 50 * time.Millisecond
	maxConnectBackoff = time.Second
	connectPatience   = 10 * time.Second
)

// dialPatiently connects to addr. An attempt that times out is followed at
// once by a fresh one with a longer timeout (connectAttempts); an attempt
// that fails otherwise (refused, unreachable) ends it, and the caller's
// connect rounds decide when to try addr again. It returns the last error.
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
