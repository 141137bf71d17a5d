package traffic

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"golang.org/x/net/websocket"

	"github.com/elasti-dev/elasti/test/localcluster/realnet"
)

// Client-pod programs (realnet.Program) for exchanges a realnet.Request
// cannot describe. They run inside a client pod, so they resolve names and
// connect exactly as a pod in the test's namespace would.
const (
	streamProgram    = "stream"
	websocketProgram = "websocket"
)

func init() {
	realnet.RegisterProgram(streamProgram, runStream)
	realnet.RegisterProgram(websocketProgram, runWebSocket)
}

// streamCall asks for one POST to the app's /stream: an upload of Upload
// bytes of stream(Seed), answered with Download bytes of stream(Seed+1).
type streamCall struct {
	URL      string `json:"url"`            // http://<name or IP>[:port]/stream
	Host     string `json:"host,omitempty"` // overrides the Host header
	Upload   int64  `json:"upload"`
	Download int64  `json:"download"`
	Seed     uint64 `json:"seed"`
}

// streamResult is what the client saw of the exchange.
type streamResult struct {
	Status int         `json:"status"`
	Header http.Header `json:"header"`
	// Body is the start of an answer that is not 200.
	Body           string        `json:"body,omitempty"`
	Sent           int64         `json:"sent"`
	SentSHA256     string        `json:"sentSHA256"`
	Received       int64         `json:"received"`
	ReceivedSHA256 string        `json:"receivedSHA256"`
	Duration       time.Duration `json:"duration"`
}

// runStream sends the upload as a body of unknown length, so it goes
// chunked and the resolver streams it instead of reading it first (it only
// reads small bodies of known length while it holds a request), and reads
// the whole answer, hashing both sides as they pass.
func runStream(ctx context.Context, arg json.RawMessage) (any, error) {
	var c streamCall
	if err := json.Unmarshal(arg, &c); err != nil {
		return nil, err
	}
	start := time.Now()
	sent := sha256.New()
	var sentBytes countingWriter
	// The struct hides the reader's type from http.NewRequest, which would
	// otherwise set a length.
	body := struct{ io.Reader }{io.TeeReader(io.LimitReader(stream(c.Seed), c.Upload), io.MultiWriter(sent, &sentBytes))}
	url := fmt.Sprintf("%s?bytes=%d&seed=%d", c.URL, c.Download, c.Seed+1)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, body)
	if err != nil {
		return nil, err
	}
	if c.Host != "" {
		req.Host = c.Host
	}
	client := &http.Client{Transport: &http.Transport{Proxy: nil}}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("after sending %d bytes: %w", sentBytes, err)
	}
	defer resp.Body.Close()
	res := streamResult{Status: resp.StatusCode, Header: resp.Header, Sent: int64(sentBytes), SentSHA256: hex.EncodeToString(sent.Sum(nil))}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		res.Body = string(b)
		return res, nil
	}
	received := sha256.New()
	if res.Received, err = io.Copy(received, resp.Body); err != nil {
		return nil, fmt.Errorf("reading the answer after %d bytes: %w", res.Received, err)
	}
	res.ReceivedSHA256 = hex.EncodeToString(received.Sum(nil))
	res.Duration = time.Since(start)
	return res, nil
}

type countingWriter int64

func (w *countingWriter) Write(p []byte) (int, error) {
	*w += countingWriter(len(p))
	return len(p), nil
}

// websocketCall asks for a WebSocket conversation with the app's /ws.
type websocketCall struct {
	Addr string `json:"addr"` // host:port to connect to: a DNS name or a ClusterIP
	Host string `json:"host"` // the Host of the handshake: the Service's name
}

// websocketResult is what the conversation showed.
type websocketResult struct {
	ServedBy string `json:"servedBy"`
	Echoed   int    `json:"echoed"` // messages that came back intact
}

// websocketMessages are sent in turn, each answered before the next: text
// and binary, small and larger than one TCP window.
func websocketMessages() []wsMessage {
	large := make([]byte, 1<<20)
	_, _ = io.ReadFull(stream(42), large)
	return []wsMessage{
		{Data: []byte("hello"), Type: websocket.TextFrame},
		{Data: large, Type: websocket.BinaryFrame},
		{Data: []byte(strings.Repeat("x", 100<<10)), Type: websocket.TextFrame},
		{Data: []byte("bye"), Type: websocket.TextFrame},
	}
}

// runWebSocket connects to Addr, makes the WebSocket handshake for
// ws://<Host>/ws, reads the pod's greeting and has every message echoed.
func runWebSocket(ctx context.Context, arg json.RawMessage) (any, error) {
	var c websocketCall
	if err := json.Unmarshal(arg, &c); err != nil {
		return nil, err
	}
	config, err := websocket.NewConfig("ws://"+c.Host+"/ws", "http://client.test/")
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", c.Addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	ws, err := websocket.NewClient(config, conn)
	if err != nil {
		return nil, fmt.Errorf("handshake: %w", err)
	}
	var res websocketResult
	if err := websocket.Message.Receive(ws, &res.ServedBy); err != nil {
		return nil, fmt.Errorf("the pod's greeting: %w", err)
	}
	for i, m := range websocketMessages() {
		if err := wsCodec.Send(ws, m); err != nil {
			return nil, fmt.Errorf("message %d: send: %w", i, err)
		}
		var got wsMessage
		if err := wsCodec.Receive(ws, &got); err != nil {
			return nil, fmt.Errorf("message %d: receive: %w", i, err)
		}
		if got.Type != m.Type || !bytes.Equal(got.Data, m.Data) {
			return nil, fmt.Errorf("message %d (%d bytes, type %d) came back as %d bytes of type %d", i, len(m.Data), m.Type, len(got.Data), got.Type)
		}
		res.Echoed++
	}
	return res, nil
}
