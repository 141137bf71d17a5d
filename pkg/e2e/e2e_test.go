package e2e

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/names"
	"github.com/elasti-dev/elasti/pkg/resolver"
	"github.com/elasti-dev/elasti/pkg/testenv"
)

const deploymentKind = elastiv1alpha1.KindDeployment

// The whole story: a service at zero, a burst of requests held by the
// resolver, one wake, and every request answered by a real pod.
func TestColdStartHoldsEveryRequestAndWakesOnce(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil)
	s.Fronted("web", 0)

	const n = 200
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	var wg sync.WaitGroup
	results := make([]echo, n)
	errs := make([]error, n)
	start := time.Now()
	for i := range n {
		wg.Go(func() {
			resp, err := s.do(t, client, http.MethodGet, "web", fmt.Sprintf("/echo?i=%d", i), nil)
			if err != nil {
				errs[i] = err
				return
			}
			if resp.StatusCode != http.StatusOK {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				errs[i] = fmt.Errorf("status %d: %s", resp.StatusCode, b)
				return
			}
			results[i] = decodeEcho(t, resp)
		})
	}
	wg.Wait()
	t.Logf("%d requests held and answered in %s", n, time.Since(start))
	pods := s.ReadyPodIPs("web")
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("request %d lost: %v", i, errs[i])
		}
		if results[i].Query != fmt.Sprintf("i=%d", i) || !slices.Contains(pods, results[i].ServedBy) {
			t.Fatalf("request %d answered %+v; want its own query, served by one of %v", i, results[i], pods)
		}
	}
	if writes := testenv.CountScaleWrites(t, s.NS, "deployments", "web"); writes != 1 {
		t.Errorf("%d requests caused %d scale-ups; want exactly 1", n, writes)
	}
	s.WaitMode("web", elastiv1alpha1.ModeServe)
}

func TestServeModeForwardsRequestsUnchanged(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil)
	s.Fronted("web", 1)

	body := []byte(`{"order":42}`)
	req, err := http.NewRequest(http.MethodPut, s.ResolverURL+"/orders/42?expand=items&x=%2F", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = s.host("web", 80)
	req.Header.Set("X-Request-Id", "abc-123")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got := decodeEcho(t, resp)
	sum := sha256.Sum256(body)
	switch {
	case got.Method != http.MethodPut, got.Path != "/orders/42", got.Query != "expand=items&x=%2F":
		t.Errorf("request line changed: %+v", got)
	case got.Header.Get("X-Request-Id") != "abc-123", got.Header.Get("Content-Type") != "application/json":
		t.Errorf("headers changed: %v", got.Header)
	case got.BodySHA256 != hex.EncodeToString(sum[:]):
		t.Errorf("body changed: %d bytes", got.BodyBytes)
	case got.Header.Get("X-Forwarded-For") == "" || got.Header.Get("X-Forwarded-Proto") != "http":
		t.Errorf("X-Forwarded-For %q, X-Forwarded-Proto %q", got.Header.Get("X-Forwarded-For"), got.Header.Get("X-Forwarded-Proto"))
	case !slices.Contains(s.ReadyPodIPs("web"), got.ServedBy):
		t.Errorf("served by %s, not a ready pod", got.ServedBy)
	}
}

func TestLargeBodiesStreamBothWaysIntact(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil)
	s.Fronted("web", 1)
	const size = 32 << 20

	// Upload: a streamed body of unknown length, checked by the backend.
	pr, pw := io.Pipe()
	h := sha256.New()
	go func() {
		_, err := io.CopyN(io.MultiWriter(pw, h), rand.Reader, size)
		pw.CloseWithError(err)
	}()
	resp, err := s.do(t, http.DefaultClient, http.MethodPost, "web", "/upload", pr)
	if err != nil {
		t.Fatal(err)
	}
	got := decodeEcho(t, resp)
	if got.BodyBytes != size || got.BodySHA256 != hex.EncodeToString(h.Sum(nil)) {
		t.Errorf("upload: backend saw %d bytes, sha %s; sent %d, sha %x", got.BodyBytes, got.BodySHA256, size, h.Sum(nil))
	}

	// Download: checked against the trailer the backend computed.
	resp, err = s.do(t, http.DefaultClient, http.MethodGet, "web", fmt.Sprintf("/download?bytes=%d&seed=7", size), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	h.Reset()
	n, err := io.Copy(h, resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if want := resp.Trailer.Get("X-Body-SHA256"); n != size || want != hex.EncodeToString(h.Sum(nil)) {
		t.Errorf("download: %d bytes, sha %x; trailer says %q", n, h.Sum(nil), want)
	}
}

func TestGRPCUnaryOverH2C(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil)
	s.grpcApp(t, "greeter", 1)
	s.ElastiService("greeter", "greeter", deploymentKind, "greeter")
	s.WaitMode("greeter", elastiv1alpha1.ModeServe)

	msg := []byte("\x0a\x05world") // a protobuf string field
	frame := make([]byte, 5+len(msg))
	binary.BigEndian.PutUint32(frame[1:], uint32(len(msg)))
	copy(frame[5:], msg)
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	req, err := http.NewRequest(http.MethodPost, s.ResolverURL+"/helloworld.Greeter/SayHello", bytes.NewReader(frame))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = s.host("greeter", grpcPort)
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("TE", "trailers")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusOK || !bytes.Equal(got, frame) {
		t.Fatalf("HTTP/%d %d, body %q; want HTTP/2 200 echoing the message", resp.ProtoMajor, resp.StatusCode, got)
	}
	if resp.Trailer.Get("Grpc-Status") != "0" || !slices.Contains(s.ReadyPodIPs("greeter"), resp.Trailer.Get("X-Served-By")) {
		t.Errorf("trailers %v; want grpc-status 0 from a ready pod", resp.Trailer)
	}
}

func TestWebSocketEcho(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil)
	s.Fronted("web", 1)

	u, err := url.Parse(s.ResolverURL)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	key := "dGhlIHNhbXBsZSBub25jZQ=="
	fmt.Fprintf(conn, "GET /ws HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n", s.host("web", 80), key)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Sec-WebSocket-Accept") != sha1Sum(key+"258EAFA5-E914-47DA-95CA-C5AB0DC85B11") {
		t.Fatalf("handshake answered %d %v", resp.StatusCode, resp.Header)
	}
	for _, m := range []string{"hello", strings.Repeat("x", 10000), "bye"} {
		if _, err := conn.Write([]byte(m)); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(m))
		if _, err := io.ReadFull(br, got); err != nil {
			t.Fatal(err)
		}
		if string(got) != m {
			t.Fatalf("echo %q, want %q", got[:min(len(got), 20)], m[:min(len(m), 20)])
		}
	}
}

func TestProbeResponseIsAnsweredWithoutWaking(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil)
	s.App("web", 0)
	s.ElastiServiceWith("web", "web", deploymentKind, "web", func(es *elastiv1alpha1.ElastiService) {
		es.Spec.ProbeResponse = []elastiv1alpha1.ProbeResponseRule{{
			Path:     &elastiv1alpha1.PathMatch{Type: elastiv1alpha1.MatchExact, Value: "/healthz"},
			Headers:  []elastiv1alpha1.NameValueMatch{{Name: "User-Agent", Type: elastiv1alpha1.MatchRegularExpression, Value: "kube-probe/.*"}},
			Response: elastiv1alpha1.ProbeCannedAnswer{Status: 200, Body: "asleep but fine"},
		}}
	})
	s.WaitMode("web", elastiv1alpha1.ModeProxy)
	req, err := http.NewRequest(http.MethodGet, s.ResolverURL+"/healthz", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = s.host("web", 80)
	req.Header.Set("User-Agent", "kube-probe/1.36")
	s.Eventually("the probe rule to answer", func() (bool, string) {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, err.Error()
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode == 200 && string(b) == "asleep but fine", fmt.Sprintf("%d %q", resp.StatusCode, b)
	})
	s.HoldsReplicas(deploymentKind, "web", 0, time.Second)
	if writes := testenv.CountScaleWrites(t, s.NS, "deployments", "web"); writes != 0 {
		t.Errorf("a probe caused %d scale writes", writes)
	}
}

func TestOperatorUnreachableThenBack(t *testing.T) {
	t.Parallel()
	addr := closedLoopbackAddr(t) // the operator is "down"
	s := newStack(t, func(c *resolver.Config) {
		c.OperatorURL = "http://" + addr
		c.RequestTimeout = 1500 * time.Millisecond
	})
	s.Fronted("web", 0)

	resp, err := s.do(t, http.DefaultClient, http.MethodGet, "web", "/echo", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusGatewayTimeout || !strings.Contains(string(b), "web") {
		t.Fatalf("with the operator down: %d %q; want 504 naming the service", resp.StatusCode, b)
	}

	// The operator comes back on that address: the resolver recovers.
	back, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("re-listen on %s: %v", addr, err)
	}
	proxy := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		forward, _ := http.NewRequest(r.Method, s.ScaleURL+r.URL.Path, r.Body)
		forward.Header = r.Header
		res, err := http.DefaultClient.Do(forward)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer res.Body.Close()
		w.WriteHeader(res.StatusCode)
		_, _ = io.Copy(w, res.Body)
	})}
	go func() { _ = proxy.Serve(back) }()
	t.Cleanup(func() { proxy.Close() })
	s.Eventually("a request to succeed once the operator is back", func() (bool, string) {
		resp, err := s.do(t, http.DefaultClient, http.MethodGet, "web", "/echo", nil)
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, fmt.Sprintf("status %d", resp.StatusCode)
	})
}

func TestQueueOverflowIs503(t *testing.T) {
	t.Parallel()
	addr := closedLoopbackAddr(t)
	s := newStack(t, func(c *resolver.Config) {
		c.OperatorURL = "http://" + addr // never wakes anything
		c.PerServiceQueue = 3
		c.RequestTimeout = 3 * time.Second
	})
	s.Fronted("web", 0)

	var wg sync.WaitGroup
	codes := make(chan int, 6)
	for range 6 {
		wg.Go(func() {
			resp, err := s.do(t, http.DefaultClient, http.MethodGet, "web", "/echo", nil)
			if err != nil {
				codes <- 0
				return
			}
			if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "" {
				codes <- -1
			} else {
				codes <- resp.StatusCode
			}
			resp.Body.Close()
		})
	}
	wg.Wait()
	close(codes)
	count := map[int]int{}
	for c := range codes {
		count[c]++
	}
	if count[http.StatusServiceUnavailable] != 3 || count[http.StatusGatewayTimeout] != 3 {
		t.Errorf("codes %v; want 3 held (then 504) and 3 refused with 503 and Retry-After", count)
	}
}

// TestDeletedEndpointIsNeverUsed tests the resolver's own choice of
// endpoint, so it stays here, sending to the resolver directly: on the real
// path a Service in serve mode is reached through kube-proxy and the
// resolver is not in it (pkg/e2e/traffic tests that path). Two of three
// pods are deleted; once the resolver's source, the private Service's
// EndpointSlice, lists only the third, every request goes to it. Before
// that, the resolver may still list a deleted pod that no longer accepts:
// it must then try another endpoint, never answer 502 (issue #10's flake;
// pkg/resolver's TestGoneEndpointsStillListedCostNoRequest pins it down).
func TestDeletedEndpointIsNeverUsed(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil)
	s.Fronted("web", 3)
	s.Eventually("three ready pods", func() (bool, string) {
		ips := s.ReadyPodIPs("web")
		return len(ips) == 3, fmt.Sprint(ips)
	})
	before := s.ReadyPodIPs("web")
	s.Scale(deploymentKind, "web", 1)
	var remaining []string
	s.Eventually("one ready pod left, both Services' slices listing only it, the deleted pods' IPs gone", func() (bool, string) {
		remaining = s.ReadyPodIPs("web")
		public, private := s.sliceReadyIPs("web"), s.sliceReadyIPs(names.PrivateService("web"))
		up, err := network.IPs()
		if err != nil {
			t.Fatal(err)
		}
		gone := !slices.ContainsFunc(before, func(ip string) bool { return !slices.Contains(remaining, ip) && slices.Contains(up, ip) })
		return len(remaining) == 1 && slices.Equal(public, remaining) && slices.Equal(private, remaining) && gone,
			fmt.Sprintf("pods %v, public slice %v, private slice %v, deleted pods' IPs gone %v", remaining, public, private, gone)
	})
	// The resolver's informer follows within moments; until it has, a
	// request may try a deleted pod first, and still reaches the survivor.
	client := &http.Client{Timeout: 10 * time.Second}
	s.Eventually("requests served by the remaining pod", func() (bool, string) {
		resp, err := s.do(t, client, http.MethodGet, "web", "/echo", nil)
		if err != nil {
			return false, err.Error()
		}
		got := decodeEcho(t, resp)
		return got.ServedBy == remaining[0], got.ServedBy
	})
	for i := range 50 {
		resp, err := s.do(t, client, http.MethodGet, "web", "/echo", nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if got := decodeEcho(t, resp); got.ServedBy != remaining[0] {
			t.Fatalf("request %d served by %s, a deleted pod; only %s is left", i, got.ServedBy, remaining[0])
		}
	}
}

// closedLoopbackAddr reserves a loopback port and closes it again: nothing
// answers there until the test listens on it itself.
func closedLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
