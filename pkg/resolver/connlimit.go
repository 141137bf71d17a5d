package resolver

import (
	"net"
)

// LimitListener returns ln with its connections counted against
// Config.MaxConnections and Config.MaxConnectionsPerSource, together with
// the resolver ports' (see pkg/connlimit): the proxy port and every
// resolver port share one count, so the bound is on the resolver's memory,
// not per port. The command wraps the proxy port's listener with it.
func (r *Resolver) LimitListener(ln net.Listener) net.Listener {
	return r.conns.Listener(ln)
}
