package resolver

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/elasti-dev/elasti/pkg/resolver/admission"
	"github.com/elasti-dev/elasti/pkg/resolver/hold"
	"github.com/elasti-dev/elasti/pkg/resolver/internal/resolvertest"

	"k8s.io/klog/v2/ktesting"

	v1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
	"github.com/elasti-dev/elasti/pkg/wakeapi"
)

// named answers with its name and the request path.
func named(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "%s %s", name, r.URL.Path)
	})
}

func TestColdStartReleasesAllWithOneOperatorPost(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	e := newEnv(t, testConfig())
	e.backend(t, "10.244.0.1:8080", named("pod-a"))
	client := newClient(t)

	const n = 200
	type result struct {
		code int
		body string
		err  error
	}
	results := make(chan result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		req := e.request(t, context.Background(), "GET", fmt.Sprintf("/item/%d", i), nil)
		go func() {
			defer wg.Done()
			resp, err := client.Do(req)
			if err != nil {
				results <- result{err: err}
				return
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			results <- result{resp.StatusCode, string(b), err}
		}()
	}
	resolvertest.Eventually(t, 10*time.Second, "200 held requests", func() bool { return metricValue(t, e.r.metrics.Hold.Queued) == n })
	resolvertest.Eventually(t, 5*time.Second, "the operator POST", func() bool { return e.op.posts.Load() >= 1 })
	time.Sleep(100 * time.Millisecond) // room for a wrong second POST
	if got := e.op.posts.Load(); got != 1 {
		t.Fatalf("operator got %d POSTs for %d held requests, want exactly 1", got, n)
	}

	e.eps.Set(testSvc, "10.244.0.1:8080")
	wg.Wait()
	close(results)
	ok := 0
	for r := range results {
		if r.err != nil {
			t.Errorf("request failed: %v", r.err)
			continue
		}
		if r.code != 200 || !strings.HasPrefix(r.body, "pod-a /item/") {
			t.Errorf("got %d %q", r.code, r.body)
			continue
		}
		ok++
	}
	if ok != n {
		t.Fatalf("%d of %d requests answered by the pod", ok, n)
	}
	if got := e.op.posts.Load(); got != 1 {
		t.Errorf("operator got %d POSTs, want 1", got)
	}
	e.op.mu.Lock()
	body, ctype, path := e.op.bodies[0], e.op.ctypes[0], e.op.paths[0]
	e.op.mu.Unlock()
	if want := `{"count":1,"svc":"web","namespace":"team"}`; body != want {
		t.Errorf("operator body %s, want %s", body, want)
	}
	if ctype != "application/json" {
		t.Errorf("operator Content-Type %q", ctype)
	}
	if path != "POST /informer/incoming-request" {
		t.Errorf("operator request %q", path)
	}
	if got := metricValue(t, e.r.metrics.Hold.Queued); got != 0 {
		t.Errorf("queued gauge %v after release", got)
	}
	if got := metricValue(t, e.r.metrics.Hold.ColdStartWait); got != n {
		t.Errorf("cold-start histogram has %v samples, want %d", got, n)
	}
	if got := metricValue(t, e.r.metrics.Forward.Proxied); got != n {
		t.Errorf("proxied counter %v, want %d", got, n)
	}
	if got := e.r.holds.Held(testSvc); got != 0 {
		t.Errorf("hold queue still counts %d", got)
	}
}

func TestForwardKeepsRequestIntact(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	e := newEnv(t, testConfig())
	type seen struct {
		method, uri, host, body string
		header                  http.Header
	}
	got := make(chan seen, 1)
	e.backend(t, "10.244.0.1:8080", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.RequestURI, r.Host, string(b), r.Header.Clone()}
		w.Header().Set("X-Reply", "yes")
		w.Header().Add("Set-Cookie", "a=1")
		w.Header().Add("Set-Cookie", "b=2")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "created")
	}))
	e.eps.Set(testSvc, "10.244.0.1:8080")

	req := e.request(t, context.Background(), "PATCH", "/a/b%2Fc/?x=1&y=%20z&x=2", strings.NewReader("payload"))
	req.Header.Set("X-Custom", "one")
	req.Header.Add("X-Custom", "two")
	req.Header.Set("X-Forwarded-For", "203.0.113.9")
	req.Header.Set("Accept-Encoding", "br")
	req.Header.Set("Content-Type", "text/x-test")
	req.Header.Set("Authorization", "Bearer t")
	resp, err := newClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode != 201 || body != "created" {
		t.Fatalf("response %d %q", resp.StatusCode, body)
	}
	if resp.Header.Get("X-Reply") != "yes" || len(resp.Header.Values("Set-Cookie")) != 2 {
		t.Errorf("response headers lost: %v", resp.Header)
	}
	s := <-got
	if s.method != "PATCH" || s.uri != "/a/b%2Fc/?x=1&y=%20z&x=2" || s.body != "payload" || s.host != testHost {
		t.Errorf("backend saw %s %s host %q body %q", s.method, s.uri, s.host, s.body)
	}
	for k, want := range map[string]string{
		"X-Custom":          "one,two",
		"X-Forwarded-For":   "203.0.113.9, 127.0.0.1",
		"X-Forwarded-Proto": "http",
		"X-Forwarded-Host":  testHost,
		"Accept-Encoding":   "br",
		"Content-Type":      "text/x-test",
		"Authorization":     "Bearer t",
	} {
		if v := strings.Join(s.header.Values(k), ","); v != want {
			t.Errorf("backend header %s = %q, want %q", k, v, want)
		}
	}
	if e.op.posts.Load() != 0 {
		t.Error("a request to a serving service asked the operator for a wake")
	}
}

func TestStreamsLargeBodiesBothWays(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	e := newEnv(t, testConfig())
	backendGotData := make(chan struct{})
	var once sync.Once
	e.backend(t, "10.244.0.1:8080", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex()
		rc := http.NewResponseController(w)
		w.WriteHeader(200)
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Body.Read(buf)
			if n > 0 {
				once.Do(func() { close(backendGotData) })
				if _, werr := w.Write(buf[:n]); werr != nil {
					return
				}
				_ = rc.Flush()
			}
			if err != nil {
				return
			}
		}
	}))
	e.eps.Set(testSvc, "10.244.0.1:8080")

	const size = 16 << 20
	pr, pw := io.Pipe()
	clientGotData := make(chan struct{})
	sentSum := make(chan []byte, 1)
	writerErr := make(chan error, 1)
	go func() {
		h := sha256.New()
		rng := rand.New(rand.NewPCG(1, 2))
		chunk := make([]byte, 64<<10)
		for sent := 0; sent < size; sent += len(chunk) {
			for i := range chunk {
				chunk[i] = byte(rng.Uint32())
			}
			h.Write(chunk)
			if _, err := pw.Write(chunk); err != nil {
				writerErr <- err
				return
			}
			// The backend must see data, and the client must see the echo,
			// long before the client has sent everything: nothing buffers
			// whole bodies.
			var wait chan struct{}
			var what string
			switch sent + len(chunk) {
			case 1 << 20:
				wait, what = backendGotData, "backend to receive data"
			case 4 << 20:
				wait, what = clientGotData, "client to receive the echo"
			}
			if wait != nil {
				select {
				case <-wait:
				case <-time.After(10 * time.Second):
					err := fmt.Errorf("timed out waiting for the %s while the upload is still open", what)
					pw.CloseWithError(err)
					writerErr <- err
					return
				}
			}
		}
		sentSum <- h.Sum(nil)
		writerErr <- pw.Close()
	}()

	req := e.request(t, context.Background(), "POST", "/echo", pr)
	resp, err := newClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	h := sha256.New()
	first := make([]byte, 1)
	if _, err := io.ReadFull(resp.Body, first); err != nil {
		t.Fatal(err)
	}
	h.Write(first)
	close(clientGotData)
	n, err := io.Copy(h, resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-writerErr; err != nil {
		t.Fatal(err)
	}
	if n+1 != size {
		t.Fatalf("echoed %d bytes, want %d", n+1, size)
	}
	if want := <-sentSum; !bytes.Equal(h.Sum(nil), want) {
		t.Fatal("sha256 of the echo differs from what was sent")
	}
}

func TestH2CAndGRPCWithTrailers(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	e := newEnv(t, testConfig())
	protos := make(chan int, 4)
	backend := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		protos <- r.ProtoMajor
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Trailer", "Grpc-Status")
		w.Header().Set("Content-Type", "application/grpc")
		w.WriteHeader(200)
		_, _ = w.Write(append([]byte("echo:"), b...))
		w.Header().Set("Grpc-Status", "0")
		w.Header().Set(http.TrailerPrefix+"Grpc-Message", "fine")
	}))
	ConfigureServer(backend.Config)
	backend.Start()
	t.Cleanup(func() { backend.CloseClientConnections(); backend.Close() })
	e.net.route("10.244.0.2:50051", backend.Listener.Addr().String())
	e.eps.Set(testSvc, "10.244.0.2:50051")

	h2 := &http.Transport{Proxy: nil, Protocols: new(http.Protocols)}
	h2.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(h2.CloseIdleConnections)

	check := func(name string, client *http.Client, wantClientProto int, grpc bool) {
		t.Helper()
		req := e.request(t, context.Background(), "POST", "/pkg.Service/Method", strings.NewReader("\x00\x00\x00\x00\x03abc"))
		if grpc {
			req.Header.Set("Content-Type", "application/grpc")
			req.Header.Set("TE", "trailers")
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		body := readAll(t, resp)
		if resp.StatusCode != 200 || body != "echo:\x00\x00\x00\x00\x03abc" {
			t.Errorf("%s: response %d %q", name, resp.StatusCode, body)
		}
		if resp.ProtoMajor != wantClientProto {
			t.Errorf("%s: client spoke HTTP/%d, want %d", name, resp.ProtoMajor, wantClientProto)
		}
		if resp.Trailer.Get("Grpc-Status") != "0" || resp.Trailer.Get("Grpc-Message") != "fine" {
			t.Errorf("%s: trailers %v", name, resp.Trailer)
		}
		select {
		case p := <-protos:
			if p != 2 {
				t.Errorf("%s: backend got HTTP/%d, want h2c", name, p)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: backend saw no request", name)
		}
	}
	check("h2c gRPC client", &http.Client{Transport: h2, Timeout: 10 * time.Second}, 2, true)
	check("h2c plain client", &http.Client{Transport: h2, Timeout: 10 * time.Second}, 2, false)
	check("HTTP/1.1 client with gRPC content type", newClient(t), 1, true)

	// A port whose appProtocol is h2c gets h2c even for plain HTTP/1.1.
	e.eps.SetH2C(testSvc, true)
	check("HTTP/1.1 client to an h2c port", newClient(t), 1, false)

	// A failed h2c connect is retried on another endpoint too
	// (10.244.0.9 has no route).
	e.eps.Set(testSvc, "10.244.0.2:50051", "10.244.0.9:50051")
	for i := range 4 {
		check(fmt.Sprint("h2c retry ", i), &http.Client{Transport: h2, Timeout: 10 * time.Second}, 2, true)
	}
	if e.net.dialCount("10.244.0.9:50051") == 0 {
		t.Error("the dead h2c endpoint was never tried")
	}
}

func TestWebSocketUpgradeWhileCold(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	e := newEnv(t, testConfig())
	e.backend(t, "10.244.0.1:8080", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") || !strings.Contains(strings.ToLower(r.Header.Get("Connection")), "upgrade") {
			http.Error(w, "want a websocket upgrade", 400)
			return
		}
		sum := sha1.Sum([]byte(r.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n", base64.StdEncoding.EncodeToString(sum[:]))
		_ = brw.Flush()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		// Frames are opaque to the proxy: echo bytes.
		buf := make([]byte, 1024)
		for {
			n, err := brw.Read(buf)
			if n > 0 {
				if _, err := conn.Write(buf[:n]); err != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}))

	conn, err := net.Dial("tcp", e.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "GET /chat HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", testHost)

	// The target is cold: the upgrade is held, then released.
	resolvertest.Eventually(t, 5*time.Second, "held upgrade", func() bool { return metricValue(t, e.r.metrics.Hold.Queued) == 1 })
	e.eps.Set(testSvc, "10.244.0.1:8080")

	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("status %d, want 101", resp.StatusCode)
	}
	if got := resp.Header.Get("Sec-WebSocket-Accept"); got != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" {
		t.Fatalf("Sec-WebSocket-Accept %q", got)
	}
	// A masked text frame "hello", then read the same bytes back.
	frame := []byte{0x81, 0x85, 1, 2, 3, 4}
	for i, c := range []byte("hello") {
		frame = append(frame, c^[]byte{1, 2, 3, 4}[i%4])
	}
	for round := range 3 {
		if _, err := conn.Write(frame); err != nil {
			t.Fatal(err)
		}
		back := make([]byte, len(frame))
		if _, err := io.ReadFull(br, back); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if !bytes.Equal(back, frame) {
			t.Fatalf("round %d: echo %x, want %x", round, back, frame)
		}
	}
}

func TestProbeResponseDoesNotWake(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	e := newEnv(t, testConfig())
	e.backend(t, "10.244.0.1:8080", named("pod-a"))
	e.probe.Upsert(resolvertest.ElastiService("team", "web-es", "web", 1, v1.ProbeResponseRule{
		Method:   "GET",
		Path:     &v1.PathMatch{Type: v1.MatchExact, Value: "/healthz"},
		Headers:  []v1.NameValueMatch{{Name: "user-agent", Type: v1.MatchRegularExpression, Value: "kube-probe/.*"}},
		Response: v1.ProbeCannedAnswer{Status: 200, Body: "asleep but healthy"},
	}))
	client := newClient(t)
	probe := func() *http.Response {
		req := e.request(t, context.Background(), "GET", "/healthz", nil)
		req.Header.Set("User-Agent", "kube-probe/1.36")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for range 5 {
		resp := probe()
		if body := readAll(t, resp); resp.StatusCode != 200 || body != "asleep but healthy" {
			t.Fatalf("probe got %d %q", resp.StatusCode, body)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if n := e.op.posts.Load(); n != 0 {
		t.Fatalf("probes caused %d operator POSTs", n)
	}
	if got := metricValue(t, e.r.metrics.Answer.ProbeResponses); got != 5 {
		t.Errorf("probe counter %v, want 5", got)
	}
	// Once the target serves, the app answers its own probes.
	e.eps.Set(testSvc, "10.244.0.1:8080")
	resp := probe()
	if body := readAll(t, resp); body != "pod-a /healthz" {
		t.Fatalf("probe to a serving target got %q", body)
	}
}

func TestOperatorDownThenBack(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	cfg := testConfig()
	cfg.RequestTimeout = 300 * time.Millisecond
	cfg.OperatorRetryInitial = 20 * time.Millisecond
	cfg.OperatorRetryMax = 100 * time.Millisecond
	e := newEnv(t, cfg)
	e.backend(t, "10.244.0.1:8080", named("pod-a"))
	e.op.mode.Store("down")
	client := newClient(t)

	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		req := e.request(t, context.Background(), "GET", "/", nil)
		go func() {
			defer wg.Done()
			start := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			body, err := readBody(resp)
			if err != nil {
				t.Error(err)
				return
			}
			if resp.StatusCode != http.StatusGatewayTimeout || !strings.Contains(body, "team/web") || !strings.Contains(body, "timed out") {
				t.Errorf("got %d %q, want 504 naming the service", resp.StatusCode, body)
			}
			if d := time.Since(start); d < 250*time.Millisecond || d > 3*time.Second {
				t.Errorf("504 after %v, want about 300ms", d)
			}
		}()
	}
	wg.Wait()
	if got := metricValue(t, e.r.metrics.Hold.Timeouts); got != 3 {
		t.Errorf("timeout counter %v, want 3", got)
	}
	if got := metricValue(t, e.r.metrics.Hold.WakeRequests.WithLabelValues(hold.OutcomeUnreachable)); got < 1 {
		t.Errorf("unreachable wake requests %v, want at least 1", got)
	}

	// The operator comes back and scales the target up when told.
	e.op.setOnPost(func(in wakeapi.Request) {
		if in.Svc == "web" && in.Namespace == "team" {
			e.eps.Set(testSvc, "10.244.0.1:8080")
		}
	})
	e.op.mode.Store("up")
	resp, err := client.Do(e.request(t, context.Background(), "GET", "/again", nil))
	if err != nil {
		t.Fatal(err)
	}
	// 300ms of hold is enough: the backoff is capped at 100ms.
	if body := readAll(t, resp); resp.StatusCode != 200 || body != "pod-a /again" {
		t.Fatalf("after the operator came back: %d %q", resp.StatusCode, body)
	}
	// The hook scales up before the operator answers, so the request may be
	// served before the wake loop has counted the success.
	resolvertest.Eventually(t, 5*time.Second, "one successful wake request", func() bool {
		return metricValue(t, e.r.metrics.Hold.WakeRequests.WithLabelValues(hold.OutcomeSuccess)) == 1
	})
}

func TestWakeLoopBacksOffAndStops(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	cfg := testConfig()
	cfg.OperatorRetryInitial = 20 * time.Millisecond
	cfg.OperatorRetryMax = 80 * time.Millisecond
	e := newEnv(t, cfg)
	e.backend(t, "10.244.0.1:8080", named("pod-a"))
	e.op.mode.Store("reject")

	done := make(chan *http.Response, 1)
	client := newClient(t)
	req := e.request(t, context.Background(), "GET", "/", nil)
	go func() {
		resp, err := client.Do(req)
		if err != nil {
			t.Error(err)
		}
		done <- resp
	}()
	start := time.Now()
	resolvertest.Eventually(t, 5*time.Second, "held request", func() bool { return metricValue(t, e.r.metrics.Hold.Queued) == 1 })
	time.Sleep(600 * time.Millisecond)
	posts := e.op.posts.Load()
	elapsed := time.Since(start)
	// Backoff 20, 40, 80, 80...: about 2 + elapsed/80ms POSTs; a fixed
	// 20ms interval would give 30.
	if maxPosts := int64(3 + elapsed/(80*time.Millisecond)); posts < 4 || posts > maxPosts {
		t.Errorf("%d POSTs in %v, want between 4 and %d", posts, elapsed, maxPosts)
	}
	if got := metricValue(t, e.r.metrics.Hold.WakeRequests.WithLabelValues(hold.OutcomeRejected)); got != float64(posts) {
		t.Errorf("rejected wake requests %v, want %d", got, posts)
	}

	e.eps.Set(testSvc, "10.244.0.1:8080")
	select {
	case resp := <-done:
		if resp == nil {
			t.Fatal("request failed")
		}
		if body := readAll(t, resp); body != "pod-a /" {
			t.Fatalf("got %q", body)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("held request not released")
	}
	settled := e.op.posts.Load()
	time.Sleep(250 * time.Millisecond)
	if got := e.op.posts.Load(); got != settled {
		t.Errorf("operator POSTs went on after the service became ready: %d -> %d", settled, got)
	}
}

func TestQueueOverflow(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	cfg := testConfig()
	cfg.PerServiceQueue = 2
	cfg.GlobalQueue = 3
	cfg.RetryAfter = 7 * time.Second
	e := newEnv(t, cfg)
	client := newClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var wg sync.WaitGroup
	hold := func(host string) {
		wg.Add(1)
		req := e.request(t, ctx, "GET", "/", nil)
		req.Host = host
		go func() {
			defer wg.Done()
			resp, err := client.Do(req)
			if err == nil {
				resp.Body.Close()
				t.Errorf("held request to %s answered %d, want it cancelled", host, resp.StatusCode)
			}
		}()
	}
	hold(testHost)
	hold(testHost)
	resolvertest.Eventually(t, 5*time.Second, "two held", func() bool { return metricValue(t, e.r.metrics.Hold.Queued) == 2 })

	resp, err := client.Do(e.request(t, context.Background(), "GET", "/", nil))
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "7" || !strings.Contains(body, "team/web") {
		t.Fatalf("per-service overflow: %d Retry-After=%q %q", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}

	hold("api.team")
	resolvertest.Eventually(t, 5*time.Second, "three held", func() bool { return metricValue(t, e.r.metrics.Hold.Queued) == 3 })
	req := e.request(t, context.Background(), "GET", "/", nil)
	req.Host = "other.team:80"
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body = readAll(t, resp)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "7" || !strings.Contains(body, "too many requests") {
		t.Fatalf("global overflow: %d %q", resp.StatusCode, body)
	}
	if got := metricValue(t, e.r.metrics.Admission.Overflow.WithLabelValues(admission.ScopeService)); got != 1 {
		t.Errorf("service overflow counter %v", got)
	}
	if got := metricValue(t, e.r.metrics.Admission.Overflow.WithLabelValues(admission.ScopeGlobal)); got != 1 {
		t.Errorf("global overflow counter %v", got)
	}
	cancel()
	wg.Wait()
	resolvertest.Eventually(t, 5*time.Second, "slots freed", func() bool { return metricValue(t, e.r.metrics.Hold.Queued) == 0 })
}

func TestClientDisconnectFreesSlot(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	cfg := testConfig()
	cfg.PerServiceQueue = 1
	e := newEnv(t, cfg)
	e.backend(t, "10.244.0.1:8080", named("pod-a"))
	client := newClient(t)

	ctx, cancel := context.WithCancel(context.Background())
	errc := doInBackground(client, e.request(t, ctx, "GET", "/", nil))
	resolvertest.Eventually(t, 5*time.Second, "held", func() bool { return e.r.holds.Held(testSvc) == 1 })
	resp, err := client.Do(e.request(t, context.Background(), "GET", "/", nil))
	if err != nil {
		t.Fatal(err)
	}
	if readAll(t, resp); resp.StatusCode != 503 {
		t.Fatalf("queue of one accepted a second request: %d", resp.StatusCode)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled request: %v", err)
	}
	resolvertest.Eventually(t, 5*time.Second, "slot freed", func() bool {
		return e.r.holds.Held(testSvc) == 0 && metricValue(t, e.r.metrics.Hold.Queued) == 0
	})

	next := e.request(t, context.Background(), "GET", "/next", nil)
	if got := e.answerOnceHeld(t, client, next, "10.244.0.1:8080"); got != "200 pod-a /next" {
		t.Fatalf("got %q", got)
	}
}

// A held request with a small body: Go's HTTP/1.1 server only notices the
// client leaving once the body has been read, so hold reads it first.
func TestHeldBodyClientDisconnectFreesSlot(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	cfg := testConfig()
	cfg.PerServiceQueue = 1
	cfg.RequestTimeout = time.Minute // far beyond "promptly"
	e := newEnv(t, cfg)
	e.backend(t, "10.244.0.1:8080", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "got %d bytes: %s", len(b), b)
	}))
	client := newClient(t)

	ctx, cancel := context.WithCancel(context.Background())
	errc := doInBackground(client, e.request(t, ctx, "POST", "/upload", strings.NewReader(`{"hello":"world"}`)))
	resolvertest.Eventually(t, 5*time.Second, "held", func() bool { return e.r.holds.Held(testSvc) == 1 })
	// Let the handler reach its wait: the body has been sent and read.
	time.Sleep(50 * time.Millisecond)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled request: %v", err)
	}
	resolvertest.Eventually(t, 2*time.Second, "slot freed after the client left", func() bool {
		return e.r.holds.Held(testSvc) == 0 && metricValue(t, e.r.metrics.Hold.Queued) == 0
	})
	if got := metricValue(t, e.r.metrics.Hold.Timeouts); got != 0 {
		t.Errorf("slot freed by the request timeout (%v), not by the disconnect", got)
	}

	// A held body is forwarded intact once the service is ready.
	next := e.request(t, context.Background(), "POST", "/next", strings.NewReader("payload"))
	if got := e.answerOnceHeld(t, client, next, "10.244.0.1:8080"); got != "200 got 7 bytes: payload" {
		t.Fatalf("got %q", got)
	}
}

func TestBufferBody(t *testing.T) {
	for _, tc := range []struct {
		name    string
		body    string
		length  int64
		wantErr bool
	}{
		{"exact", "hello", 5, false},
		{"short body", "hel", 5, true},
	} {
		req := httptest.NewRequest("POST", "/", strings.NewReader(tc.body))
		req.ContentLength = tc.length
		err := bufferBody(httptest.NewRecorder(), req, time.Now().Add(time.Second))
		if (err != nil) != tc.wantErr {
			t.Fatalf("%s: err = %v, want error %v", tc.name, err, tc.wantErr)
		}
		if err != nil {
			continue
		}
		for range 2 {
			rc, err := req.GetBody()
			if err != nil {
				t.Fatal(err)
			}
			if b, _ := io.ReadAll(rc); string(b) != tc.body {
				t.Errorf("%s: GetBody gave %q", tc.name, b)
			}
		}
		if b, _ := io.ReadAll(req.Body); string(b) != tc.body {
			t.Errorf("%s: Body gave %q", tc.name, b)
		}
	}
}

func TestRemovedEndpointNeverUsed(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	e := newEnv(t, testConfig())
	e.backend(t, "10.244.0.1:8080", named("a"))
	e.backend(t, "10.244.0.2:8080", named("b"))
	e.eps.Set(testSvc, "10.244.0.1:8080", "10.244.0.2:8080")
	client := newClient(t)
	get := func() string {
		resp, err := client.Do(e.request(t, context.Background(), "GET", "/", nil))
		if err != nil {
			t.Fatal(err)
		}
		return readAll(t, resp)
	}
	seen := map[string]int{}
	for range 10 {
		seen[get()]++
	}
	if seen["a /"] == 0 || seen["b /"] == 0 {
		t.Fatalf("round robin did not use both endpoints: %v", seen)
	}
	e.eps.Set(testSvc, "10.244.0.2:8080")
	dialsA := e.net.dialCount("10.244.0.1:8080")
	for i := range 20 {
		if got := get(); got != "b /" {
			t.Fatalf("request %d after removal answered by %q", i, got)
		}
	}
	if d := e.net.dialCount("10.244.0.1:8080"); d != dialsA {
		t.Errorf("removed endpoint dialled %d more times", d-dialsA)
	}
}

func TestDialFailureRetriesAnotherEndpoint(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	cfg := testConfig()
	cfg.connectPatience = 300 * time.Millisecond
	e := newEnv(t, cfg)
	e.backend(t, "10.244.0.2:8080", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "b got %s", b)
	}))
	// 10.244.0.1 has no route in fakeNet: connecting fails.
	e.eps.Set(testSvc, "10.244.0.1:8080", "10.244.0.2:8080")
	client := newClient(t)
	for i := range 6 {
		resp, err := client.Do(e.request(t, context.Background(), "POST", "/", strings.NewReader(fmt.Sprint("body-", i))))
		if err != nil {
			t.Fatal(err)
		}
		if body := readAll(t, resp); resp.StatusCode != 200 || body != fmt.Sprint("b got body-", i) {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
		}
	}
	if e.net.dialCount("10.244.0.1:8080") == 0 {
		t.Error("the dead endpoint was never tried; the test proves nothing")
	}

	// No endpoint answers: 502 naming the service, not the pod addresses,
	// once the connect patience (shortened above) is spent.
	e.eps.Set(testSvc, "10.244.0.1:8080", "10.244.0.3:8080")
	resp, err := client.Do(e.request(t, context.Background(), "GET", "/", nil))
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	if resp.StatusCode != 502 || !strings.Contains(body, "team/web") || strings.Contains(body, "10.244") {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
}

type notFoundSource struct{}

func (notFoundSource) Lookup(clusterview.ServiceRef, string) (clusterview.Backends, error) {
	return clusterview.Backends{}, clusterview.ErrServiceNotFound
}
func (notFoundSource) Front(clusterview.ServiceRef) bool { return true }

func (notFoundSource) Watch(clusterview.ServiceRef) (<-chan struct{}, func()) { return nil, func() {} }
func (notFoundSource) HasSynced() bool                                        { return false }

func TestBadRequestsAndHealth(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	cfg := testConfig()
	cfg.HostHeader = "X-Elasti-Host"
	e := newEnv(t, cfg)
	e.backend(t, "10.244.0.1:8080", named("pod-a"))
	e.eps.Set(testSvc, "10.244.0.1:8080")
	client := newClient(t)

	req := e.request(t, context.Background(), "GET", "/", nil)
	req.Host = "127.0.0.1"
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode != 400 || !strings.Contains(body, "not a Kubernetes service name") {
		t.Fatalf("bad host: %d %q", resp.StatusCode, body)
	}

	req = e.request(t, context.Background(), "GET", "/via-header", nil)
	req.Host = "10.0.0.1:8012"
	req.Header.Set("X-Elasti-Host", "web.team.svc")
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); body != "pod-a /via-header" {
		t.Fatalf("host header: %q", body)
	}

	rec := httptest.NewRecorder()
	e.r.Healthz(rec, httptest.NewRequest("GET", "/healthz", nil))
	if rec.Code != 200 {
		t.Errorf("healthz %d", rec.Code)
	}
	rec = httptest.NewRecorder()
	e.r.Readyz()(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != 200 {
		t.Errorf("readyz with static sources %d", rec.Code)
	}

	_, ctx := ktesting.NewTestContext(t)
	r2, err := New(ctx, Config{OperatorURL: e.op.srv.URL}, Options{Endpoints: notFoundSource{}, Dial: e.net.dial})
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	rec = httptest.NewRecorder()
	r2.Readyz()(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != 503 {
		t.Errorf("readyz before sync %d", rec.Code)
	}
	rec = httptest.NewRecorder()
	req = httptest.NewRequest("GET", "/", nil)
	req.Host = "gone.team"
	r2.ServeHTTP(rec, req)
	if rec.Code != 404 || !strings.Contains(rec.Body.String(), "team/gone not found") {
		t.Errorf("unknown service: %d %q", rec.Code, rec.Body.String())
	}

	if _, err := New(ctx, Config{OperatorURL: "not a url"}, Options{Endpoints: notFoundSource{}}); err == nil {
		t.Error("New accepted a bad operator URL")
	}
	if _, err := New(ctx, Config{}, Options{}); err == nil {
		t.Error("New accepted no EndpointSource")
	}
}

// Close answers every held request 503 with a Retry-After, so a client
// knows to come back, through another resolver pod, soon.
func TestCloseAnswersHeldRequests(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	e := newEnv(t, testConfig())
	type answer struct {
		got        string
		retryAfter string
	}
	done := make(chan answer, 1)
	client := newClient(t)
	req := e.request(t, context.Background(), "GET", "/", nil)
	go func() {
		resp, err := client.Do(req)
		if err != nil {
			done <- answer{got: err.Error()}
			return
		}
		body, err := readBody(resp)
		if err != nil {
			body = err.Error()
		}
		done <- answer{fmt.Sprint(resp.StatusCode, " ", body), resp.Header.Get("Retry-After")}
	}()
	resolvertest.Eventually(t, 5*time.Second, "held", func() bool { return e.r.holds.Held(testSvc) == 1 })
	e.r.Close()
	select {
	case a := <-done:
		if !strings.HasPrefix(a.got, "503 ") || !strings.Contains(a.got, "shutting down") {
			t.Fatalf("got %q", a.got)
		}
		if a.retryAfter != "1" {
			t.Errorf("Retry-After %q, want 1", a.retryAfter)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("held request not answered on Close")
	}
}
