package resolver

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"time"

	"k8s.io/klog/v2"
)

// serveConn is the TCP path of a resolver port: hold c while the Service
// has no Ready endpoint, with the same admission, wake and timeout as an
// HTTP request, then splice it to a pod byte for byte. A client that
// waits gets no answer on failure, only a closed connection.
func (r *Resolver) serveConn(c *peekedConn, route Route) {
	defer func() { _ = c.Close() }()
	svc, port := route.Service, strconv.Itoa(int(route.Port))
	logger := r.logger.WithValues("service", svc.kref(), "port", route.Port)
	ctx, cancel := context.WithTimeout(r.holds.ctx, r.cfg.RequestTimeout)
	defer cancel()

	if !r.inFront(ctx, svc) {
		r.metrics.NotInFront.WithLabelValues(ProtocolTCP).Inc()
		logger.V(4).Info("Closing connection for a Service the resolver is not in front of")
		return
	}
	b, err := r.eps.Lookup(svc, port)
	if err != nil {
		logger.V(2).Info("Closing connection: cannot resolve service", "err", err)
		return
	}
	var held time.Duration
	if len(b.Addrs) == 0 {
		if b, held, err = r.holdConn(ctx, c, logger, svc, port); err != nil {
			return
		}
	}
	backend, err := r.dialBackend(ctx, logger, svc, port, b)
	if err != nil {
		r.metrics.Spliced.WithLabelValues(OutcomeUnreachable).Inc()
		logger.V(2).Info("Closing connection: no pod accepted it", "err", err)
		return
	}
	r.metrics.Spliced.WithLabelValues(OutcomeSuccess).Inc()
	logger.V(4).Info("Splicing connection", "endpoint", backend.RemoteAddr(), "held", held)
	splice(c, backend)
}

// holdConn admits c and waits until svc has a Ready endpoint on port. It
// notices a client that closes while held.
func (r *Resolver) holdConn(ctx context.Context, c *peekedConn, logger klog.Logger, svc ServiceRef, port string) (Backends, time.Duration, error) {
	release, refused := r.admit.admit(svc, sourceOf(c.RemoteAddr().String()), heldConnBytes(c))
	switch refused.scope {
	case "":
	case ScopeSource:
		r.metrics.WakeRateLimited.WithLabelValues(ProtocolTCP).Inc()
		logger.V(2).Info("Client started too many wakes, closing connection", "client", c.RemoteAddr().String())
		return Backends{}, 0, errors.New("client out of wakes")
	default:
		r.metrics.Overflow.WithLabelValues(refused.scope).Inc()
		logger.V(2).Info("Hold bound reached, closing connection", "scope", refused.scope, "client", c.RemoteAddr().String())
		return Backends{}, 0, errors.New("queue full")
	}
	defer release()
	hd := r.holds.join(svc)
	defer hd.leave()
	began := time.Now()
	ctx, cancel := context.WithCancel(ctx)
	stopWatching := watchClientClose(c, cancel)
	b, err := hd.wait(ctx, port)
	stopWatching()
	switch {
	case err == nil:
		r.metrics.ColdStartWait.Observe(time.Since(began).Seconds())
	case errors.Is(err, context.DeadlineExceeded):
		r.metrics.Timeouts.Inc()
		logger.V(2).Info("Held connection timed out", "timeout", r.cfg.RequestTimeout)
	default:
		logger.V(4).Info("Held connection ended", "err", err)
	}
	return b, time.Since(began), err
}

// watchClientClose cancels when the client resets c while it is held. It
// reads ahead into c's buffer, so nothing is lost; once the buffer is full
// it stops watching. An EOF is not a departure: a client may send its
// request and half-close, then wait for the answer, and a full close looks
// the same on the wire, so such a connection waits out its timeout. The
// returned stop must be called before c is read.
func watchClientClose(c *peekedConn, cancel context.CancelFunc) (stop func()) {
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

// dialBackend connects to one of b's endpoints, each patiently. When none
// accepts it tries again in connect rounds (see connectBackoff) until ctx
// ends, looking the endpoints up again each round.
func (r *Resolver) dialBackend(ctx context.Context, logger klog.Logger, svc ServiceRef, port string, b Backends) (net.Conn, error) {
	backoff := connectBackoff
	for {
		var err error
		for _, addr := range r.fwd.order(svc, b.Addrs) {
			var c net.Conn
			if c, err = dialPatiently(ctx, r.dial, addr, r.cfg.DialTimeout); err == nil {
				return c, nil
			}
			logger.V(2).Info("Connecting to endpoint failed", "endpoint", addr, "err", err)
		}
		if err == nil {
			err = errors.New("no ready endpoint")
		}
		if !pause(ctx, backoff) {
			return nil, err
		}
		backoff = min(2*backoff, maxConnectBackoff)
		if b, err = r.eps.Lookup(svc, port); err != nil {
			return nil, err
		}
	}
}

// splice copies both ways until both directions end. When one side stops
// sending, the other is told by a half-close, so protocols that finish
// with a half-close (a client that sends, then reads to EOF) still work.
func splice(client *peekedConn, backend net.Conn) {
	defer func() { _ = backend.Close() }()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(backend, client.r)
		closeWrite(backend)
	}()
	_, _ = io.Copy(client.Conn, backend)
	closeWrite(client.Conn)
	<-done
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}
