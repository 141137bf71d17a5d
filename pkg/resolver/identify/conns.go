package identify

import (
	"net"
	"sync"

	"github.com/elasti-dev/elasti/pkg/resolver/forward"
)

// routedConn is an HTTP connection the port listeners sniffed, and the
// route of the port it arrived on, which the server's ConnContext gives
// its requests.
type routedConn struct {
	*forward.PeekedConn
	route Route
}

// connQueue is a net.Listener fed by push, so an http.Server serves
// connections the port listeners accepted and sniffed.
type connQueue struct {
	ch   chan net.Conn
	done chan struct{}
	// closeDone closes done; later calls do nothing.
	closeDone func()
}

func newConnQueue() *connQueue {
	q := &connQueue{ch: make(chan net.Conn), done: make(chan struct{})}
	q.closeDone = sync.OnceFunc(func() { close(q.done) })
	return q
}

// push hands c to the server; false once the queue is closed.
func (q *connQueue) push(c net.Conn) bool {
	select {
	case q.ch <- c:
		return true
	case <-q.done:
		return false
	}
}

func (q *connQueue) Accept() (net.Conn, error) {
	select {
	case c := <-q.ch:
		return c, nil
	case <-q.done:
		return nil, net.ErrClosed
	}
}

func (q *connQueue) Close() error {
	q.closeDone()
	return nil
}

func (q *connQueue) Addr() net.Addr { return queueAddr{} }

type queueAddr struct{}

func (queueAddr) Network() string { return "resolver-ports" }
func (queueAddr) String() string  { return "resolver ports" }
