// Package connlimit bounds the client connections a server keeps open at
// once: in all, and per client address. The resolver's proxy and
// resolver ports and the binaries' own servers (pkg/command) use it.
package connlimit

import (
	"io"
	"net"
	"net/netip"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Limiter counts the connections open on every listener it wraps. A
// connection past a bound is closed as soon as it is accepted, with a
// reset, rather than left waiting in the kernel's accept queue as
// golang.org/x/net/netutil.LimitListener does by not accepting. A flood
// that holds every slot would otherwise fill that queue too: a
// well-behaved client's handshake completes there, its request is sent and
// never read, and it learns nothing until its own timeout, while the
// accept loop can only take the oldest waiter when a slot frees. Closed at
// once, the client sees the refusal in a round trip and can retry (through
// kube-proxy, likely at another pod), and the accept queue stays empty, so
// a freed slot goes to whoever connects next.
//
// The per-source bound keeps one client address (one pod, or everyone
// behind one SNAT) from taking every slot: a second address still
// connects when the first is at its share.
type Limiter struct {
	max, perSource int
	// gauge follows the connections open; refused counts those closed at
	// once. Either may be nil.
	gauge   prometheus.Gauge
	refused prometheus.Counter

	mu   sync.Mutex
	open int
	// sources counts the connections of each client address. An entry is
	// removed when its count reaches zero, so the map never has more
	// entries than connections are open (at most max).
	sources map[netip.Addr]int
}

// New returns a Limiter that allows max connections in all and perSource
// from one client address; perSource <= 0 or above max means max.
func New(max, perSource int, gauge prometheus.Gauge, refused prometheus.Counter) *Limiter {
	if perSource <= 0 || perSource > max {
		perSource = max
	}
	return &Limiter{max: max, perSource: perSource, gauge: gauge, refused: refused, sources: map[netip.Addr]int{}}
}

// Source is the client address a connection is counted against: the
// host of a TCP peer, with an IPv4-mapped IPv6 address unmapped, or the
// zero Addr for any other kind of address (all such share one count).
func Source(a net.Addr) netip.Addr {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.AddrPort().Addr().Unmap()
	}
	if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.Addr{}
}

// take counts a connection from src if both bounds allow it.
func (l *Limiter) take(src netip.Addr) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open >= l.max || l.sources[src] >= l.perSource {
		return false
	}
	l.open++
	l.sources[src]++
	if l.gauge != nil {
		l.gauge.Inc()
	}
	return true
}

func (l *Limiter) release(src netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if l.sources[src]--; l.sources[src] <= 0 {
		delete(l.sources, src)
	}
	if l.gauge != nil {
		l.gauge.Dec()
	}
}

// Open returns the connections open and the client addresses they come
// from.
func (l *Limiter) Open() (conns, sources int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open, len(l.sources)
}

// Listener returns ln with its connections counted against l.
func (l *Limiter) Listener(ln net.Listener) net.Listener {
	return &listener{Listener: ln, lim: l}
}

type listener struct {
	net.Listener
	lim *Limiter
}

// Accept returns the next connection within the bounds, closing those
// past them.
func (l *listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		src := Source(c.RemoteAddr())
		if l.lim.take(src) {
			return &conn{Conn: c, release: sync.OnceFunc(func() { l.lim.release(src) })}, nil
		}
		if l.lim.refused != nil {
			l.lim.refused.Inc()
		}
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // a reset: no TIME_WAIT kept for it
		}
		_ = c.Close()
	}
}

// conn gives its slot back on its first Close. It keeps the methods of
// *net.TCPConn that the resolver relies on: CloseWrite for half-closes,
// and ReadFrom and WriteTo, through which io.Copy between two TCP
// connections becomes splice(2).
type conn struct {
	net.Conn
	// release gives the slot back; later calls do nothing.
	release func()
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}

func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}

func (c *conn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

func (c *conn) WriteTo(w io.Writer) (int64, error) {
	if wt, ok := c.Conn.(io.WriterTo); ok {
		return wt.WriteTo(w)
	}
	return io.Copy(w, struct{ io.Reader }{c.Conn})
}
