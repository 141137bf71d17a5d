package command

import (
	"net"
	"net/http"
	"time"

	"github.com/elasti-dev/elasti/pkg/connlimit"
)

// MaxHeaderBytes bounds request headers on a binary's own servers: probes,
// scrapes, scale requests and route reads send well under 1 KiB; Go's
// default is 1 MiB.
const MaxHeaderBytes = 16 << 10

// The connections a binary's own server keeps open at once, in all and
// from one client address. Its clients are the kubelet's probes,
// Prometheus and, on the operator's scale endpoint, the resolver pods,
// which keep a few keep-alive connections each; a pod that opens more
// cannot take every slot, and the kubelet's probes still connect.
const (
	MaxConnections          = 256
	MaxConnectionsPerSource = 64
)

// WriteTimeout is the write timeout of a binary's own servers unless the
// caller needs longer: a response not read by then is dropped, with its
// connection, so a client that sends requests and never reads the answers
// cannot keep a handler and its buffers forever.
const WriteTimeout = 30 * time.Second

// Server returns an http.Server for a binary's own endpoints, not proxied
// traffic, with every phase of a connection bounded, so that a client that
// opens connections and sends nothing, trickles, or never reads its
// answer holds each for seconds, not forever. writeTimeout bounds the
// time from the end of a request's headers to the end of its answer: a
// scale request waits for its scale call, and --profiling's CPU profile
// streams for as long as it was asked to, so those servers pass more than
// WriteTimeout. Serve it on Listen's listener, which caps connections.
func Server(addr string, h http.Handler, writeTimeout time.Duration) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		MaxHeaderBytes:    MaxHeaderBytes,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       2 * time.Minute,
	}
}

// Limit returns ln with its connections bounded to MaxConnections, and
// MaxConnectionsPerSource from one client address; one more is closed as
// soon as it is accepted (see pkg/connlimit).
func Limit(ln net.Listener) net.Listener {
	return connlimit.New(MaxConnections, MaxConnectionsPerSource, nil, nil).Listener(ln)
}
