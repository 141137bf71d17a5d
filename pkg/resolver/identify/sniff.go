package identify

import (
	"bufio"
	"net"
	"strings"
	"time"
)

// SniffTimeout bounds the wait for a client's first bytes. Protocols where
// the server speaks first send nothing; they are spliced after it.
const SniffTimeout = 250 * time.Millisecond

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
// SniffTimeout; the bytes stay in br.
func sniffHTTP(c net.Conn, br *bufio.Reader) bool {
	_ = c.SetReadDeadline(time.Now().Add(SniffTimeout))
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
