package identify

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"

	"github.com/elasti-dev/elasti/pkg/resolver/answer"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
	"github.com/elasti-dev/elasti/pkg/resolver/forward"
)

// PortListeners is the identify layer of per-port routing: one listener
// per resolver port in the RouteTable, so a connection's local port alone
// names its Service. HTTP on such a port is served like the shared proxy
// port (held, probes, 503/504); anything else is held at the TCP level and
// spliced to a pod byte for byte.
type PortListeners struct {
	serve   Server
	eps     clusterview.EndpointSource
	limit   func(net.Listener) net.Listener
	metrics Metrics
	routes  *RouteTable
	host    string
	listen  func(network, addr string) (net.Listener, error)
	logger  klog.Logger

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

// Server serves what the port listeners accept, each with the route of
// the port it arrived on: the resolver, which assembles the layers that
// hold and forward.
type Server interface {
	// ServeConn serves a TCP connection and closes it. When drop ends, c
	// is given up at once, held or spliced.
	ServeConn(drop context.Context, c *forward.PeekedConn, route Route)
	// ServeRoute serves an HTTP request.
	ServeRoute(w http.ResponseWriter, req *http.Request, route Route)
}

// Serving is what the resolver that assembles the port listeners gives
// them.
type Serving struct {
	// Server serves each connection and request.
	Server Server
	// Endpoints gives a Service port's appProtocol: a port that declares
	// one is served as HTTP or spliced without sniffing.
	Endpoints clusterview.EndpointSource
	// Limit wraps each listener, so its connections count with the proxy
	// port's (the resolver's LimitListener).
	Limit func(net.Listener) net.Listener
	// HTTPServer returns the server of the ports' HTTP, serving h, bounded
	// as the proxy port's is.
	HTTPServer func(h http.Handler) *http.Server
	Metrics    Metrics
	Logger     klog.Logger
}

// PortListenersOptions configure NewPortListeners.
type PortListenersOptions struct {
	// Host is the address to bind, "" for all.
	Host string
	// Listen opens a listener; nil means net.Listen.
	Listen func(network, addr string) (net.Listener, error)
}

// NewPortListeners returns listeners for routes, serving through s. Start
// them with Run.
func NewPortListeners(s Serving, routes *RouteTable, opts PortListenersOptions) *PortListeners {
	p := &PortListeners{
		serve:     s.Server,
		eps:       s.Endpoints,
		limit:     s.Limit,
		metrics:   s.Metrics,
		routes:    routes,
		host:      opts.Host,
		listen:    opts.Listen,
		logger:    s.Logger,
		httpConns: newConnQueue(),
		open:      map[int32]net.Listener{},
		failed:    map[int32]error{},
		conns:     map[net.Conn]struct{}{},
	}
	if p.listen == nil {
		p.listen = net.Listen
	}
	p.dropCtx, p.drop = context.WithCancel(context.Background())
	p.server = s.HTTPServer(http.HandlerFunc(p.serveHTTP))
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
			p.metrics.ListenFailures.Inc()
			continue
		}
		delete(p.failed, port)
		ln = p.limit(ln)
		p.open[port] = ln
		p.logger.V(2).Info("Listening on resolver port", "port", port)
		p.wg.Add(1)
		go p.accept(ln, port)
	}
	p.metrics.Listeners.Set(float64(len(p.open)))
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

// handle identifies c's Service by its local port and serves it as HTTP
// or as a TCP stream.
func (p *PortListeners) handle(c net.Conn, port int32) {
	route, ok := p.routes.Lookup(port)
	if !ok {
		_ = c.Close() // the port was just released
		return
	}
	b, err := p.eps.Lookup(route.Service, strconv.Itoa(int(route.Port)))
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
	p.serve.ServeConn(p.dropCtx, pc, route)
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

// portRouteContextKey carries the Route of the resolver port an HTTP
// connection arrived on, set by the server's ConnContext.
type portRouteContextKey struct{}

// serveHTTP is the handler for HTTP that arrived on a resolver port: the
// port alone names the Service, whatever the Host says.
func (p *PortListeners) serveHTTP(w http.ResponseWriter, req *http.Request) {
	route, ok := req.Context().Value(portRouteContextKey{}).(Route)
	if !ok {
		answer.Error(w, http.StatusInternalServerError, fmt.Sprintf("no route for local address %v", req.Context().Value(http.LocalAddrContextKey)))
		return
	}
	p.serve.ServeRoute(w, req, route)
}
