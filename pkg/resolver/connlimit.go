package resolver

import (
	"io"
	"net"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// connLimit bounds the client connections open at once on every listener
// it wraps: the proxy port and every resolver port share one count
// (Config.MaxConnections), so the bound is on the resolver's memory, not
// per port.
//
// A connection past the bound is closed as soon as it is accepted, with a
// reset, rather than left waiting in the kernel's accept queue as
// golang.org/x/net/netutil.LimitListener does by not accepting. A flood
// that holds every slot would otherwise fill that queue too: a
// well-behaved client's handshake completes there, its request is sent and
// never read, and it learns nothing until its own timeout, while the
// accept loop can only take the oldest waiter when a slot frees. Closed at
// once, the client sees the refusal in a round trip and can retry (through
// kube-proxy, likely at another resolver pod), and the accept queue stays
// empty, so a freed slot goes to whoever connects next.
type connLimit struct {
	max     int64
	open    atomic.Int64
	gauge   prometheus.Gauge
	refused prometheus.Counter
}

func newConnLimit(max int, gauge prometheus.Gauge, refused prometheus.Counter) *connLimit {
	return &connLimit{max: int64(max), gauge: gauge, refused: refused}
}

func (l *connLimit) take() bool {
	if l.open.Add(1) > l.max {
		l.open.Add(-1)
		return false
	}
	l.gauge.Inc()
	return true
}

func (l *connLimit) release() {
	l.open.Add(-1)
	l.gauge.Dec()
}

// LimitListener returns ln with its connections counted against
// Config.MaxConnections, together with the resolver ports' (see
// connLimit). The command wraps the proxy port's listener with it.
func (r *Resolver) LimitListener(ln net.Listener) net.Listener {
	return &limitedListener{Listener: ln, lim: r.conns}
}

type limitedListener struct {
	net.Listener
	lim *connLimit
}

// Accept returns the next connection within the bound, closing those past
// it.
func (l *limitedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.lim.take() {
			return &limitedConn{Conn: c, release: sync.OnceFunc(l.lim.release)}, nil
		}
		l.lim.refused.Inc()
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // a reset: no TIME_WAIT kept for it
		}
		_ = c.Close()
	}
}

// limitedConn gives its slot back on its first Close. It keeps the
// methods of *net.TCPConn that the resolver relies on: CloseWrite for
// half-closes, and ReadFrom and WriteTo, through which io.Copy between two
// TCP connections becomes splice(2) (see splice).
type limitedConn struct {
	net.Conn
	// release gives the slot back; later calls do nothing.
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}

func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}

func (c *limitedConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

func (c *limitedConn) WriteTo(w io.Writer) (int64, error) {
	if wt, ok := c.Conn.(io.WriterTo); ok {
		return wt.WriteTo(w)
	}
	return io.Copy(w, struct{ io.Reader }{c.Conn})
}
