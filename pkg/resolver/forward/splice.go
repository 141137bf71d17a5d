package forward

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/elasti-dev/elasti/pkg/resolver/admission"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
)

// Splice connects to one of b's endpoints through the connect rounds
// (connect.go), with the patience an HTTP request has, and splices c to
// it; when no pod accepts within it, it returns and the caller closes c.
// When the Service's Ready endpoints all went away before one accepted,
// it returns ErrEndpointsGone, having sent nothing, and the caller may
// hold c. held is how long c was held for the Service to wake, 0 if it
// was not. When drop ends, both connections are closed.
func (f *Forwarder) Splice(ctx, drop context.Context, c *PeekedConn, logger klog.Logger, svc clusterview.ServiceRef, port string, b clusterview.Backends, held time.Duration) error {
	backend, err := f.conn.connect(ctx, svc, port, b.Addrs, f.connectPatience)
	if errors.Is(err, ErrEndpointsGone) {
		logger.V(2).Info("The service's Ready endpoints went away before one accepted the connection", "source", b.Source(), "err", err)
		f.metrics.EndpointsGone.WithLabelValues(admission.ProtocolTCP).Inc()
		return ErrEndpointsGone
	}
	if err != nil {
		f.metrics.Spliced.WithLabelValues(SplicedUnreachable).Inc()
		logger.Info("Closing connection: no pod accepted it", "source", b.Source(), "err", err)
		return nil
	}
	f.metrics.Spliced.WithLabelValues(SplicedSuccess).Inc()
	logger.V(4).Info("Splicing connection", "endpoint", backend.RemoteAddr(), "held", held)
	splice(drop, c, backend, f.spliceIdle)
	return nil
}

// PeekedConn is a client connection whose first bytes were read ahead
// into a buffer (the port listeners sniff them, and watchClientClose
// reads on while it is held); reads drain the buffer first.
type PeekedConn struct {
	net.Conn
	r *bufio.Reader
}

// NewPeekedConn returns c, read through r, which has read ahead from c.
func NewPeekedConn(c net.Conn, r *bufio.Reader) *PeekedConn { return &PeekedConn{Conn: c, r: r} }

func (c *PeekedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// ReadAhead is the size of c's read-ahead buffer, which holds its first
// bytes and which WatchClientClose may fill while it is held.
func (c *PeekedConn) ReadAhead() int { return c.r.Size() }

// WatchClientClose cancels when the client resets c while it is held. It
// reads ahead into c's buffer, so nothing is lost; once the buffer is full
// it stops watching. An EOF is not a departure: a client may send its
// request and half-close, then wait for the answer, and a full close looks
// the same on the wire, so such a connection waits out its timeout. This
// is deliberate, and bounded: closing at EOF would cut off every client of
// a send-then-half-close protocol while its Service wakes, and a shorter
// wait after EOF would too when the wake is slow. The slot is kept at most
// the resolver's Config.RequestTimeout, counts against its client's
// Config.PerSourceQueue as well as the queues, and once spliced the
// connection is closed by idleWatch when nothing moves. The returned stop
// must be called before c is read.
func WatchClientClose(c *PeekedConn, cancel context.CancelFunc) (stop func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			_, err := c.r.Peek(c.r.Buffered() + 1)
			if err == nil {
				continue
			}
			var ne net.Error
			timedOut := errors.As(err, &ne) && ne.Timeout()
			if !timedOut && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
				cancel() // reset: the client is gone
			}
			return
		}
	}()
	return func() {
		_ = c.SetReadDeadline(time.Now()) // unblocks the Peek
		<-done
		_ = c.SetReadDeadline(time.Time{})
	}
}

// splice copies both ways until both directions end, or until no byte
// moved either way for idle (see idleWatch). When one side stops sending,
// the other is told by a half-close, so protocols that finish with a
// half-close (a client that sends, then reads to EOF) still work.
//
// Each direction is one io.Copy between the two TCP connections, which
// Linux runs as splice(2) through a kernel pipe: a spliced connection
// keeps no copy buffer in the resolver's memory, only its read-ahead
// buffer (see PeekedConn), however many are open. When drop ends,
// both connections are closed.
func splice(drop context.Context, client *PeekedConn, backend net.Conn, idle time.Duration) {
	defer func() { _ = backend.Close() }()
	w := newIdleWatch(idle, client.Conn, backend)
	// Closing the client's connection alone would not do: the direction
	// from the pod may be waiting for the pod, the client's having ended.
	defer context.AfterFunc(drop, w.closeBoth)()
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.copy(0, backend, client.r, client.Conn)
		closeWrite(backend)
	}()
	w.copy(1, client.Conn, backend, backend)
	closeWrite(client.Conn)
	<-done
}

// idleWatch closes a spliced connection on which no byte moved either way
// for a whole period of idle: one direction streaming keeps the other,
// silent, open. Time is cut into periods of idle from the splice's start,
// and each direction's reads carry a deadline at the end of the current
// period. A read deadline loses nothing: io.Copy returns what it moved
// and is called again. (A write deadline would: the bytes of the
// interrupted write are gone, so writes carry none.) At each period's end
// the direction that reports last decides for both. A direction that did
// not report for a whole period is blocked writing to a peer that does
// not read, and counts as moving nothing. So the connection is closed
// between idle and twice idle after its last byte, and a half-closed one
// (one direction ended) the same way.
type idleWatch struct {
	idle  time.Duration
	start time.Time
	conns [2]net.Conn

	mu sync.Mutex
	// reported is the last period each direction reported, moved the last
	// in which it moved bytes; ended is set when its copy ended.
	reported, moved [2]int64
	ended           [2]bool
}

func newIdleWatch(idle time.Duration, a, b net.Conn) *idleWatch {
	return &idleWatch{idle: idle, start: time.Now(), conns: [2]net.Conn{a, b}}
}

// period returns the number of the period t falls in; period k ends at
// start + k·idle.
func (w *idleWatch) period(t time.Time) int64 { return int64(t.Sub(w.start)/w.idle) + 1 }

// copy copies src to dst as direction d, reading from conn (src's
// connection) with deadlines at the end of each period.
func (w *idleWatch) copy(d int, dst io.Writer, src io.Reader, conn net.Conn) {
	defer func() { _ = conn.SetReadDeadline(time.Time{}) }()
	for {
		k := w.period(time.Now())
		_ = conn.SetReadDeadline(w.start.Add(time.Duration(k) * w.idle))
		n, err := io.Copy(dst, src)
		var ne net.Error
		switch {
		case err == nil: // EOF: the caller half-closes dst
			w.report(d, max(k, w.period(time.Now())-1), n > 0, true)
			return
		case !errors.As(err, &ne) || !ne.Timeout():
			// A reset, or a connection closed here (PortListeners.Shutdown
			// closes the client's): nothing more can pass either way.
			w.report(d, max(k, w.period(time.Now())-1), n > 0, true)
			w.closeBoth()
			return
		}
		if w.report(d, max(k, w.period(time.Now())-1), n > 0, false) {
			w.closeBoth()
			return
		}
	}
}

// closeBoth closes both connections, which ends both directions' copies.
func (w *idleWatch) closeBoth() {
	for _, c := range w.conns {
		_ = c.Close()
	}
}

// report records that direction d reached the end of period k, having
// moved bytes in it or not, and ended or not; it returns whether the
// connection was idle for the whole period.
func (w *idleWatch) report(d int, k int64, moved, ended bool) (idle bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.reported[d] = k
	if moved {
		w.moved[d] = k
	}
	if ended {
		w.ended[d] = true
		return false
	}
	o := 1 - d
	if w.moved[d] >= k {
		return false
	}
	switch {
	case w.ended[o]:
		return true
	case w.moved[o] >= k:
		return false
	case w.reported[o] >= k:
		return true // it reported the period, silent too
	case w.reported[o] < k-1:
		return true // blocked writing for a whole period
	default:
		return false // it reports the period next, and decides
	}
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}
