package forward

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"

	"github.com/elasti-dev/elasti/pkg/resolver/admission"
	"github.com/elasti-dev/elasti/pkg/resolver/answer"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
)

// Config are forwarding's settings, the resolver's of the same names.
type Config struct {
	// ColdStartHeader names the response header that tells a client how
	// long its request was held; empty sends none.
	ColdStartHeader string
	// DialTimeout bounds a TCP connect to a pod.
	DialTimeout time.Duration
	// ConnectPatience bounds the connect rounds of a request or a
	// connection; 0 means DefaultConnectPatience. Tests shorten it.
	ConnectPatience time.Duration
	// SpliceIdleTimeout closes a spliced TCP connection that moved no
	// byte either way for this long (see splice).
	SpliceIdleTimeout time.Duration
}

// Forwarder is the forward layer: it reverse-proxies a request to a
// Ready pod, HTTP/1.1 with keep-alive or h2c for gRPC and HTTP/2
// clients, streaming both ways (Serve), and splices a TCP connection to
// one (Splice), both through the one connect strategy (connect.go).
type Forwarder struct {
	h1, h2 *http.Transport
	// coldStartHeader is Config.ColdStartHeader.
	coldStartHeader string
	proxy           *httputil.ReverseProxy
	// conn picks the endpoints and runs the connect rounds.
	conn            *connector
	connectPatience time.Duration
	spliceIdle      time.Duration
	metrics         Metrics
	logger          klog.Logger
}

// forwardInfo travels in the outbound request's context from Serve to
// the transport.
type forwardInfo struct {
	svc   clusterview.ServiceRef
	port  string   // the Service port, as given to EndpointSource.Lookup
	addrs []string // in try order
	h2c   bool
	// held is how long the request waited for the Service to wake.
	held time.Duration
	// source is where addrs came from (Backends.source), for log lines.
	source string
	// gone is set when the connect rounds ended with ErrEndpointsGone:
	// nothing was written, and Serve returns it.
	gone bool
}

type forwardInfoKey struct{}

// dialError marks a failure to connect, the one error a request can be
// retried on without having sent anything.
type dialError struct{ err error }

func (e *dialError) Error() string { return "dial: " + e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// New returns the Forwarder to the pods of eps, counted in metrics. dial
// connects to a pod; nil means a net.Dialer with cfg.DialTimeout.
func New(cfg Config, eps clusterview.EndpointSource, dial DialFunc, metrics Metrics, logger klog.Logger) *Forwarder {
	if dial == nil {
		dial = (&net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second}).DialContext
	}
	conn := newConnector(eps, countFailures(dial, metrics.ConnectFailures), cfg.DialTimeout, logger)
	wrapped := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialPatiently(ctx, conn.dial, addr, conn.dialTimeout)
		if err != nil {
			return nil, &dialError{err}
		}
		return c, nil
	}
	newTransport := func() *http.Transport {
		return &http.Transport{
			Proxy:       nil, // never an HTTP proxy from the environment
			DialContext: wrapped,
			// Pass Accept-Encoding and bodies through untouched.
			DisableCompression:    true,
			MaxIdleConns:          1024,
			MaxIdleConnsPerHost:   64,
			IdleConnTimeout:       90 * time.Second,
			ExpectContinueTimeout: time.Second,
		}
	}
	f := &Forwarder{h1: newTransport(), h2: newTransport(), coldStartHeader: cfg.ColdStartHeader, conn: conn,
		connectPatience: cmp.Or(cfg.ConnectPatience, DefaultConnectPatience), spliceIdle: cfg.SpliceIdleTimeout,
		metrics: metrics, logger: logger}
	f.h1.Protocols = new(http.Protocols)
	f.h1.Protocols.SetHTTP1(true)
	// HTTP/2 with prior knowledge over cleartext, as gRPC servers expect.
	f.h2.Protocols = new(http.Protocols)
	f.h2.Protocols.SetUnencryptedHTTP2(true)

	f.proxy = &httputil.ReverseProxy{
		Rewrite:        rewrite,
		Transport:      f,
		FlushInterval:  -1,
		ErrorLog:       log.New(logWriter{logger}, "", 0),
		ModifyResponse: f.modifyResponse,
		ErrorHandler:   f.errorHandler,
	}
	return f
}

// Serve forwards req to one of b's endpoints, which Lookup(svc, port)
// returned. held is how long req was held for the Service to wake, 0 if it
// was not. It answers req itself, but when the Service's Ready endpoints
// all went away before any accepted: then it writes nothing and returns
// ErrEndpointsGone, and the caller holds req.
func (f *Forwarder) Serve(w http.ResponseWriter, req *http.Request, svc clusterview.ServiceRef, port string, b clusterview.Backends, held time.Duration) error {
	upgrade := req.Header.Get("Upgrade") != ""
	info := &forwardInfo{
		svc:   svc,
		port:  port,
		addrs: f.conn.order(svc, b.Addrs),
		// WebSocket and other upgrades exist only in HTTP/1.1.
		h2c:    !upgrade && (b.H2C || req.ProtoMajor == 2 || isGRPC(req)),
		held:   held,
		source: b.Source(),
	}
	if req.ProtoMajor == 1 && !upgrade {
		// Let a streaming backend answer while the client still sends.
		_ = http.NewResponseController(w).EnableFullDuplex()
	}
	f.logger.V(4).Info("Forwarding request", "service", svc.KRef(), "method", req.Method, "h2c", info.h2c, "endpoints", len(b.Addrs))
	f.proxy.ServeHTTP(w, req.WithContext(context.WithValue(req.Context(), forwardInfoKey{}, info)))
	if info.gone {
		return ErrEndpointsGone
	}
	return nil
}

func isGRPC(req *http.Request) bool {
	ct := req.Header.Get("Content-Type")
	return ct == "application/grpc" || strings.HasPrefix(ct, "application/grpc+") || strings.HasPrefix(ct, "application/grpc;")
}

// rewrite keeps method, path, query, Host and headers, and appends to the
// X-Forwarded-* headers instead of replacing what an ingress set.
func rewrite(pr *httputil.ProxyRequest) {
	info := pr.In.Context().Value(forwardInfoKey{}).(*forwardInfo)
	pr.Out.URL.Scheme = "http"
	if len(info.addrs) > 0 {
		pr.Out.URL.Host = info.addrs[0] // the transport sets it per attempt
	}
	pr.Out.Host = pr.In.Host
	if prior, ok := pr.In.Header["X-Forwarded-For"]; ok {
		pr.Out.Header["X-Forwarded-For"] = prior
	}
	pr.SetXForwarded()
	for _, h := range []string{"X-Forwarded-Proto", "X-Forwarded-Host"} {
		if v := pr.In.Header.Values(h); len(v) > 0 {
			pr.Out.Header[h] = v
		}
	}
}

// RoundTrip is the transport of the reverse proxy, which alone calls
// it: it sends the request through the connect rounds (see
// connector.rounds), for up to the connect patience (see
// DefaultConnectPatience). A request is sent again only after a failure to
// connect, and only when none of its body was read or the body can be
// read again (GetBody, set for bodies buffered while held).
func (f *Forwarder) RoundTrip(req *http.Request) (*http.Response, error) {
	info := req.Context().Value(forwardInfoKey{}).(*forwardInfo)
	rt := f.h1
	if info.h2c {
		rt = f.h2
	}
	var body *trackedBody
	if req.Body != nil && req.Body != http.NoBody {
		body = &trackedBody{rc: req.Body}
	}
	var resp *http.Response
	var failed error
	err := f.conn.rounds(req.Context(), info.svc, info.port, info.addrs, f.connectPatience, func(addr string) (bool, error) {
		if failed != nil && body != nil && body.read.Load() {
			// The failed attempt read some of the body. A body buffered
			// while the request was held can be sent again from the start.
			rc, gerr := req.GetBody()
			if gerr != nil {
				return false, failed
			}
			body = &trackedBody{rc: rc}
		}
		out := req.WithContext(req.Context()) // shallow copy
		u := *req.URL
		u.Host = addr
		out.URL = &u
		if body != nil {
			out.Body = body
		}
		var err error
		if resp, err = rt.RoundTrip(out); err == nil {
			return false, nil
		}
		failed = err
		var de *dialError
		retry := errors.As(err, &de) && (body == nil || !body.read.Load() || req.GetBody != nil) && req.Context().Err() == nil
		return retry, err
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// trackedBody records whether the transport started reading the body, and
// keeps the transport from closing it between attempts; the server closes
// the inbound body when the handler returns.
type trackedBody struct {
	rc   io.ReadCloser
	read atomic.Bool
}

func (b *trackedBody) Read(p []byte) (int, error) {
	b.read.Store(true)
	return b.rc.Read(p)
}

func (b *trackedBody) Close() error { return nil }

func (f *Forwarder) modifyResponse(resp *http.Response) error {
	f.metrics.Proxied.WithLabelValues(codeClass(resp.StatusCode)).Inc()
	if info, ok := resp.Request.Context().Value(forwardInfoKey{}).(*forwardInfo); ok && info.held > 0 && f.coldStartHeader != "" {
		resp.Header.Set(f.coldStartHeader, info.held.Round(time.Millisecond).String())
	}
	if len(resp.Trailer) > 0 && resp.Request != nil && resp.Request.ProtoMajor < 2 {
		// An h2 backend may announce trailers and still send a length. An
		// HTTP/1.1 client only gets trailers in a chunked body, and the
		// server only chunks without a Content-Length.
		resp.Header.Del("Content-Length")
		resp.ContentLength = -1
	}
	return nil
}

func (f *Forwarder) errorHandler(w http.ResponseWriter, req *http.Request, err error) {
	info := req.Context().Value(forwardInfoKey{}).(*forwardInfo)
	logger := f.logger.WithValues("service", info.svc.KRef())
	if req.Context().Err() != nil {
		logger.V(4).Info("Client went away while forwarding", "err", err)
		return
	}
	if errors.Is(err, ErrEndpointsGone) {
		logger.V(2).Info("The service's Ready endpoints went away before one accepted; holding the request", "source", info.source, "err", err)
		f.metrics.EndpointsGone.WithLabelValues(admission.ProtocolHTTP).Inc()
		info.gone = true
		return
	}
	f.metrics.Proxied.WithLabelValues("5xx").Inc()
	var de *dialError
	if errors.As(err, &de) {
		// At the default level: a held request that ends in a 502 is a
		// failed cold start, and its line says which addresses, from
		// which source, did not answer.
		logger.Info("No endpoint accepted the connection", "source", info.source, "err", err)
		answer.Error(w, http.StatusBadGateway, fmt.Sprintf("could not connect to a ready pod of service %s", info.svc))
		return
	}
	logger.V(2).Info("Forwarding failed", "err", err)
	answer.Error(w, http.StatusBadGateway, fmt.Sprintf("error while forwarding to service %s", info.svc))
}

// CloseIdle closes the idle connections to pods.
func (f *Forwarder) CloseIdle() {
	f.h1.CloseIdleConnections()
	f.h2.CloseIdleConnections()
}

// logWriter sends httputil.ReverseProxy's own log lines to klog.
type logWriter struct{ logger klog.Logger }

func (l logWriter) Write(p []byte) (int, error) {
	l.logger.V(2).Info(strings.TrimSpace(string(p)))
	return len(p), nil
}
