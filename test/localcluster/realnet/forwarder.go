package realnet

import (
	"io"
	"net"
	"sync"
	"time"
)

// Forwarder relays TCP connections from a listener on the host end of the
// node's veth to a loopback address, so processes in the node and pod
// namespaces reach the apiserver, which listens on 127.0.0.1 only.
type Forwarder struct {
	l      net.Listener
	target string

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// Forward listens on listen and relays each connection to target.
func Forward(listen, target string) (*Forwarder, error) {
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	f := &Forwarder{l: l, target: target, conns: map[net.Conn]struct{}{}}
	f.wg.Go(f.serve)
	return f, nil
}

// Addr is the listening host:port.
func (f *Forwarder) Addr() string { return f.l.Addr().String() }

func (f *Forwarder) serve() {
	for {
		in, err := f.l.Accept()
		if err != nil {
			return
		}
		f.wg.Go(func() { f.relay(in) })
	}
}

func (f *Forwarder) relay(in net.Conn) {
	out, err := net.DialTimeout("tcp", f.target, 5*time.Second)
	if err != nil {
		in.Close()
		return
	}
	if !f.track(in, out) {
		return
	}
	defer f.untrack(in, out)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		// Half-close so the other side sees EOF, as a direct connection would.
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(out, in)
	go pipe(in, out)
	<-done
	<-done
}

func (f *Forwarder) track(conns ...net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	for _, c := range conns {
		f.conns[c] = struct{}{}
	}
	return true
}

func (f *Forwarder) untrack(conns ...net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range conns {
		c.Close()
		delete(f.conns, c)
	}
}

// Close stops listening and cuts every relayed connection.
func (f *Forwarder) Close() {
	f.mu.Lock()
	f.closed = true
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.l.Close()
	f.wg.Wait()
}
