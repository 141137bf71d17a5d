package resolver

import (
	"bufio"
	"context"
	"errors"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"

	"github.com/elasti-dev/elasti/pkg/resolver/forward"
)

// PortListeners is the identify layer of per-port routing: one listener
// per resolver port in the RouteTable, so a connection's local port alone
// names its Service. HTTP on such a port is served like the shared proxy
// port (held, probes, 503/504); anything else is held at the TCP level and
// spliced to a pod byte for byte.
type PortListeners struct {
	r      *Resolver
	routes *RouteTable
	host   string
	listen func(network, addr string) (net.Listener, error)
	logger klog.Logger

	// httpConns feeds the HTTP connections of every port to one server.
	httpConns *connQueue
	server    *http.Server

	mu     sync.Mutex
	open   map[int32]net.Listener
	failed map[int32]error
	closed bool
	conns  map[net.Conn]struct{} // spliced connections, closed on shutdown
	wg     sync.WaitGroup        // accept loops and spliced connections
	synced atomic.Bool
	// dropCtx ends when Shutdown gives up on the TCP connections still
	// held or spliced.
	dropCtx context.Context
	drop    context.CancelFunc
}

// PortListenersOptions configure NewPortListeners.
type PortListenersOptions struct {
	// Host is the address to bind, "" for all.
	Host string
	// Listen opens a listener; nil means net.Listen.
	Listen func(network, addr string) (net.Listener, error)
}

// NewPortListeners returns listeners for routes, serving through r. Start
// them with Run.
func NewPortListeners(r *Resolver, routes *RouteTable, opts PortListenersOptions) *PortListeners {
	p := &PortListeners{
		r:         r,
		routes:    routes,
		host:      opts.Host,
		listen:    opts.Listen,
		logger:    r.logger.WithName("ports"),
		httpConns: newConnQueue(),
		open:      map[int32]net.Listener{},
		failed:    map[int32]error{},
		conns:     map[net.Conn]struct{}{},
	}
	if p.listen == nil {
		p.listen = net.Listen
	}
	p.dropCtx, p.drop = context.WithCancel(context.Background())
	p.server = newServer("", http.HandlerFunc(r.servePortHTTP), r.cfg)
	p.server.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if rc, ok := c.(*routedConn); ok {
			return context.WithValue(ctx, portRouteContextKey{}, rc.route)
		}
		return ctx
	}
	return p
}

// listenRetry is how often ports that failed to open are tried again.
const listenRetry = 10 * time.Second

// Run opens and closes listeners as the RouteTable changes until ctx ends
// or Shutdown is called. It waits for the table to sync first.
func (p *PortListeners) Run(ctx context.Context) {
	go func() { _ = p.server.Serve(p.httpConns) }()
	for !p.routes.HasSynced() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
	retry := time.NewTicker(listenRetry)
	defer retry.Stop()
	for {
		p.sync()
		p.synced.Store(true)
		select {
		case <-ctx.Done():
			return
		case <-p.routes.Changed():
		case <-retry.C:
		}
	}
}

// HasSynced reports whether every routed port was tried once.
func (p *PortListeners) HasSynced() bool { return p.synced.Load() }

// Listening returns the ports open now, in order.
func (p *PortListeners) Listening() []int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Sorted(maps.Keys(p.open))
}

// sync opens the routed ports not yet open and closes the ones no longer
// routed.
func (p *PortListeners) sync() {
	want := map[int32]bool{}
	for _, port := range p.routes.Ports() {
		want[port] = true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	for port, ln := range p.open {
		if !want[port] {
			_ = ln.Close()
			delete(p.open, port)
			p.logger.V(2).Info("Closed resolver port", "port", port)
		}
	}
	for port := range p.failed {
		if !want[port] {
			delete(p.failed, port)
		}
	}
	for port := range want {
		if p.open[port] != nil {
			continue
		}
		ln, err := p.listen("tcp", net.JoinHostPort(p.host, strconv.Itoa(int(port))))
		if err != nil {
			if p.failed[port] == nil {
				p.logger.Error(err, "Cannot listen on a resolver port; retrying", "port", port, "every", listenRetry)
			}
			p.failed[port] = err
			p.r.metrics.ListenFailures.Inc()
			continue
		}
		delete(p.failed, port)
		ln = p.r.LimitListener(ln)
		p.open[port] = ln
		p.logger.V(2).Info("Listening on resolver port", "port", port)
		p.wg.Add(1)
		go p.accept(ln, port)
	}
	p.r.metrics.Listeners.Set(float64(len(p.open)))
}

func (p *PortListeners) accept(ln net.Listener, port int32) {
	defer p.wg.Done()
	var delay time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: back off as
			// net/http's server does.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			p.logger.V(2).Info("Accept failed; retrying", "port", port, "err", err, "in", delay)
			time.Sleep(delay)
			continue
		}
		delay = 0
		go p.handle(c, port)
	}
}

// sniffTimeout bounds the wait for a client's first bytes. Protocols where
// the server speaks first send nothing; they are spliced after it.
const sniffTimeout = 250 * time.Millisecond

// handle identifies c's Service by its local port and serves it as HTTP
// or as a TCP stream.
func (p *PortListeners) handle(c net.Conn, port int32) {
	route, ok := p.routes.Lookup(port)
	if !ok {
		_ = c.Close() // the port was just released
		return
	}
	b, err := p.r.eps.Lookup(route.Service, strconv.Itoa(int(route.Port)))
	if err != nil {
		p.logger.V(2).Info("Closing connection for an unknown service", "service", route.Service.KRef(), "err", err)
		_ = c.Close()
		return
	}
	br := bufio.NewReader(c)
	isHTTP := false
	switch {
	case b.AppProtocol == "":
		isHTTP = sniffHTTP(c, br)
	case isHTTPAppProtocol(b.AppProtocol):
		isHTTP = true
	}
	pc := forward.NewPeekedConn(c, br)
	if isHTTP {
		if !p.httpConns.push(&routedConn{PeekedConn: pc, route: route}) {
			_ = c.Close()
		}
		return
	}
	if !p.track(pc) {
		_ = c.Close()
		return
	}
	defer p.untrack(pc)
	p.r.serveConn(p.dropCtx, pc, route)
}

func (p *PortListeners) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	p.wg.Add(1)
	return true
}

func (p *PortListeners) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	p.wg.Done()
}

// Shutdown closes every listener, then lets HTTP requests and spliced
// connections finish until ctx ends, when the rest are closed.
func (p *PortListeners) Shutdown(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	for port, ln := range p.open {
		_ = ln.Close()
		delete(p.open, port)
	}
	p.mu.Unlock()
	err := p.server.Shutdown(ctx)
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		p.drop()
		p.mu.Lock()
		for c := range p.conns {
			_ = c.Close()
		}
		p.mu.Unlock()
		<-done
	}
	p.drop()
	return err
}

// isHTTPAppProtocol reports whether a declared appProtocol is HTTP in
// cleartext: served as HTTP without sniffing. Every other declared value
// (https, tls, mysql, kubernetes.io/wss, ...) is spliced.
func isHTTPAppProtocol(p string) bool {
	switch strings.ToLower(p) {
	case "http", "http2", "h2c", "kubernetes.io/h2c", "grpc", "kubernetes.io/ws":
		return true
	}
	return false
}

// httpPrefaces are the starts of an HTTP/1.x request line and of the
// HTTP/2 connection preface.
var httpPrefaces = []string{"GET ", "HEAD ", "POST ", "PUT ", "DELETE ", "OPTIONS ", "PATCH ", "CONNECT ", "TRACE ", "PRI * HTTP/2.0"}

// sniffHTTP reports whether the client's first bytes start an HTTP
// request. It reads only as far as needed to tell, and at most until
// sniffTimeout; the bytes stay in br.
func sniffHTTP(c net.Conn, br *bufio.Reader) bool {
	_ = c.SetReadDeadline(time.Now().Add(sniffTimeout))
	defer func() { _ = c.SetReadDeadline(time.Time{}) }()
	for n := 1; ; n++ {
		b, err := br.Peek(n)
		switch httpPrefix(b) {
		case prefixHTTP:
			return true
		case prefixOther:
			return false
		}
		if err != nil {
			return false // too little to tell: not HTTP as far as we know
		}
	}
}

type prefixVerdict int

const (
	prefixUndecided prefixVerdict = iota
	prefixHTTP
	prefixOther
)

// httpPrefix judges the first bytes of a connection.
func httpPrefix(b []byte) prefixVerdict {
	undecided := false
	for _, p := range httpPrefaces {
		switch {
		case len(b) >= len(p) && string(b[:len(p)]) == p:
			return prefixHTTP
		case len(b) < len(p) && string(b) == p[:len(b)]:
			undecided = true
		}
	}
	if undecided {
		return prefixUndecided
	}
	return prefixOther
}

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
