package resolver

import (
	"net/http"
	"time"
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
)

// ConfigureServer makes srv speak HTTP/1.1 and HTTP/2 cleartext with prior
// knowledge (h2c, as gRPC clients use) on the same port.
func ConfigureServer(srv *http.Server) {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv.Protocols = p
}

// NewServer returns an HTTP server for proxied traffic on addr: HTTP/1.1
// and h2c, with bounds fit for holding many requests.
func NewServer(addr string, h http.Handler) *http.Server {
	srv := &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: 30 * time.Second,
		MaxHeaderBytes:    serverMaxHeaderBytes,
		IdleTimeout:       serverIdleTimeout,
		HTTP2:             &http.HTTP2Config{MaxReceiveBufferPerStream: serverMaxReceiveBufferPerStream},
	}
	ConfigureServer(srv)
	return srv
}
