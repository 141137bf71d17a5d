package resolver

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/elasti-dev/elasti/pkg/resolver/internal/resolvertest"
)

// serveResolver serves h with the server the command runs (newServer) on
// a loopback port, and returns its address.
func serveResolver(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(ln.Addr().String(), h, DefaultConfig())
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// rawStatus sends head as an HTTP/1.1 request and returns the status line.
func rawStatus(t *testing.T, addr, head string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	// The server may answer and close before reading everything.
	go func() { _, _ = io.WriteString(c, head) }()
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the status line: %v", err)
	}
	return strings.TrimSpace(line)
}

// Headers are bounded before any handler runs, on the proxy port and the
// resolver ports alike (both use NewServer): one huge header, or very many
// small ones, get 431 and the handler never sees them.
func TestOversizedHeadersGet431(t *testing.T) {
	var reached atomic.Int32
	addr := serveResolver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
	}))
	request := func(headers string) string {
		return "GET / HTTP/1.1\r\nHost: web.team\r\n" + headers + "Connection: close\r\n\r\n"
	}
	var many strings.Builder
	for i := range 10000 {
		fmt.Fprintf(&many, "X-H%d: v\r\n", i)
	}
	for name, head := range map[string]string{
		"one 128 KiB header":  request("X-Big: " + strings.Repeat("a", 128<<10) + "\r\n"),
		"10000 small headers": request(many.String()),
	} {
		if got := rawStatus(t, addr, head); !strings.HasPrefix(got, "HTTP/1.1 431 ") {
			t.Errorf("%s: %q, want 431", name, got)
		}
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("the handler saw %d oversized requests", n)
	}
	// Just under the bound still reaches the handler.
	if got := rawStatus(t, addr, request("X-Big: "+strings.Repeat("a", serverMaxHeaderBytes-1024)+"\r\n")); got != "HTTP/1.1 200 OK" {
		t.Errorf("a %d-byte header: %q, want 200", serverMaxHeaderBytes-1024, got)
	}
	if srv := (&Resolver{}).newPortServer(nil); srv.MaxHeaderBytes != serverMaxHeaderBytes {
		t.Errorf("resolver ports' server MaxHeaderBytes = %d, want %d", srv.MaxHeaderBytes, serverMaxHeaderBytes)
	}
}

// heldPost starts a POST of body to the test Service and returns the
// answer's channel.
func heldPost(t *testing.T, e *testEnv, client *http.Client, body io.Reader, length int64) <-chan string {
	t.Helper()
	req := e.request(t, context.Background(), "POST", "/upload", body)
	req.ContentLength = length
	done := make(chan string, 1)
	go func() { done <- fetch(client, req) }()
	return done
}

// A held body up to MaxBufferedBody is read into memory and counted; a
// larger one, or one past the shared budget, is not buffered at all. Every
// one reaches the pod intact once it is Ready.
func TestHeldBodiesAreBufferedOnlyWithinTheirBounds(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	cfg := testConfig()
	cfg.MaxBufferedBody = 4 << 10
	cfg.MaxBufferedBodies = 6 << 10 // room for one buffered body, not two
	e := newEnv(t, cfg)
	e.backend(t, "10.244.0.1:8080", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%d %x", len(b), sha256.Sum256(b))
	}))
	client := newClient(t)
	want := func(b []byte) string { return fmt.Sprintf("200 %d %x", len(b), sha256.Sum256(b)) }

	small := bytes.Repeat([]byte("s"), 4<<10)
	first := heldPost(t, e, client, bytes.NewReader(small), int64(len(small)))
	resolvertest.Eventually(t, 5*time.Second, "the small body buffered", func() bool { return e.r.buffered.Load() == int64(len(small)) })

	// Over the budget: held, but streamed.
	second := heldPost(t, e, client, bytes.NewReader(small), int64(len(small)))
	large := bytes.Repeat([]byte("L"), 64<<10)
	third := heldPost(t, e, client, bytes.NewReader(large), int64(len(large)))
	resolvertest.Eventually(t, 5*time.Second, "three held", func() bool { return e.r.holds.Held(testSvc) == 3 })
	time.Sleep(50 * time.Millisecond) // room for a wrong reservation
	if got := e.r.buffered.Load(); got != int64(len(small)) {
		t.Fatalf("%d bytes buffered with one small body within budget, want %d", got, len(small))
	}

	e.eps.Set(testSvc, "10.244.0.1:8080")
	for name, c := range map[string]struct {
		done <-chan string
		body []byte
	}{"buffered": {first, small}, "over budget": {second, small}, "large": {third, large}} {
		if got := <-c.done; got != want(c.body) {
			t.Errorf("%s body: pod answered %q, want %q", name, got, want(c.body))
		}
	}
	// A body's charge is released when its handler returns, which can be
	// a moment after the client has the whole answer (seen once under load).
	resolvertest.Eventually(t, 5*time.Second, "every buffered byte released", func() bool { return e.r.buffered.Load() == 0 })
}

// An HTTP/2 client cannot push more of a held body into the resolver's
// memory than one stream's flow-control window, however much it sends; the
// body then streams to the pod in full.
func TestHeldH2CBodyIsBoundedByTheStreamWindow(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	e := newEnv(t, testConfig())
	backend := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		fmt.Fprint(w, n)
	}))
	ConfigureServer(backend.Config) // an HTTP/2 request goes on as h2c
	backend.Start()
	t.Cleanup(func() { backend.CloseClientConnections(); backend.Close() })
	e.net.route("10.244.0.1:8080", backend.Listener.Addr().String())
	addr := serveResolver(t, e.r)
	h2 := &http.Transport{Proxy: nil, Protocols: new(http.Protocols)}
	h2.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(h2.CloseIdleConnections)

	const size = 4 << 20
	var sent atomic.Int64
	pr, pw := io.Pipe()
	go func() {
		chunk := make([]byte, 1<<10)
		for sent.Load() < size {
			if _, err := pw.Write(chunk); err != nil {
				return
			}
			sent.Add(int64(len(chunk)))
		}
		_ = pw.Close()
	}()
	req, err := http.NewRequest("POST", "http://"+addr+"/upload", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = testHost
	done := make(chan string, 1)
	go func() { done <- fetch(&http.Client{Transport: h2, Timeout: 15 * time.Second}, req) }()

	resolvertest.Eventually(t, 5*time.Second, "the request held", func() bool { return e.r.holds.Held(testSvc) == 1 })
	// Wait for the upload to stall on flow control.
	for last := int64(-1); last != sent.Load(); {
		last = sent.Load()
		time.Sleep(200 * time.Millisecond)
	}
	// The window, plus what the client transport holds itself.
	t.Logf("the client sent %d bytes of the held body before flow control stopped it", sent.Load())
	if got := sent.Load(); got > 2*serverMaxReceiveBufferPerStream {
		t.Errorf("the client got %d bytes of a held body out, want at most %d", got, 2*serverMaxReceiveBufferPerStream)
	}
	e.eps.Set(testSvc, "10.244.0.1:8080")
	if got := <-done; got != fmt.Sprint("200 ", size) {
		t.Fatalf("pod answered %q, want it to get all %d bytes", got, size)
	}
}
