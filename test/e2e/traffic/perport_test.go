package traffic

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/resolver"
	"github.com/elasti-dev/elasti/pkg/resolver/identify"
	"github.com/elasti-dev/elasti/test/localcluster/realnet"
	"github.com/elasti-dev/elasti/test/testenv"
)

// The app pods' other protocols, each answered for every live pod IP by
// one server in the node namespace, like the HTTP echo on appPort.
const (
	// resolverService is manifests/' resolver Service; its per-port-routing
	// port serves the route table.
	resolverService = "elasti-resolver-service"

	tcpEchoPort = 7000 // raw TCP: answers "<pod IP> " and echoes
	// tcpEchoLimit is how long the TCP echo keeps a connection: longer
	// than any client waits, so a connection closed within a client's
	// timeout was not closed by the echo.
	tcpEchoLimit = 3 * time.Minute
	tlsPort      = 8443 // HTTPS with the bed's own certificate
)

// protocolPorts are the Service ports the per-port tests add to web. TLS
// and raw TCP declare no appProtocol: the resolver tells them from HTTP by
// their first bytes.
var protocolPorts = []corev1.ServicePort{
	{Name: "tcp", Port: 7000, TargetPort: intstr.FromInt32(tcpEchoPort)},
	{Name: "https", Port: 443, TargetPort: intstr.FromInt32(tlsPort)},
	grpcEchoServicePort,
}

var (
	protocolsOnce sync.Once
	protocolsErr  error
	// backendCert is the SHA-256 of the TLS backend's certificate, hex.
	backendCert string
)

// startProtocolBackends starts the TCP, TLS and gRPC servers once per bed.
func startProtocolBackends(t testing.TB, b *bed) {
	t.Helper()
	protocolsOnce.Do(func() { protocolsErr = listenProtocols(b) })
	if protocolsErr != nil {
		t.Fatal(protocolsErr)
	}
	startGRPCEcho(t, b)
}

func listenProtocols(b *bed) error {
	tcpLn, err := b.Network.Listen("tcp", fmt.Sprintf("0.0.0.0:%d", tcpEchoPort))
	if err != nil {
		return err
	}
	go serveTCPEcho(tcpLn)

	// httptest's certificate; the client pod checks which one it saw.
	tlsLn, err := b.Network.Listen("tcp", fmt.Sprintf("0.0.0.0:%d", tlsPort))
	if err != nil {
		return err
	}
	tlsSrv := httptest.NewUnstartedServer(http.HandlerFunc(echoHandler))
	tlsSrv.Listener = tlsLn
	tlsSrv.StartTLS()
	sum := sha256.Sum256(tlsSrv.Certificate().Raw)
	backendCert = hex.EncodeToString(sum[:])

	return nil
}

// localIP is the pod IP a connection reached.
func localIP(c net.Conn) string {
	host, _, _ := net.SplitHostPort(c.LocalAddr().String())
	return host
}

func serveTCPEcho(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(tcpEchoLimit))
			_, _ = io.WriteString(c, localIP(c)+" ")
			_, _ = io.Copy(c, c)
		}()
	}
}

// grpcFrame is one uncompressed gRPC length-prefixed message.
func grpcFrame(msg []byte) []byte {
	frame := make([]byte, 5+len(msg))
	binary.BigEndian.PutUint32(frame[1:5], uint32(len(msg)))
	copy(frame[5:], msg)
	return frame
}

// newProtocolScenario is a scenario whose Service also has TCP, TLS and
// gRPC ports, and waits until every resolver pod listens on the resolver
// port of each, as its route table says.
func newProtocolScenario(t *testing.T) *scenario {
	t.Helper()
	startProtocolBackends(t, testBed(t))
	s := newScenarioWithPorts(t, protocolPorts...)
	s.waitResolverPorts(1 + len(protocolPorts))
	return s
}

// waitResolverPorts waits until the resolver's route table (GET /routes on
// its internal port, asked from the client pod) lists n listening
// ports for web, and until the operator recorded them.
func (s *scenario) waitResolverPorts(n int) {
	s.t.Helper()
	routes := fmt.Sprintf("http://%s.%s:%d/routes", resolverService, elastiNamespace, resolverInternalPort)
	s.e.Eventually(fmt.Sprintf("the resolver to listen on %d ports for web", n), func() (bool, string) {
		if got := len(s.e.Get(app).Status.ResolverPorts); got != n {
			return false, fmt.Sprintf("status.resolverPorts has %d entries", got)
		}
		resp := s.do(realnet.Request{URL: routes, Timeout: 2 * time.Second})
		var table []identify.RouteStatus
		if err := json.Unmarshal([]byte(resp.Body), &table); err != nil {
			return false, resp.String()
		}
		listening := 0
		for _, r := range table {
			if r.Namespace == s.e.NS && r.Service == app && r.Listening {
				listening++
			}
		}
		return listening == n, resp.String()
	})
}

// expectWokenHeld is expectWoken for an HTTP answer that was held: it also
// carries the cold-start header.
func (s *scenario) expectWokenHeld(resp realnet.Response) {
	s.t.Helper()
	s.expectWoken(resp)
	if h := resp.Header.Get(resolver.DefaultColdStartHeader); h == "" {
		s.t.Errorf("a held response has no %s header: %v", resolver.DefaultColdStartHeader, resp.Header)
	}
}

// expectLastHeld waits for web's status.lastHeld, the resolver's report
// to the operator of the request resp is the answer to, the only one
// held: the wait its cold-start header gave the client, to the
// millisecond (the status keeps milliseconds; the header rounds).
func (s *scenario) expectLastHeld(resp realnet.Response) {
	s.t.Helper()
	header, err := time.ParseDuration(resp.Header.Get(resolver.DefaultColdStartHeader))
	if err != nil {
		s.t.Fatalf("the held response's %s header: %v", resolver.DefaultColdStartHeader, err)
	}
	s.e.Eventually("web's status.lastHeld to be the held request's wait", func() (bool, string) {
		held := s.e.Get(app).Status.LastHeld
		if held == nil {
			return false, "not written"
		}
		off := held.Duration - header
		return off.Abs() <= time.Millisecond, fmt.Sprintf("lastHeld %s, the header said %s", held.Duration, header)
	})
}

// TestEveryClientWakesAService: the ways of calling a sleeping Service
// that carry no "<svc>.<ns>" Host each wake it and are answered by the new
// pod, because the resolver port they arrive on names the Service: a
// same-namespace short name, the bare ClusterIP, and an ingress with a
// public hostname and no elasti-specific annotation.
func TestEveryClientWakesAService(t *testing.T) {
	sideBySideScenario(t)
	s := newScenario(t)
	s.waitResolverPorts(1)
	// Its own host per test namespace: the ingress controller routes a
	// host claimed by two Ingresses (one of an earlier run's namespace,
	// still being deleted) to either.
	publicHost := "shop-" + s.e.NS + ".example.com"
	s.ingress("public", publicHost)
	ingress := "http://" + ingressAddr + "/"
	s.waitIngressRoutes(realnet.Request{URL: ingress, Host: publicHost})
	s.setProbeRule()
	for _, tc := range []struct {
		name      string
		req       realnet.Request
		ingressed bool
	}{
		{"short name", realnet.Request{URL: "http://" + app + "/"}, false},
		{"ClusterIP", realnet.Request{URL: "http://" + s.clusterIP() + "/"}, false},
		{"ingress public host", realnet.Request{URL: ingress, Host: publicHost}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := s.in(t)
			s.sleep()
			if tc.ingressed {
				s.waitIngressReachesResolver(publicHost)
			}
			tc.req.Timeout = wakeTimeout
			s.expectWokenHeld(s.do(tc.req))
		})
	}
}

// TestGRPCWakesAService: a unary gRPC call by short name to a sleeping
// Service's h2c port is held, wakes it and gets the new pod's answer with
// status OK.
func TestGRPCWakesAService(t *testing.T) {
	sideBySideScenario(t)
	s := newProtocolScenario(t)
	s.sleep()
	resp := s.do(realnet.Request{
		Method: http.MethodPost, URL: fmt.Sprintf("http://%s:%d/echo.Echo/Say", app, grpcEchoPort), Protocol: realnet.ProtocolH2C,
		Header: map[string]string{"Content-Type": "application/grpc", "TE": "trailers"},
		Body:   string(grpcFrame([]byte("hello"))), Timeout: wakeTimeout,
	})
	if resp.Status != 200 || resp.Trailer.Get("Grpc-Status") != "0" || resp.Body != string(grpcFrame([]byte("hello"))) {
		t.Fatalf("want a gRPC OK echoing hello, got %s, trailers %v", resp, resp.Trailer)
	}
	s.expectServedByReadyPod(resp.Trailer.Get(servedByHeader), resp)
}

// TestTLSPassthroughWakesAService: HTTPS to a sleeping Service whose pods
// terminate TLS is held as a TCP stream (the ClientHello is not HTTP),
// wakes it, and the client completes its handshake with the pod itself:
// it sees the pod's certificate.
func TestTLSPassthroughWakesAService(t *testing.T) {
	sideBySideScenario(t)
	s := newProtocolScenario(t)
	s.sleep()
	resp := s.do(realnet.Request{URL: fmt.Sprintf("https://%s/", app), Timeout: wakeTimeout})
	if resp.PeerCertificate != backendCert {
		t.Fatalf("the client saw certificate %q, want the pod's %q (%s)", resp.PeerCertificate, backendCert, resp)
	}
	s.expectWoken(resp)
}

// TestRawTCPWakesAService: a raw TCP client of a sleeping Service is held,
// wakes it, and is spliced byte for byte to the new pod.
func TestRawTCPWakesAService(t *testing.T) {
	sideBySideScenario(t)
	s := newProtocolScenario(t)
	s.sleep()
	s.wakeByTCP()
}

// wakeByTCP sends "ping" by short name to web's raw TCP port and checks
// that a Ready pod echoed it.
func (s *scenario) wakeByTCP() realnet.Response {
	s.t.Helper()
	resp := s.do(realnet.Request{URL: fmt.Sprintf("tcp://%s:7000", app), Protocol: realnet.ProtocolTCP, Body: "ping", Timeout: wakeTimeout})
	servedBy, echoed, _ := strings.Cut(resp.Body, " ")
	if resp.Err != "" || echoed != "ping" {
		s.t.Fatalf("want the pod's echo of ping, got %s", resp)
	}
	s.expectServedByReadyPod(servedBy, resp)
	return resp
}

// expectServedByReadyPod checks that servedBy is a Ready pod of web and
// the target was woken, for answers that are not the HTTP echo.
func (s *scenario) expectServedByReadyPod(servedBy string, resp realnet.Response) {
	s.t.Helper()
	if ips := s.e.ReadyPodIPs(app); !slices.Contains(ips, servedBy) {
		s.t.Fatalf("answered by %q, which is not a Ready pod of %s (Ready: %v): %s", servedBy, app, ips, resp)
	}
	if got := s.e.Replicas(elastiv1alpha1.KindDeployment, app); got != 1 {
		s.t.Fatalf("target has %d replicas after the wake, want 1", got)
	}
	s.t.Logf("woken in %s (%s), answered by pod %s", resp.Duration.Round(time.Millisecond), resp.Phases, servedBy)
}

// resolverPodIP is the address of a Ready resolver pod.
func (s *scenario) resolverPodIP() string {
	s.t.Helper()
	list, err := s.e.Kube.DiscoveryV1().EndpointSlices(elastiNamespace).List(s.ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=" + resolverService})
	if err != nil {
		s.t.Fatal(err)
	}
	for _, sl := range list.Items {
		if ips := testenv.SliceIPs(sl); len(ips) > 0 {
			return ips[0]
		}
	}
	s.t.Fatal("no Ready resolver pod")
	return ""
}

// resolverPortFor is the resolver port the operator assigned to web's
// Service port.
func (s *scenario) resolverPortFor(servicePort int32) int32 {
	s.t.Helper()
	for _, p := range s.e.Get(app).Status.ResolverPorts {
		if p.Service == app && p.Port == servicePort {
			return p.ResolverPort
		}
	}
	s.t.Fatalf("no resolver port for %s:%d in %v", app, servicePort, s.e.Get(app).Status.ResolverPorts)
	return 0
}
