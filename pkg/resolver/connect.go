package resolver

import (
	"context"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// connectAttempts are the connect timeouts of the attempts dialPatiently
// makes, the last capped by Config.DialTimeout. A pod that was just marked
// Ready may not accept yet, and a lost SYN is only resent by the kernel
// after a second; a fresh, short attempt gets through sooner, so a held
// request is not answered 502 (or delayed a second) for a pod that is
// about to accept.
var connectAttempts = []time.Duration{250 * time.Millisecond, 750 * time.Millisecond, 0}

// connectBackoff is the pause after an attempt that failed at once
// (refused, unreachable), doubled each time.
const connectBackoff = 50 * time.Millisecond

// dialPatiently connects to addr with growing timeouts until an attempt
// succeeds, the attempts run out or ctx ends. It returns the last error.
func dialPatiently(ctx context.Context, dial DialFunc, addr string, maxTimeout time.Duration) (net.Conn, error) {
	var err error
	backoff := connectBackoff
	for i, timeout := range connectAttempts {
		if timeout == 0 || timeout > maxTimeout {
			timeout = maxTimeout
		}
		attemptCtx, cancel := context.WithTimeout(ctx, timeout)
		began := time.Now()
		var c net.Conn
		c, err = dial(attemptCtx, "tcp", addr)
		cancel()
		if err == nil {
			return c, nil
		}
		if ctx.Err() != nil || i == len(connectAttempts)-1 {
			break
		}
		if time.Since(began) < timeout/2 {
			select {
			case <-ctx.Done():
				return nil, err
			case <-time.After(backoff):
			}
			backoff *= 2
		}
	}
	return nil, err
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
