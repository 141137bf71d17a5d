package traffic

import (
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/resolver"
	"github.com/elasti-dev/elasti/test/localcluster/realnet"
	"github.com/elasti-dev/elasti/test/testenv"
)

// largeBody is the size of each direction of a large-body exchange: far
// more than the resolver reads into memory while it holds a request
// (64 KiB) and than the TCP buffers on the way, so the body has to stream.
const largeBody = 32 << 20

// way is one way a client pod calls web: by its full DNS name, or by its
// ClusterIP with the full name as the Host. Both wake web whether the
// resolver routes by port or, as KubeElasti's resolver does, by Host; the
// short name and a bare ClusterIP, which need routing by port, are
// perport_test.go's.
type way struct {
	name string
	addr string // what the client connects to
	host string // the Host it sends; "" for addr's
}

func (s *scenario) ways() []way {
	s.t.Helper()
	return []way{
		{name: "DNS name", addr: s.fqdn()},
		{name: "ClusterIP", addr: s.clusterIP(), host: s.fqdn()},
	}
}

// hostPort is w's address and Host for port: the port is left out for 80,
// as clients do.
func (w way) hostPort(port int) (addr, host string) {
	addr, host = w.addr, w.host
	if port != 80 {
		addr += ":" + strconv.Itoa(port)
		if host != "" {
			host += ":" + strconv.Itoa(port)
		}
	}
	return addr, host
}

// newProtocolsScenario is a scenario whose Service also has the gRPC echo
// port.
func newProtocolsScenario(t *testing.T) *scenario {
	t.Helper()
	startGRPCEcho(t, testBed(t))
	s := newScenarioWithPorts(t, grpcEchoServicePort)
	s.waitEveryResolverListens(2)
	return s
}

var (
	expectOnce                   sync.Once
	expectUpload, expectDownload string
)

// largeBodySHA256s are the SHA-256s of what a large-body exchange sends
// and should receive (seed 1 up, 2 down).
func largeBodySHA256s() (upload, download string) {
	expectOnce.Do(func() {
		expectUpload, expectDownload = streamSHA256(1, largeBody), streamSHA256(2, largeBody)
	})
	return expectUpload, expectDownload
}

// largeBody uploads largeBody bytes to web's /stream the way w says and
// has largeBody bytes streamed back; both must arrive intact, and the
// answer must come from a Ready pod. It returns the answer's header.
func (s *scenario) largeBody(w way, timeout time.Duration) http.Header {
	s.t.Helper()
	addr, host := w.hostPort(80)
	var res streamResult
	call := streamCall{URL: "http://" + addr + "/stream", Host: host, Upload: largeBody, Download: largeBody, Seed: 1}
	if err := s.client.Run(s.ctx, streamProgram, call, timeout, &res); err != nil {
		s.t.Fatal(err)
	}
	if res.Status != http.StatusOK {
		s.t.Fatalf("the large-body exchange was answered %d: %q", res.Status, res.Body)
	}
	upload, download := largeBodySHA256s()
	if res.Sent != largeBody || res.SentSHA256 != upload {
		s.t.Fatalf("the client pod sent %d bytes (sha %s); the test means %d (sha %s)", res.Sent, res.SentSHA256, int64(largeBody), upload)
	}
	if got, sha := res.Header.Get(uploadBytesHeader), res.Header.Get(uploadSHA256Header); got != strconv.Itoa(largeBody) || sha != upload {
		s.t.Errorf("upload: the pod received %s bytes (sha %s); sent %d (sha %s)", got, sha, int64(largeBody), upload)
	}
	if res.Received != largeBody || res.ReceivedSHA256 != download {
		s.t.Errorf("download: the client pod received %d bytes (sha %s); the pod sent %d (sha %s)", res.Received, res.ReceivedSHA256, int64(largeBody), download)
	}
	s.expectReadyPod(res.Header.Get(servedByHeader))
	s.t.Logf("%s: %d MiB each way in %s", w.name, largeBody>>20, res.Duration.Round(time.Millisecond))
	return res.Header
}

// webSocket holds a WebSocket conversation with web's /ws the way w says:
// every message, text and binary, comes back intact from a Ready pod.
func (s *scenario) webSocket(w way, timeout time.Duration) {
	s.t.Helper()
	host := w.host
	if host == "" {
		host = w.addr
	}
	var res websocketResult
	if err := s.client.Run(s.ctx, websocketProgram, websocketCall{Addr: net.JoinHostPort(w.addr, "80"), Host: host}, timeout, &res); err != nil {
		s.t.Fatal(err)
	}
	if want := len(websocketMessages()); res.Echoed != want {
		s.t.Fatalf("%d of %d WebSocket messages echoed", res.Echoed, want)
	}
	s.expectReadyPod(res.ServedBy)
}

// grpcUnary makes a unary gRPC call over h2c to web's gRPC echo port the
// way w says: the message comes back intact with status OK from a Ready
// pod. It returns the answer.
func (s *scenario) grpcUnary(w way, timeout time.Duration) realnet.Response {
	s.t.Helper()
	addr, host := w.hostPort(grpcEchoPort)
	// Short enough that the frame's length prefix is ASCII: the client pod
	// reports bodies as JSON strings.
	msg := []byte("ping from a client pod in " + s.e.NS)
	resp := s.do(realnet.Request{
		Method: http.MethodPost, URL: "http://" + addr + "/echo.Echo/Say", Host: host, Protocol: realnet.ProtocolH2C,
		Header: map[string]string{"Content-Type": "application/grpc", "TE": "trailers"},
		Body:   string(grpcFrame(msg)), Timeout: timeout,
	})
	if resp.Status != http.StatusOK || resp.Body != string(grpcFrame(msg)) || resp.Trailer.Get("Grpc-Status") != "0" {
		s.t.Fatalf("want the message echoed with grpc-status 0; got %s, trailers %v", resp, resp.Trailer)
	}
	s.expectReadyPod(resp.Trailer.Get(servedByHeader))
	return resp
}

// scaleWrites counts the scale writes to web's Deployment so far.
func (s *scenario) scaleWrites() int {
	s.t.Helper()
	return testenv.CountScaleWrites(s.t, s.e.NS, "deployments", app)
}

// expectReadyPod fails unless servedBy is a Ready pod of web.
func (s *scenario) expectReadyPod(servedBy string) {
	s.t.Helper()
	if ips := s.e.ReadyPodIPs(app); !slices.Contains(ips, servedBy) {
		s.t.Fatalf("answered by %q, which is not a Ready pod of %s (Ready: %v)", servedBy, app, ips)
	}
}

// expectWokenOnce checks that the target was scaled up, by one write since
// writesBefore, and that web serves again.
func (s *scenario) expectWokenOnce(writesBefore int) {
	s.t.Helper()
	if got := s.e.Replicas(elastiv1alpha1.KindDeployment, app); got != 1 {
		s.t.Fatalf("target has %d replicas after the wake, want 1", got)
	}
	if writes := s.scaleWrites() - writesBefore; writes != 1 {
		s.t.Errorf("%d scale writes for one wake; want 1", writes)
	}
	s.e.WaitMode(app, elastiv1alpha1.ModeServe)
}

// TestProtocolsPassIntact: large bodies streamed both ways, a WebSocket
// conversation and a unary gRPC call over h2c reach web's pod intact, by
// DNS name and by ClusterIP: awake, where kube-proxy sends them straight
// to the pod, and at zero, where the resolver holds each while web wakes
// and then forwards it. At zero each exchange is the only request, so it
// is surely the one held.
func TestProtocolsPassIntact(t *testing.T) {
	sideBySideScenario(t)
	s := newProtocolsScenario(t)
	ways := s.ways()
	for _, w := range ways {
		t.Run("awake/"+w.name, func(t *testing.T) {
			s := s.in(t)
			if h := s.largeBody(w, quickTimeout); h.Get(resolver.DefaultColdStartHeader) != "" {
				t.Errorf("awake, the answer says it was held: %v", h)
			}
			s.webSocket(w, quickTimeout)
			s.grpcUnary(w, quickTimeout)
		})
	}
	for _, tc := range []struct {
		name     string
		way      way
		exchange func(s *scenario, w way)
	}{
		{"large body by DNS name", ways[0], func(s *scenario, w way) { s.expectHeld(s.largeBody(w, wakeTimeout)) }},
		{"large body by ClusterIP", ways[1], func(s *scenario, w way) { s.expectHeld(s.largeBody(w, wakeTimeout)) }},
		{"WebSocket by DNS name", ways[0], func(s *scenario, w way) { s.webSocket(w, wakeTimeout) }},
		{"gRPC by ClusterIP", ways[1], func(s *scenario, w way) { s.expectHeld(s.grpcUnary(w, wakeTimeout).Header) }},
	} {
		t.Run("at zero/"+tc.name, func(t *testing.T) {
			s := s.in(t)
			s.sleep()
			before := s.scaleWrites()
			tc.exchange(s, tc.way)
			s.expectWokenOnce(before)
		})
	}
}

// expectHeld checks that an HTTP answer says the resolver held it.
func (s *scenario) expectHeld(h http.Header) {
	s.t.Helper()
	if h.Get(resolver.DefaultColdStartHeader) == "" {
		s.t.Errorf("the answer has no %s header, so it was not held: %v", resolver.DefaultColdStartHeader, h)
	}
}
