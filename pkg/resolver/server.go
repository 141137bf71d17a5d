package resolver

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/elasti-dev/elasti/pkg/resolver/answer"
	"github.com/elasti-dev/elasti/pkg/resolver/forward"
	"github.com/elasti-dev/elasti/pkg/resolver/identify"
)

const (
	// serverMaxHeaderBytes bounds a request's headers. Go's default is
	// 1 MiB, and every held request keeps its headers in memory for up to
	// the request timeout, GlobalQueue of them at once; together they are
	// bounded by Config.MaxHeldBytes.
	serverMaxHeaderBytes = 64 << 10
	// serverIdleTimeout closes keep-alive connections left idle this long.
	// Without it (and with no ReadTimeout, which would cut off streaming
	// bodies) idle client connections are never closed and accumulate.
	serverIdleTimeout = 2 * time.Minute
	// serverMaxReceiveBufferPerStream is the HTTP/2 flow-control window of
	// one request body (see body.go for what streams). Go's default of
	// 1 MiB would let GlobalQueue held streams pin 2 GiB. The resolver is
	// in the path only while a Service wakes, so the smaller window costs
	// little.
	serverMaxReceiveBufferPerStream = 64 << 10
	// serverHeaderTableSize is HPACK's dynamic table size per connection.
	serverHeaderTableSize = 4096
	// serverMaxReadFrameSize is the largest HTTP/2 frame a client may send.
	serverMaxReadFrameSize = 16 << 10
)

// ServeHTTP implements http.Handler for the shared proxy port, where the
// Host names the Service.
func (r *Resolver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	svc, port, err := r.hosts.Identify(req)
	if err != nil {
		r.logger.V(4).Info("Rejecting request with a bad host", "host", req.Host, "err", err)
		answer.Error(w, http.StatusBadRequest, err.Error())
		return
	}
	r.serveService(w, req, svc, port)
}

// NewPortListeners returns the listeners of the resolver ports routes
// names, serving through r. Start them with Run.
func (r *Resolver) NewPortListeners(routes *identify.RouteTable, opts identify.PortListenersOptions) *identify.PortListeners {
	return identify.NewPortListeners(identify.Serving{Server: portServer{r}, Endpoints: r.eps, Limit: r.LimitListener,
		HTTPServer: r.newPortServer, Metrics: r.metrics.Identify, Logger: r.logger.WithName("ports")}, routes, opts)
}

// newPortServer returns the server of the HTTP the resolver ports take,
// serving h; it is bounded as the proxy port's is.
func (r *Resolver) newPortServer(h http.Handler) *http.Server {
	return newServer("", h, r.cfg)
}

// portServer serves what the port listeners identified: TCP through
// serveConn, HTTP through serveService, for the Service port the
// resolver port stands for.
type portServer struct{ r *Resolver }

func (p portServer) ServeConn(drop context.Context, c *forward.PeekedConn, route identify.Route) {
	p.r.serveConn(drop, c, route)
}

func (p portServer) ServeRoute(w http.ResponseWriter, req *http.Request, route identify.Route) {
	p.r.serveService(w, req, route.Service, strconv.Itoa(int(route.Port)))
}

// ConfigureServer makes srv speak HTTP/1.1 and HTTP/2 cleartext with prior
// knowledge (h2c, as gRPC clients use) on the same port.
func ConfigureServer(srv *http.Server) {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv.Protocols = p
}

// NewServer returns the HTTP server for proxied traffic on addr, serving
// r: HTTP/1.1 and h2c, with bounds fit for holding many requests and
// HTTP/2 streams capped to what r's request budget holds.
func (r *Resolver) NewServer(addr string) *http.Server {
	return newServer(addr, r, r.cfg)
}

// newServer returns a server for proxied traffic serving h, bounded for
// cfg; the resolver ports' server is one too (newPortServer).
func newServer(addr string, h http.Handler, cfg Config) *http.Server {
	srv := &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: 30 * time.Second,
		MaxHeaderBytes:    serverMaxHeaderBytes,
		IdleTimeout:       serverIdleTimeout,
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams:      maxConcurrentStreams(cfg),
			MaxReceiveBufferPerStream: serverMaxReceiveBufferPerStream,
			// HPACK's dynamic table, per connection: the protocol's
			// default, set here so no release of Go changes it unseen.
			MaxDecoderHeaderTableSize: serverHeaderTableSize,
			// A connection keeps a read buffer as large as the largest
			// frame it was sent; Go's default would let each of
			// MaxConnections keep 1 MiB. 16 KiB is the protocol's
			// smallest, and what clients send unless told otherwise.
			MaxReadFrameSize: serverMaxReadFrameSize,
		},
	}
	ConfigureServer(srv)
	return srv
}

// maxRequestCharge is the most one request is charged against
// Config.MaxRequestBytes without a buffered body: requestBytes of a
// request with headers at serverMaxHeaderBytes and an HTTP/2 body that
// streams, forwarded.
const maxRequestCharge = requestOverheadBytes + forwardOverheadBytes + serverMaxHeaderBytes + serverMaxReceiveBufferPerStream

// maxConcurrentStreams is how many HTTP/2 streams one connection may have
// open at once: as many requests, each charged its most, as one
// namespace's share of the request budget holds (Config.NamespaceShare of
// Config.MaxRequestBytes), at least 1 and at most Go's default of 250. A
// client that opens more is refused them by the protocol (the server
// advertises SETTINGS_MAX_CONCURRENT_STREAMS and resets streams past it
// with REFUSED_STREAM, which a client may retry); within it, each stream
// is charged and answered 503 past the budget (serveService).
func maxConcurrentStreams(cfg Config) int {
	share := cfg.MaxRequestBytes * int64(cfg.NamespaceShare) / 100
	return int(min(max(share/maxRequestCharge, 1), 250))
}
