package command

import (
	"net/http"
	"time"
)

// MaxHeaderBytes bounds request headers on a binary's own servers: probes,
// scrapes, scale requests and route reads send well under 1 KiB; Go's
// default is 1 MiB.
const MaxHeaderBytes = 16 << 10

// Server returns an http.Server for a binary's own endpoints, not proxied
// traffic, with every phase of a connection bounded, so that a client that
// opens connections and sends nothing, or trickles, holds each for
// seconds, not forever. WriteTimeout stays unset: a scale request waits for
// its scale call, and --profiling's CPU profile streams for as long as it
// was asked to.
func Server(addr string, h http.Handler) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		MaxHeaderBytes:    MaxHeaderBytes,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
}
