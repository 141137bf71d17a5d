package e2e

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/elasti-dev/elasti/pkg/localcluster/podnet"
)

// Pod ports of the test apps. One server per port listens on 0.0.0.0 inside
// the pod network, so it answers on every live pod IP and on no other.
const (
	httpPort = 8080
	grpcPort = 9090
)

// echo is what /echo answers: what the backend saw.
type echo struct {
	Method     string      `json:"method"`
	Path       string      `json:"path"`
	Query      string      `json:"query"`
	Header     http.Header `json:"header"`
	BodySHA256 string      `json:"bodySHA256"`
	BodyBytes  int64       `json:"bodyBytes"`
	ServedBy   string      `json:"servedBy"`
}

func startBackends(n *podnet.Network) error {
	web, err := n.Listen("tcp", fmt.Sprintf("0.0.0.0:%d", httpPort))
	if err != nil {
		return err
	}
	grpcLn, err := n.Listen("tcp", fmt.Sprintf("0.0.0.0:%d", grpcPort))
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/ws", websocketEcho)
	mux.HandleFunc("/download", download)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		nBytes, _ := io.Copy(h, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(echo{
			Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header,
			BodySHA256: hex.EncodeToString(h.Sum(nil)), BodyBytes: nBytes, ServedBy: localIP(r),
		})
	})
	go func() { _ = (&http.Server{Handler: mux}).Serve(web) }()

	grpcSrv := &http.Server{Handler: http.HandlerFunc(grpcEcho), Protocols: new(http.Protocols)}
	grpcSrv.Protocols.SetUnencryptedHTTP2(true)
	go func() { _ = grpcSrv.Serve(grpcLn) }()
	return nil
}

func localIP(r *http.Request) string {
	if addr, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		host, _, _ := net.SplitHostPort(addr.String())
		return host
	}
	return ""
}

// download streams ?bytes= pseudo-random bytes from ?seed= and sends their
// SHA-256 as a trailer, so the client can check the body end to end.
func download(w http.ResponseWriter, r *http.Request) {
	size, _ := strconv.ParseInt(r.URL.Query().Get("bytes"), 10, 64)
	seed, _ := strconv.ParseUint(r.URL.Query().Get("seed"), 10, 64)
	w.Header().Set("Trailer", "X-Body-SHA256")
	w.Header().Set("Content-Type", "application/octet-stream")
	h := sha256.New()
	src := io.LimitReader(randomStream(seed), size)
	_, _ = io.Copy(io.MultiWriter(w, h), src)
	w.Header().Set("X-Body-SHA256", hex.EncodeToString(h.Sum(nil)))
}

// randomStream is a deterministic pseudo-random byte stream.
func randomStream(seed uint64) io.Reader {
	return &chachaReader{r: rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16)})}
}

type chachaReader struct{ r *rand.ChaCha8 }

func (c *chachaReader) Read(p []byte) (int, error) { return c.r.Read(p) }

// websocketEcho completes a WebSocket handshake and then echoes raw bytes:
// the resolver only has to carry the upgraded connection, not parse frames.
func websocketEcho(w http.ResponseWriter, r *http.Request) {
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		http.Error(w, "want a websocket upgrade", http.StatusBadRequest)
		return
	}
	key := r.Header.Get("Sec-WebSocket-Key")
	sum := sha1Sum(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11")
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	fmt.Fprintf(rw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n", sum)
	_ = rw.Flush()
	buf := make([]byte, 4096)
	for {
		n, err := rw.Read(buf)
		if n > 0 {
			_, _ = rw.Write(buf[:n])
			_ = rw.Flush()
		}
		if err != nil {
			return
		}
	}
}

// grpcEcho answers a unary gRPC call over h2c: it echoes the one
// length-prefixed message and ends with grpc-status 0 in the trailers.
func grpcEcho(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor != 2 || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
		http.Error(w, "want gRPC over HTTP/2", http.StatusBadRequest)
		return
	}
	br := bufio.NewReader(r.Body)
	var prefix [5]byte
	if _, err := io.ReadFull(br, prefix[:]); err != nil {
		w.Header().Set("Grpc-Status", "13")
		return
	}
	msg := make([]byte, binary.BigEndian.Uint32(prefix[1:]))
	if _, err := io.ReadFull(br, msg); err != nil {
		w.Header().Set("Grpc-Status", "13")
		return
	}
	w.Header().Set("Content-Type", "application/grpc")
	w.Header().Set("Trailer", "Grpc-Status, Grpc-Message, X-Served-By")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(prefix[:])
	_, _ = w.Write(msg)
	w.Header().Set("Grpc-Status", "0")
	w.Header().Set("Grpc-Message", "")
	w.Header().Set("X-Served-By", localIP(r))
}
