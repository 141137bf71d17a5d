package commandtest

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// FreezingProxy forwards TCP connections to a backend, such as an
// apiserver, until Freeze; from then on it drops every byte both ways of
// the connections it has and keeps them open, as a connection does
// whose NAT entry or load balancer went away. Connections made after
// Freeze are forwarded.
type FreezingProxy struct {
	ln      net.Listener
	backend string

	mu     sync.Mutex
	conns  map[net.Conn]*atomic.Bool // each connection's frozen flag
	closed bool
	wg     sync.WaitGroup
}

// NewFreezingProxy listens on loopback and forwards to backend until the
// test ends.
func NewFreezingProxy(t testing.TB, backend string) *FreezingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &FreezingProxy{ln: ln, backend: backend, conns: map[net.Conn]*atomic.Bool{}}
	t.Cleanup(p.close)
	p.wg.Go(p.serve)
	return p
}

// Addr is the proxy's host:port.
func (p *FreezingProxy) Addr() string { return p.ln.Addr().String() }

// Freeze makes every connection open now drop what it carries.
func (p *FreezingProxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, frozen := range p.conns {
		frozen.Store(true)
	}
}

func (p *FreezingProxy) serve() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.backend)
		if err != nil {
			_ = in.Close()
			continue
		}
		frozen := new(atomic.Bool)
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_, _ = in.Close(), out.Close()
			return
		}
		p.conns[in], p.conns[out] = frozen, frozen
		p.mu.Unlock()
		p.wg.Go(func() { pipe(out, in, frozen) })
		p.wg.Go(func() { pipe(in, out, frozen) })
	}
}

func pipe(dst, src net.Conn, frozen *atomic.Bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !frozen.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *FreezingProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
