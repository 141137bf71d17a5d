package resolver

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Body buffering, said once here.
//
// A held request's body is read into memory before it waits when it is
// of known length up to Config.MaxBufferedBody (64 KiB by default). Go's
// HTTP/1.1 server only notices that a client closed its connection once
// the handler has read the body to the end; left unread, the body of a
// held request would keep its slot until RequestTimeout after the client
// left. Reading it first lets the server watch the connection again, so
// a client that leaves frees its slot at once, and the in-memory copy
// lets the connect rounds resend it (GetBody) when connecting to the
// first pod fails.
//
// Larger bodies, and those of unknown length (chunked), are not
// buffered: they stay in the kernel's socket buffers (HTTP/2: at most
// serverMaxReceiveBufferPerStream per stream, charged on admission, see
// heldRequestBytes) and stream to the pod once it is Ready; a client that
// leaves while such a request is held is noticed only at RequestTimeout.
// All held bodies together take at most Config.MaxBufferedBodies (see
// reserveBuffer); past that, bodies stream as if they were large.

// bufferable reports whether hold may read req's body into memory before
// it waits.
func (r *Resolver) bufferable(req *http.Request) bool {
	return req.ContentLength > 0 && req.ContentLength <= r.cfg.MaxBufferedBody && req.Body != nil && req.Body != http.NoBody
}

// reserveBuffer takes n bytes of the held-body budget if they are free.
func (r *Resolver) reserveBuffer(n int64) bool {
	if r.buffered.Add(n) > r.cfg.MaxBufferedBodies {
		r.buffered.Add(-n)
		return false
	}
	return true
}

// bufferBody reads req's body, of known length, into memory by deadline
// and replaces it with a re-readable copy. An error means the client went
// away (or sent too slowly).
func bufferBody(w http.ResponseWriter, req *http.Request, deadline time.Time) error {
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(deadline) == nil {
		// Cleared right after the read: while the request is held the
		// server's background read watches the connection, and a deadline
		// expiring there would look like the client leaving.
		defer func() { _ = rc.SetReadDeadline(time.Time{}) }()
	}
	b, err := io.ReadAll(io.LimitReader(req.Body, req.ContentLength+1))
	if err != nil {
		return err
	}
	if int64(len(b)) != req.ContentLength {
		return fmt.Errorf("body has %d bytes, Content-Length says %d", len(b), req.ContentLength)
	}
	req.Body = io.NopCloser(bytes.NewReader(b))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	return nil
}
