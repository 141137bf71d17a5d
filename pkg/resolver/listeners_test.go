package resolver

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"

	v1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/resolver/admission"
	"github.com/elasti-dev/elasti/pkg/resolver/forward"
	"github.com/elasti-dev/elasti/pkg/resolver/identify"
	"github.com/elasti-dev/elasti/pkg/resolver/internal/resolvertest"
	"github.com/elasti-dev/elasti/pkg/wakeapi"
)

// portEnv is a resolver with per-port listeners on loopback and one
// resolver port routed to testSvc's port 80.
type portEnv struct {
	*testEnv
	routes *identify.RouteTable
	ports  *identify.PortListeners
	port   int32
}

func newPortEnv(t *testing.T, cfg Config) *portEnv {
	t.Helper()
	e := newEnv(t, cfg)
	_, ctx := ktesting.NewTestContext(t)
	routes := identify.NewRouteTable(ctx, resolvertest.AnyPort)
	pe := &portEnv{testEnv: e, routes: routes, port: freePort(t)}
	pe.ports = e.r.NewPortListeners(routes, identify.PortListenersOptions{Host: "127.0.0.1"})
	routes.Upsert(resolvertest.ESWithPorts("web", v1.ResolverPort{Service: testSvc.Name, Name: "http", Port: 80, ResolverPort: pe.port}))
	runCtx, cancel := context.WithCancel(context.Background())
	go pe.ports.Run(runCtx)
	t.Cleanup(func() {
		cancel()
		sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer scancel()
		_ = pe.ports.Shutdown(sctx)
	})
	resolvertest.Eventually(t, 5*time.Second, "the resolver port to open", func() bool { return len(pe.ports.Listening()) == 1 })
	return pe
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int32 {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return int32(ln.Addr().(*net.TCPAddr).Port)
}

func (pe *portEnv) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(int(pe.port))) }

// dial connects to the resolver port; the connection has a deadline 5s
// away and is closed when the test ends.
func (pe *portEnv) dial(t *testing.T) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", pe.addr(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	return c
}

// wakeOnPost makes the fake operator give testSvc a Ready endpoint at pod.
func (pe *portEnv) wakeOnPost(pod string) {
	pe.op.setOnPost(func(wakeapi.Request) { pe.eps.Set(testSvc, pod) })
}

// The port names the Service: an HTTP request with any Host is held,
// wakes the Service and is forwarded with its Host intact, and the
// response says how long it was held.
func TestResolverPortServesHTTPWhateverTheHost(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	pe := newPortEnv(t, testConfig())
	pe.backend(t, "10.244.0.5:8080", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "host="+r.Host)
	}))
	pe.wakeOnPost("10.244.0.5:8080")

	req, _ := http.NewRequest("GET", "http://"+pe.addr()+"/", nil)
	req.Host = "shop.example.com"
	resp, err := newClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode != 200 || body != "host=shop.example.com" {
		t.Fatalf("got %d %q, want 200 from the pod with the client's Host", resp.StatusCode, body)
	}
	if h := resp.Header.Get(DefaultColdStartHeader); h == "" {
		t.Fatalf("held response has no %s header", DefaultColdStartHeader)
	} else if _, err := time.ParseDuration(h); err != nil {
		t.Fatalf("%s = %q is not a duration: %v", DefaultColdStartHeader, h, err)
	}
	if got := pe.op.posts.Load(); got != 1 {
		t.Fatalf("%d wake POSTs, want 1", got)
	}

	// Served at once now, and without the header: it was not held.
	resp, err = newClient(t).Get("http://" + pe.addr() + "/")
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if h := resp.Header.Get(DefaultColdStartHeader); h != "" {
		t.Fatalf("a response that was not held carries %s: %q", DefaultColdStartHeader, h)
	}
}

// echoTCP listens on loopback and echoes every connection; greeting, if
// set, is sent first, as servers of server-first protocols do.
func echoTCP(t *testing.T, greeting string) string {
	t.Helper()
	return serveTCP(t, func(c net.Conn) {
		_, _ = io.WriteString(c, greeting)
		_, _ = io.Copy(c, c)
	})
}

// serveTCP listens on loopback until the test ends and runs handle for
// each connection, closing it when handle returns.
func serveTCP(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
	return ln.Addr().String()
}

// A connection whose first bytes are not HTTP is held at the TCP level,
// wakes the Service and is spliced byte for byte.
func TestResolverPortSplicesTCPAfterTheWake(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	pe := newPortEnv(t, testConfig())
	pe.net.route("10.244.0.6:5000", echoTCP(t, ""))
	pe.wakeOnPost("10.244.0.6:5000")

	for _, first := range [][]byte{
		[]byte("hello over raw tcp\n"),
		{0x16, 0x03, 0x01, 0x00, 0x05, 'h', 'e', 'l', 'l', 'o'}, // the start of a TLS ClientHello
	} {
		c, err := net.DialTimeout("tcp", pe.addr(), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write(first); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(first))
		if _, err := io.ReadFull(c, got); err != nil || string(got) != string(first) {
			t.Fatalf("echo of %q = %q, %v", first, got, err)
		}
		_ = c.Close()
	}
	if got := metricValue(t, pe.r.metrics.Forward.Spliced.WithLabelValues(forward.SplicedSuccess)); got != 2 {
		t.Fatalf("spliced = %v, want 2", got)
	}
}

// TLS passthrough: the client completes a handshake with the pod's own
// certificate through a resolver port.
func TestResolverPortPassesTLSThrough(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	pe := newPortEnv(t, testConfig())
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "tls ok")
	}))
	t.Cleanup(tlsSrv.Close)
	pe.net.route("10.244.0.7:8443", tlsSrv.Listener.Addr().String())
	pe.wakeOnPost("10.244.0.7:8443")

	// The test server's certificate names 127.0.0.1, which the client dials.
	client := tlsSrv.Client()
	client.Timeout = 10 * time.Second
	resp, err := client.Get("https://" + pe.addr() + "/")
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); body != "tls ok" {
		t.Fatalf("body %q", body)
	}
	if resp.TLS == nil || len(resp.TLS.PeerCertificates) == 0 ||
		!resp.TLS.PeerCertificates[0].Equal(tlsSrv.Certificate()) {
		t.Fatal("the client did not see the pod's certificate")
	}
}

// A server-first protocol (the client waits for a greeting) is spliced
// once the sniff gives up, and the greeting arrives.
func TestResolverPortSplicesServerFirstProtocols(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	pe := newPortEnv(t, testConfig())
	pe.net.route("10.244.0.8:3306", echoTCP(t, "220 ready\n"))
	pe.eps.Set(testSvc, "10.244.0.8:3306")

	c := pe.dial(t)
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "220 ready\n" {
		t.Fatalf("greeting = %q, %v", line, err)
	}
}

// A port that declares HTTP (by appProtocol, or by its name: see
// declaredProtocol) is served as HTTP without the sniff: a client that
// sends its request only after the sniff time is held as an HTTP request,
// answered with the cold-start header, not spliced as a server-first
// protocol.
func TestDeclaredHTTPPortServesASlowClientAsHTTP(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	pe := newPortEnv(t, testConfig())
	pe.eps.SetAppProtocol(testSvc, "http")
	pe.backend(t, "10.244.0.9:8080", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "from the pod")
	}))
	pe.wakeOnPost("10.244.0.9:8080")

	c := pe.dial(t)
	time.Sleep(2 * identify.SniffTimeout)
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: web\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode != 200 || body != "from the pod" {
		t.Fatalf("got %d %q, want 200 from the pod", resp.StatusCode, body)
	}
	if resp.Header.Get(DefaultColdStartHeader) == "" {
		t.Fatalf("a slow client on a declared HTTP port was not held as HTTP: no %s header", DefaultColdStartHeader)
	}
}

// A held connection is closed at the request timeout, and one whose
// client resets it frees its slot at once.
func TestHeldConnectionTimesOutOrLeaves(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	cfg := testConfig()
	cfg.RequestTimeout = 300 * time.Millisecond
	pe := newPortEnv(t, cfg)
	pe.eps.SetAppProtocol(testSvc, "tcp") // no sniffing: held at once

	c := pe.dial(t)
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("a held connection was answered without a pod")
	}
	if got := metricValue(t, pe.r.metrics.Hold.Timeouts); got != 1 {
		t.Fatalf("timeouts = %v, want 1", got)
	}
	// The client saw only the close; the resolver's log says why, at the
	// default level.
	logs := pe.r.logger.GetSink().(ktesting.Underlier).GetBuffer().Data()
	if !slices.ContainsFunc(logs, func(e ktesting.LogEntry) bool {
		return e.Verbosity == 0 && e.Message == "Closing held connection: no pod was Ready within the hold's timeout"
	}) {
		t.Errorf("no log line at the default level for the connection closed at its hold's timeout: %v", logs)
	}

	c2, err := net.DialTimeout("tcp", pe.addr(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	resolvertest.Eventually(t, 5*time.Second, "the connection to be held", func() bool { return pe.r.admit.Admitted(testSvc) == 1 })
	_ = c2.(*net.TCPConn).SetLinger(0) // close with a reset
	_ = c2.Close()
	resolvertest.Eventually(t, 5*time.Second, "the slot to be freed", func() bool { return pe.r.admit.Admitted(testSvc) == 0 })
	if got := metricValue(t, pe.r.metrics.Hold.Timeouts); got != 1 {
		t.Fatalf("timeouts = %v after a client left, want still 1", got)
	}
}

// A client that sends its request and half-closes is still answered once
// the Service wakes: on the wire a half-close is an EOF, not a departure.
func TestHalfClosedClientIsAnsweredAfterTheWake(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	pe := newPortEnv(t, testConfig())
	pe.net.route("10.244.0.6:5000", echoTCP(t, ""))
	pe.wakeOnPost("10.244.0.6:5000")
	c := pe.dial(t)
	if _, err := io.WriteString(c, "ping"); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "ping" {
		t.Fatalf("after a half-close the client got %q, %v; want the echo", got, err)
	}
}

// Ports open and close with the route table.
func TestPortsFollowTheRouteTable(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	pe := newPortEnv(t, testConfig())
	second := freePort(t)
	pe.routes.Upsert(resolvertest.ESWithPorts("api", v1.ResolverPort{Service: "api", Port: 80, ResolverPort: second}))
	resolvertest.Eventually(t, 5*time.Second, "the second port to open", func() bool { return len(pe.ports.Listening()) == 2 })
	pe.routes.Delete(testSvc.Namespace, "web")
	resolvertest.Eventually(t, 5*time.Second, "the first port to close", func() bool { return len(pe.ports.Listening()) == 1 })
	if _, err := net.DialTimeout("tcp", pe.addr(), time.Second); err == nil {
		t.Fatal("a released port still accepts connections")
	}
}

// A resolver port forwards only while the resolver is in front of its
// Service: for a Service that serves, a raw TCP connection is closed at
// once, before a byte reaches the pod.
func TestResolverPortClosesConnectionsForServicesNotInFront(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	pe := newPortEnv(t, testConfig())
	pe.net.route("10.244.0.9:5000", echoTCP(t, "pod says hi\n"))
	pe.eps.Set(testSvc, "10.244.0.9:5000")
	pe.eps.SetInFront(testSvc, false)

	c := pe.dial(t)
	if _, err := c.Write([]byte("hello over raw tcp\n")); err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(c); len(b) != 0 || err != nil {
		t.Fatalf("read %q, %v; want the connection closed with nothing from the pod", b, err)
	}
	if n := pe.net.dialCount("10.244.0.9:5000"); n != 0 {
		t.Fatalf("the pod was dialled %d times", n)
	}
	if got := metricValue(t, pe.r.metrics.Answer.NotInFront.WithLabelValues(admission.ProtocolTCP)); got != 1 {
		t.Fatalf("not-in-front count = %v, want 1", got)
	}
}
