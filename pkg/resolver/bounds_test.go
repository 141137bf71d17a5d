package resolver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/elasti-dev/elasti/pkg/resolver/admission"
	"github.com/elasti-dev/elasti/pkg/resolver/forward"
	"github.com/elasti-dev/elasti/pkg/resolver/internal/resolvertest"
)

// holdRequests sends n requests that stay held until ctx ends, and waits
// until the resolver holds want requests in all.
func holdRequests(t *testing.T, e *testEnv, ctx context.Context, wg *sync.WaitGroup, client *http.Client, n int, want float64, edit func(*http.Request)) {
	t.Helper()
	for range n {
		req := e.request(t, ctx, "GET", "/", nil)
		if edit != nil {
			edit(req)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if resp, err := client.Do(req); err == nil {
				resp.Body.Close()
				t.Errorf("held request answered %d, want it cancelled", resp.StatusCode)
			}
		}()
	}
	resolvertest.Eventually(t, 5*time.Second, "requests held", func() bool { return metricValue(t, e.r.metrics.Hold.Queued) == want })
}

// One client joining a wake under way cannot fill the Service's queue: at
// its share it gets 429 with Retry-After, and another client still gets
// in.
func TestOneClientCannotFillTheQueue(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	cfg := testConfig()
	cfg.PerServiceQueue = 10
	cfg.PerSourceQueue = 3
	cfg.RetryAfter = 7 * time.Second
	e := newEnv(t, cfg)
	noisy, quiet := clientFrom(t, "127.0.0.1"), clientFrom(t, "127.0.0.2")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()

	holdRequests(t, e, ctx, &wg, noisy, 3, 3, nil)
	resp, err := noisy.Do(e.request(t, context.Background(), "GET", "/", nil))
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "7" || !strings.Contains(body, "this client") {
		t.Fatalf("past one client's share: %d Retry-After=%q %q, want 429 with Retry-After 7", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if got := metricValue(t, e.r.metrics.Admission.Overflow.WithLabelValues(admission.ScopeClient)); got != 1 {
		t.Errorf("client overflow counter %v, want 1", got)
	}
	holdRequests(t, e, ctx, &wg, quiet, 1, 4, nil)
}

// Header bytes of held requests share one budget: a burst of
// header-heavy requests is refused at it with 503, while the queues have
// room, and a small request still fits.
func TestHeaderHeavyBurstIsRefusedAtTheByteBudget(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	cfg := testConfig()
	cfg.MaxHeldBytes = 40 << 10
	cfg.RetryAfter = 7 * time.Second
	e := newEnv(t, cfg)
	client := newClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	heavy := func(req *http.Request) { req.Header.Set("X-Big", strings.Repeat("a", 16<<10)) }

	holdRequests(t, e, ctx, &wg, client, 2, 2, heavy)
	req := e.request(t, context.Background(), "GET", "/", nil)
	heavy(req)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "7" {
		t.Fatalf("past the byte budget: %d Retry-After=%q %q, want 503 with Retry-After 7", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if got := metricValue(t, e.r.metrics.Admission.Overflow.WithLabelValues(admission.ScopeBytes)); got != 1 {
		t.Errorf("bytes overflow counter %v, want 1", got)
	}
	holdRequests(t, e, ctx, &wg, client, 1, 3, nil)
}

// tickerTCP listens on loopback. A connection whose first line is
// "stream" gets a tick every 30ms until it closes; any other is echoed.
func tickerTCP(t *testing.T) string {
	t.Helper()
	return serveTCP(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		line, err := br.ReadString('\n')
		if err != nil {
			return
		}
		if line != "stream\n" {
			_, _ = io.WriteString(c, line)
			_, _ = io.Copy(c, br)
			return
		}
		for {
			if _, err := io.WriteString(c, "tick\n"); err != nil {
				return
			}
			time.Sleep(30 * time.Millisecond)
		}
	})
}

// A TCP connection whose pods never accept is closed after the connect
// patience, as an HTTP request gets its 502 then, not held until the
// hold's deadline; the resolver counts it as unreachable.
func TestTCPGivesUpAfterTheConnectPatience(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	cfg := testConfig()
	cfg.connectPatience = 500 * time.Millisecond
	pe := newPortEnv(t, cfg)
	pe.eps.Set(testSvc, "10.244.0.9:5000") // Ready, and refuses for ever
	c, err := net.DialTimeout("tcp", pe.addr(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	began := time.Now()
	if _, err := io.WriteString(c, "hello\n"); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Read(make([]byte, 1)); err == nil || n > 0 {
		t.Fatalf("read %d bytes, %v; want the connection closed", n, err)
	}
	if took := time.Since(began); took > pe.r.cfg.connectPatience+time.Second {
		t.Errorf("closed after %v; the connect patience is %v", took, pe.r.cfg.connectPatience)
	}
	resolvertest.Eventually(t, 2*time.Second, "the unreachable connection counted", func() bool {
		return metricValue(t, pe.r.metrics.Forward.Spliced.WithLabelValues(forward.SplicedUnreachable)) == 1
	})
}

// A spliced connection on which nothing moves either way is closed after
// the idle timeout (between it and twice it); one that talks, and one
// where only the pod streams while the client stays silent, stay open.
func TestIdleSplicedConnectionIsClosed(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	const idle = 200 * time.Millisecond
	cfg := testConfig()
	cfg.SpliceIdleTimeout = idle
	pe := newPortEnv(t, cfg)
	pe.net.route("10.244.0.6:5000", tickerTCP(t))
	pe.eps.Set(testSvc, "10.244.0.6:5000")

	dial := func(first string) (net.Conn, *bufio.Reader) {
		c, err := net.DialTimeout("tcp", pe.addr(), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(c)
		if _, err := io.WriteString(c, first); err != nil {
			t.Fatal(err)
		}
		return c, br
	}
	silent, silentR := dial("hello\n")
	if line, err := silentR.ReadString('\n'); err != nil || line != "hello\n" {
		t.Fatalf("echo: %q, %v", line, err)
	}
	began := time.Now()
	talking, talkingR := dial("hello\n")
	if line, err := talkingR.ReadString('\n'); err != nil || line != "hello\n" {
		t.Fatalf("echo: %q, %v", line, err)
	}
	_, streamR := dial("stream\n")

	closed := make(chan time.Duration, 1)
	go func() {
		_, err := silentR.ReadString('\n')
		if err == nil {
			closed <- -1
			return
		}
		closed <- time.Since(began)
	}()
	for range 8 { // 800ms, four idle periods
		time.Sleep(100 * time.Millisecond)
		if _, err := io.WriteString(talking, "ping\n"); err != nil {
			t.Fatalf("the talking connection was closed: %v", err)
		}
		if line, err := talkingR.ReadString('\n'); err != nil || line != "ping\n" {
			t.Fatalf("the talking connection: %q, %v", line, err)
		}
		if line, err := streamR.ReadString('\n'); err != nil || line != "tick\n" {
			t.Fatalf("the streaming connection, silent on the client's side: %q, %v", line, err)
		}
	}
	select {
	case d := <-closed:
		if d < idle || d > 3*idle {
			t.Fatalf("the silent connection was closed after %v, want between %v and %v", d, idle, 2*idle)
		}
	default:
		t.Fatal("the silent connection was still open after four idle periods")
	}
	_ = silent.Close()
}

// The proxy port and the resolver ports share one bound on open client
// connections: one past it is closed at once (not left unaccepted), and a
// freed slot is taken by the next client.
func TestConnectionsPastTheMaxAreClosedAtOnce(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	cfg := testConfig()
	cfg.MaxConnections = 3
	cfg.RequestTimeout = time.Second // the held one on the resolver port
	pe := newPortEnv(t, cfg)
	proxy := serveProxy(t, pe.r)

	dial := func(addr string) net.Conn {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		return c
	}
	first := dial(proxy)
	dial(proxy)
	dial(pe.addr())
	resolvertest.Eventually(t, 5*time.Second, "three connections open", func() bool { return metricValue(t, pe.r.metrics.Admission.Connections) == 3 })

	for _, addr := range []string{proxy, pe.addr()} {
		began := time.Now()
		if err := refusedAtOnce(addr); err != nil {
			t.Fatalf("a connection past the bound on %s: %v", addr, err)
		}
		if d := time.Since(began); d > time.Second {
			t.Errorf("a connection past the bound on %s was closed after %v, want at once", addr, d)
		}
	}
	if got := metricValue(t, pe.r.metrics.Admission.ConnectionsRefused); got != 2 {
		t.Errorf("refused connections %v, want 2", got)
	}

	_ = first.Close()
	resolvertest.Eventually(t, 5*time.Second, "a slot freed", func() bool { return metricValue(t, pe.r.metrics.Admission.Connections) == 2 })
	if got := rawStatus(t, proxy, "GET / HTTP/1.1\r\nHost: not a service\r\nConnection: close\r\n\r\n"); !strings.HasPrefix(got, "HTTP/1.1 400 ") {
		t.Fatalf("the next client after a slot freed: %q, want it served (400 for its Host)", got)
	}
}

// refusedAtOnce connects to addr and reads; nil when the connection is
// reset or closed without a byte.
func refusedAtOnce(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		// On loopback the reset can come before the handshake ends.
		if errors.Is(err, syscall.ECONNRESET) {
			return nil
		}
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	n, err := c.Read(make([]byte, 1))
	var ne net.Error
	switch {
	case err == nil:
		return fmt.Errorf("read %d bytes", n)
	case errors.As(err, &ne) && ne.Timeout():
		return errors.New("left open")
	}
	return nil
}

// Shutdown's deadline ends a spliced connection whose pod says nothing,
// even when the client has half-closed.
func TestShutdownEndsASilentSplice(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	cfg := testConfig()
	cfg.SpliceIdleTimeout = 30 * time.Second
	pe := newPortEnv(t, cfg)
	pe.net.route("10.244.0.6:5000", parkingTCP(t))
	pe.eps.Set(testSvc, "10.244.0.6:5000")
	c, err := net.DialTimeout("tcp", pe.addr(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "x"); err != nil {
		t.Fatal(err)
	}
	// Half-closed: the splice's direction from the client has ended, and
	// the one from the pod waits for the pod.
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	resolvertest.Eventually(t, 5*time.Second, "the splice", func() bool {
		return metricValue(t, pe.r.metrics.Forward.Spliced.WithLabelValues(forward.SplicedSuccess)) == 1
	})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	began := time.Now()
	_ = pe.ports.Shutdown(ctx)
	if d := time.Since(began); d > 5*time.Second {
		t.Fatalf("Shutdown returned after %v, want soon after its 100ms deadline", d)
	}
}

// parkingTCP listens on loopback and keeps every connection open, reading
// nothing: a pod that costs the benchmark a socket and no goroutine.
func parkingTCP(b testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var parked []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				for _, c := range parked {
					_ = c.Close()
				}
				return
			}
			parked = append(parked, c)
		}
	}()
	b.Cleanup(func() { _ = ln.Close(); <-done })
	return ln.Addr().String()
}
