package traffic

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"golang.org/x/net/websocket"
)

// What the app pods serve besides the echo, for the protocol tests. Like
// the echo, each server listens once in the node namespace and answers for
// every live pod IP.
const (
	// grpcEchoPort serves h2c: unary gRPC calls that echo their message,
	// and the JSON echo for any other request.
	grpcEchoPort = 9091
	// servedByHeader names the pod that answered, where the answer is not
	// the JSON echo.
	servedByHeader = "X-Served-By"
)

// grpcEchoServicePort is the Service port the protocol tests add to web for
// grpcEchoPort. It declares h2c, as gRPC Services do, so the resolver
// forwards over HTTP/2.
var grpcEchoServicePort = corev1.ServicePort{
	Name: "grpc-echo", Port: grpcEchoPort, TargetPort: intstr.FromInt32(grpcEchoPort),
	AppProtocol: ptr.To("kubernetes.io/h2c"),
}

// appHandler is the app pods' HTTP server on appPort:
//   - any path: the JSON echo (echoHandler);
//   - POST /stream?bytes=N&seed=S: reads the whole upload, says what it
//     received in headers, then streams N bytes of stream(S);
//   - GET /ws: a WebSocket that sends the serving pod's IP, then echoes
//     every message with its frame type.
func appHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/", echoHandler)
	mux.HandleFunc("POST /stream", streamHandler)
	mux.Handle("GET /ws", websocket.Handler(websocketEcho))
	return mux
}

// servingPod is the pod IP a request arrived on.
func servingPod(r *http.Request) string {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return ""
	}
	host, _, _ := net.SplitHostPort(local.String())
	return host
}

// stream is the pseudo-random byte stream seed names. The client pod and
// the app both make it, so a large body is checked end to end without
// being stored anywhere.
func stream(seed uint64) io.Reader {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	return rand.NewChaCha8(key)
}

// streamSHA256 is the SHA-256, in hex, of the first n bytes of stream(seed).
func streamSHA256(seed uint64, n int64) string {
	h := sha256.New()
	_, _ = io.Copy(h, io.LimitReader(stream(seed), n))
	return hex.EncodeToString(h.Sum(nil))
}

// Headers of a /stream answer.
const (
	uploadBytesHeader  = "X-Upload-Bytes"
	uploadSHA256Header = "X-Upload-SHA256"
)

func streamHandler(w http.ResponseWriter, r *http.Request) {
	size, err := strconv.ParseInt(r.URL.Query().Get("bytes"), 10, 64)
	seed, serr := strconv.ParseUint(r.URL.Query().Get("seed"), 10, 64)
	if err != nil || serr != nil || size < 0 {
		http.Error(w, "want ?bytes=<n>&seed=<n>", http.StatusBadRequest)
		return
	}
	h := sha256.New()
	n, err := io.Copy(h, r.Body)
	if err != nil {
		http.Error(w, fmt.Sprintf("reading the upload after %d bytes: %v", n, err), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set(servedByHeader, servingPod(r))
	w.Header().Set(uploadBytesHeader, strconv.FormatInt(n, 10))
	w.Header().Set(uploadSHA256Header, hex.EncodeToString(h.Sum(nil)))
	_, _ = io.Copy(w, io.LimitReader(stream(seed), size))
}

// wsMessage is one WebSocket message with its frame type.
type wsMessage struct {
	Data []byte
	Type byte // websocket.TextFrame or websocket.BinaryFrame
}

// wsCodec sends and receives wsMessages, so an echo answers text with text
// and binary with binary, and the client can check both.
var wsCodec = websocket.Codec{
	Marshal: func(v any) ([]byte, byte, error) {
		m := v.(wsMessage)
		return m.Data, m.Type, nil
	},
	Unmarshal: func(data []byte, typ byte, v any) error {
		*v.(*wsMessage) = wsMessage{Data: data, Type: typ}
		return nil
	},
}

func websocketEcho(ws *websocket.Conn) {
	_ = ws.SetDeadline(time.Now().Add(time.Minute))
	if err := websocket.Message.Send(ws, servingPod(ws.Request())); err != nil {
		return
	}
	for {
		var m wsMessage
		if err := wsCodec.Receive(ws, &m); err != nil {
			return
		}
		if err := wsCodec.Send(ws, m); err != nil {
			return
		}
	}
}

// h2cEcho is the h2c port's server: a unary gRPC call gets grpcUnaryEcho,
// any other HTTP/2 request the JSON echo (the soak's h2c cold starts).
func h2cEcho(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor == 2 && r.Header.Get("Content-Type") != "application/grpc" {
		echoHandler(w, r)
		return
	}
	grpcUnaryEcho(w, r)
}

// grpcUnaryEcho answers a unary gRPC call with its own message, and ends
// with grpc-status 0 and the serving pod in the trailers.
func grpcUnaryEcho(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor != 2 || r.Header.Get("Content-Type") != "application/grpc" {
		http.Error(w, "want gRPC over HTTP/2", http.StatusUnsupportedMediaType)
		return
	}
	var prefix [5]byte
	if _, err := io.ReadFull(r.Body, prefix[:]); err != nil {
		http.Error(w, "no gRPC message", http.StatusBadRequest)
		return
	}
	msg := make([]byte, binary.BigEndian.Uint32(prefix[1:]))
	if _, err := io.ReadFull(r.Body, msg); err != nil {
		http.Error(w, "short gRPC message", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/grpc")
	w.Header().Set("Trailer", "Grpc-Status, "+servedByHeader)
	_, _ = w.Write(grpcFrame(msg))
	w.Header().Set("Grpc-Status", "0")
	w.Header().Set(servedByHeader, servingPod(r))
}

var (
	grpcEchoOnce sync.Once
	grpcEchoErr  error
)

// startGRPCEcho starts the gRPC echo once per bed.
func startGRPCEcho(t testing.TB, b *bed) {
	t.Helper()
	grpcEchoOnce.Do(func() {
		ln, err := b.Network.Listen("tcp", fmt.Sprintf("0.0.0.0:%d", grpcEchoPort))
		if err != nil {
			grpcEchoErr = err
			return
		}
		srv := &http.Server{Handler: http.HandlerFunc(h2cEcho), ReadHeaderTimeout: 10 * time.Second, Protocols: new(http.Protocols)}
		srv.Protocols.SetUnencryptedHTTP2(true)
		go func() { _ = srv.Serve(ln) }()
	})
	if grpcEchoErr != nil {
		t.Fatal(grpcEchoErr)
	}
}

// appRequests counts, per pod IP, the requests the app pods answered (all
// of them share one server in the node namespace).
var appRequests sync.Map // pod IP -> *atomic.Int64

// appRequestsMetric is the counter every app pod exposes on GET /metrics,
// as an instrumented app does, for Prometheus's kubernetes-pods job.
const appRequestsMetric = "http_requests_total"

// countRequests counts every request but a scrape by the pod IP it
// arrived on, and answers GET /metrics with that pod's own count, so that
// each pod's scrape sees its own counter.
func countRequests(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, _ := appRequests.LoadOrStore(servingPod(r), new(atomic.Int64))
		n := v.(*atomic.Int64)
		if r.Method == http.MethodGet && r.URL.Path == "/metrics" {
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			fmt.Fprintf(w, "# HELP %s Requests this pod answered.\n# TYPE %[1]s counter\n%[1]s %d\n", appRequestsMetric, n.Load())
			return
		}
		n.Add(1)
		h.ServeHTTP(w, r)
	})
}
