package resolver

import (
	"net/http"

	"github.com/elasti-dev/elasti/pkg/resolver/forward"
)

// What a request or connection costs, in bytes, as admission charges it:
// the resolver counts, admission bounds.

// requestOverheadBytes is what every request in flight is charged besides
// its headers (requestBytes): the handler's goroutine stack, the parsed
// request, the response writer's buffer and, for HTTP/2, the stream's
// state. BenchmarkFilledBounds measures the true figure, with
// forwardOverheadBytes (KiB/stalled-stream in docs/benchmarks.md).
const requestOverheadBytes = 16 << 10

// forwardOverheadBytes is what a request is charged besides requestBytes
// while it is forwarded: the connection to the pod, its buffers and its
// two goroutines, and the deeper stack of the handler. A request held is
// not charged it until it is forwarded.
const forwardOverheadBytes = 20 << 10

// requestBytes is what an HTTP request in flight, held or not, is charged
// against Config.MaxRequestBytes while it is served: what heldRequestBytes
// counts, as if its body streamed, plus requestOverheadBytes. A body
// read into memory is charged on its own when it is (holdRequest).
func requestBytes(req *http.Request) int64 {
	return requestOverheadBytes + heldRequestBytes(req, false)
}

// heldRequestBytes is what a held HTTP request is charged against
// Config.MaxHeldBytes: its header names and values, its request
// target and its Host, the parts of a request the server keeps in memory
// while it is held whatever their size; and, for an HTTP/2 request whose
// body streams (buffered is false; see body.go), the stream's receive
// window, which the server fills with body it keeps in memory until the
// pod is Ready. The parsed form takes some more memory than the bytes
// counted; the worst case in config.go allows for that.
func heldRequestBytes(req *http.Request, buffered bool) int64 {
	n := int64(len(req.RequestURI) + len(req.Host))
	if req.RequestURI == "" && req.URL != nil {
		n += int64(len(req.URL.Path) + len(req.URL.RawQuery))
	}
	for k, vs := range req.Header {
		for _, v := range vs {
			n += int64(len(k) + len(v))
		}
	}
	if req.ProtoMajor == 2 && !buffered && req.Body != nil && req.Body != http.NoBody && req.ContentLength != 0 {
		n += serverMaxReceiveBufferPerStream
	}
	return n
}

// heldConnBytes is what a held TCP connection is charged: its read-ahead
// buffer, which holds its first bytes and which forward.WatchClientClose
// may fill while it waits.
func heldConnBytes(c *forward.PeekedConn) int64 { return int64(c.ReadAhead()) }
