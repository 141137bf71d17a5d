package resolver

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/elasti-dev/elasti/pkg/resolver/admission"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
	"github.com/elasti-dev/elasti/pkg/resolver/internal/resolvertest"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// serveProxy serves r as the command serves its proxy port (NewServer,
// LimitListener) on a loopback port until tb ends, and returns the address.
func serveProxy(t testing.TB, r *Resolver) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := r.NewServer("")
	go func() { _ = srv.Serve(r.LimitListener(ln)) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// h2cClient speaks HTTP/2 with prior knowledge, as gRPC clients do, from
// the local address src.
func h2cClient(t *testing.T, src string) *http.Client {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: time.Second}
	tr := &http.Transport{Proxy: nil, DialContext: d.DialContext, Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 15 * time.Second}
}

// stallingPod routes the fake pod address of svc to a loopback server
// that answers nothing until the test ends, and returns how many requests
// reached it.
func stallingPod(t *testing.T, e *testEnv, svc clusterview.ServiceRef, fake string) *atomic.Int32 {
	t.Helper()
	var reached atomic.Int32
	stop := make(chan struct{})
	// It speaks h2c too: an HTTP/2 request goes on as one.
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		reached.Add(1)
		select {
		case <-stop:
		case <-req.Context().Done():
		}
	}))
	ConfigureServer(s.Config)
	s.Start()
	t.Cleanup(func() { close(stop); s.CloseClientConnections(); s.Close() })
	e.net.route(fake, s.Listener.Addr().String())
	e.eps.Set(svc, fake)
	return &reached
}

// fillHeader makes every request of these tests charged about the same:
// requestOverheadBytes, forwardOverheadBytes (they are forwarded), this
// header and a few hundred bytes of the
// client's own.
var fillHeader = strings.Repeat("f", 32<<10)

const fillCharge = requestOverheadBytes + forwardOverheadBytes + 32<<10 // and < 1 KiB more

// Requests that are not held are charged too: HTTP/2 requests forwarded
// to a pod that never answers take the request budget, up to the last one
// it holds; one more is answered 503 with Retry-After, without reaching
// the pod, and a request answered gives its bytes back.
func TestAdversarialStalledRequestsAreChargedAtTheBoundary(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	const fits = 3
	cfg := testConfig()
	cfg.MaxRequestBytes = fits * (fillCharge + 1<<10)
	cfg.RetryAfter = 7 * time.Second
	e := newEnv(t, cfg)
	reached := stallingPod(t, e, testSvc, "10.0.0.1:80")
	addr := serveProxy(t, e.r)
	client := h2cClient(t, "127.0.0.1")
	send := func(ctx context.Context) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = testHost
		req.Header.Set("X-Fill", fillHeader)
		return client.Do(req)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for range fits {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if resp, err := send(ctx); err == nil {
				resp.Body.Close()
				t.Errorf("a stalled request was answered %d", resp.StatusCode)
			}
		}()
	}
	resolvertest.Eventually(t, 5*time.Second, "requests at the stalling pod", func() bool { return reached.Load() == fits })
	if charged, _ := e.r.admit.RequestUsage(); charged < fits*fillCharge || charged > cfg.MaxRequestBytes {
		t.Fatalf("%d stalled requests charged %d bytes, want between %d and %d", fits, charged, fits*fillCharge, cfg.MaxRequestBytes)
	}

	resp, err := send(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "7" {
		t.Fatalf("one past the request budget: %d Retry-After=%q %q, want 503 with Retry-After 7", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if got := reached.Load(); got != fits {
		t.Fatalf("%d requests reached the pod, want %d: the one past the budget was forwarded", got, fits)
	}
	if got := metricValue(t, e.r.metrics.Admission.Overflow.WithLabelValues(admission.ScopeRequests)); got != 1 {
		t.Errorf("requests overflow counter %v, want 1", got)
	}
	cancel()
	wg.Wait()
	resolvertest.Eventually(t, 5*time.Second, "the budget given back", func() bool {
		charged, namespaces := e.r.admit.RequestUsage()
		return charged == 0 && namespaces == 0
	})
}

// HTTP/2 streams are capped per connection to what a namespace's share of
// the request budget holds: the server advertises the cap, and a client
// that opens one stream more has it reset (REFUSED_STREAM or
// PROTOCOL_ERROR, RFC 9113 section 5.1.2) without it reaching the pod.
// Headers that HPACK's dynamic table amplifies are charged at their
// decoded size.
func TestAdversarialHTTP2StreamsPastTheCapAreRefused(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	const streams = 2
	cfg := testConfig()
	cfg.MaxRequestBytes = streams*maxRequestCharge + maxRequestCharge/2
	e := newEnv(t, cfg)
	if got := maxConcurrentStreams(e.r.cfg); got != streams {
		t.Fatalf("maxConcurrentStreams = %d, want %d", got, streams)
	}
	reached := stallingPod(t, e, testSvc, "10.0.0.1:80")
	addr := serveProxy(t, e.r)

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	// The server's SETTINGS advertise the cap.
	var advertised uint32
	for advertised == 0 {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if sf, ok := f.(*http2.SettingsFrame); ok && !sf.IsAck() {
			v, ok := sf.Value(http2.SettingMaxConcurrentStreams)
			if !ok {
				t.Fatal("the server advertises no SETTINGS_MAX_CONCURRENT_STREAMS")
			}
			advertised = v
			if err := fr.WriteSettingsAck(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if advertised != streams {
		t.Fatalf("SETTINGS_MAX_CONCURRENT_STREAMS %d, want %d", advertised, streams)
	}

	// Each request repeats one 4000-byte header 15 times: about 4 KB on
	// the wire, 60 KB decoded.
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	header := func() []byte {
		block.Reset()
		for _, f := range []hpack.HeaderField{{Name: ":method", Value: "GET"}, {Name: ":scheme", Value: "http"},
			{Name: ":authority", Value: testHost}, {Name: ":path", Value: "/"}} {
			_ = enc.WriteField(f)
		}
		for range 15 {
			_ = enc.WriteField(hpack.HeaderField{Name: "x-amp", Value: strings.Repeat("a", 4000)})
		}
		return bytes.Clone(block.Bytes())
	}
	wire := 0
	for i := range streams + 1 {
		b := header()
		wire += len(b)
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: b, EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
	}
	past := uint32(2*streams + 1)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("no reset of stream %d: %v", past, err)
		}
		if rst, ok := f.(*http2.RSTStreamFrame); ok {
			if rst.StreamID != past || (rst.ErrCode != http2.ErrCodeRefusedStream && rst.ErrCode != http2.ErrCodeProtocol) {
				t.Fatalf("RST_STREAM %d %v, want stream %d refused", rst.StreamID, rst.ErrCode, past)
			}
			break
		}
		if h, ok := f.(*http2.MetaHeadersFrame); ok {
			t.Fatalf("stream %d answered %v, want the streams within the cap held at the pod", h.StreamID, h.PseudoValue("status"))
		}
	}
	resolvertest.Eventually(t, 5*time.Second, "streams within the cap at the pod", func() bool { return reached.Load() == streams })
	charged, _ := e.r.admit.RequestUsage()
	if charged < streams*15*4000 {
		t.Fatalf("%d streams with %d header bytes on the wire charged %d bytes, want at least their decoded %d", streams, wire, charged, streams*15*4000)
	}
	time.Sleep(100 * time.Millisecond)
	if got := reached.Load(); got != streams {
		t.Fatalf("%d streams reached the pod, want %d", got, streams)
	}
}

// One client address may keep MaxConnectionsPerSource connections open;
// one more is closed at once, while a second address still connects and
// is answered.
func TestAdversarialSecondSourceConnectsWhenOneIsAtItsCap(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	const perSource = 3
	cfg := testConfig()
	cfg.MaxConnectionsPerSource = perSource
	e := newEnv(t, cfg)
	e.backend(t, "10.0.0.1:80", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "pod") }))
	e.eps.Set(testSvc, "10.0.0.1:80")
	addr := serveProxy(t, e.r)
	_, port, _ := net.SplitHostPort(addr)
	dialFrom := func(src string) (net.Conn, error) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
		return d.Dial("tcp", net.JoinHostPort("127.0.0.1", port))
	}
	var open []net.Conn
	defer func() {
		for _, c := range open {
			_ = c.Close()
		}
	}()
	for i := range perSource {
		c, err := dialFrom("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, c)
		if got := rawStatusOn(t, c); !strings.Contains(got, "200") {
			t.Fatalf("connection %d of %d from one address: %q, want 200", i+1, perSource, got)
		}
	}
	if c, err := dialFrom("127.0.0.1"); err == nil {
		open = append(open, c)
		if got := rawStatusOn(t, c); got != "" {
			t.Fatalf("connection %d from one address answered %q, want it closed", perSource+1, got)
		}
	}
	if got := metricValue(t, e.r.metrics.Admission.ConnectionsRefused); got != 1 {
		t.Errorf("refused connections %v, want 1", got)
	}
	c, err := dialFrom("127.0.0.2")
	if err != nil {
		t.Fatal(err)
	}
	open = append(open, c)
	if got := rawStatusOn(t, c); !strings.Contains(got, "200") {
		t.Fatalf("a second address while the first is at its cap: %q, want 200", got)
	}
}

// rawStatusOn sends one HTTP/1.1 request for testHost on c and returns
// the status line, or "" when the connection is closed first.
func rawStatusOn(t *testing.T, c net.Conn) string {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", testHost); err != nil {
		return ""
	}
	buf := make([]byte, 64)
	n, _ := c.Read(buf)
	line, _, _ := strings.Cut(string(buf[:n]), "\r\n")
	return line
}
