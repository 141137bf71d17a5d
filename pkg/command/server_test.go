package command

import (
	"net/http"
	"testing"
)

// Every phase of a connection to a binary's own servers is bounded: a
// client that connects and stays silent, trickles a request, or keeps an
// idle connection open is cut off (Go's server enforces the timeouts).
func TestServerBoundsEveryPhase(t *testing.T) {
	srv := Server(":0", http.NotFoundHandler(), WriteTimeout)
	if srv.ReadHeaderTimeout <= 0 || srv.ReadTimeout <= 0 || srv.WriteTimeout <= 0 || srv.IdleTimeout <= 0 || srv.MaxHeaderBytes != MaxHeaderBytes {
		t.Fatalf("ReadHeaderTimeout %v, ReadTimeout %v, IdleTimeout %v, MaxHeaderBytes %d; want all set",
			srv.ReadHeaderTimeout, srv.ReadTimeout, srv.IdleTimeout, srv.MaxHeaderBytes)
	}
}
