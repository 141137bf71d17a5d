package podcheck

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/h2c"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/elasti-dev/elasti/pkg/podcheck/podchecktest"
)

// The checks run against real servers on 127.0.0.x, standing for pod
// addresses (podchecktest): the tests connect to nothing else.

var (
	serveAt   = podchecktest.Serve
	probePod  = podchecktest.Pod
	httpProbe = podchecktest.HTTPProbe
)

func endpointOf(pod *corev1.Pod, port int32) Endpoint {
	return Endpoint{IP: pod.Status.PodIP, Port: port, Pod: pod.Name, UID: pod.UID}
}

// checkOnce builds pod's plan and runs one round of its checks.
func checkOnce(t *testing.T, pod *corev1.Pod, port int32) bool {
	t.Helper()
	plan, err := PlanFor(pod, endpointOf(pod, port))
	if err != nil {
		t.Fatalf("planFor: %v", err)
	}
	return NewChecker().CheckPod(context.Background(), plan, plan.NewState())
}

func TestDirectCheckHTTPGet(t *testing.T) {
	var status atomic.Int32
	var gotHost, gotToken, gotQuery, gotUA atomic.Value
	_, port := serveAt(t, "127.0.0.2", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ready":
			gotHost.Store(r.Host)
			gotToken.Store(r.Header.Get("X-Token"))
			gotQuery.Store(r.URL.RawQuery)
			gotUA.Store(r.Header.Get("User-Agent"))
			w.WriteHeader(int(status.Load()))
		case "/elsewhere":
			http.Redirect(w, r, "http://192.0.2.1/never-followed", http.StatusFound)
		case "/here":
			http.Redirect(w, r, "/failing", http.StatusMovedPermanently)
		case "/failing":
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	// The probe names its port by the container port's name, sets a header
	// and a Host, and has a query.
	probe := httpProbe("/ready?deep=1", intstr.FromString("web"))
	probe.HTTPGet.HTTPHeaders = []corev1.HTTPHeader{{Name: "X-Token", Value: "t0k"}, {Name: "Host", Value: "web.example"}}
	pod := probePod("127.0.0.2", port, probe, nil)

	for _, tc := range []struct {
		status int32
		want   bool
	}{{200, true}, {204, true}, {302, true}, {399, true}, {400, false}, {404, false}, {500, false}, {503, false}} {
		status.Store(tc.status)
		if got := checkOnce(t, pod, port); got != tc.want {
			t.Errorf("readiness answering %d: check passed = %v, want %v", tc.status, got, tc.want)
		}
	}
	if gotHost.Load() != "web.example" || gotToken.Load() != "t0k" || gotQuery.Load() != "deep=1" || gotUA.Load() == "" {
		t.Errorf("the check sent Host %q, X-Token %q, query %q, User-Agent %q", gotHost.Load(), gotToken.Load(), gotQuery.Load(), gotUA.Load())
	}

	// Redirects as the kubelet: one to another host ends the check as a
	// success; one to the same host is followed, to a 500 here.
	if !checkOnce(t, probePod("127.0.0.2", port, httpProbe("/elsewhere", intstr.FromInt32(port)), nil), port) {
		t.Error("a redirect to another host failed the check; the kubelet counts it a success")
	}
	if checkOnce(t, probePod("127.0.0.2", port, httpProbe("/here", intstr.FromInt32(port)), nil), port) {
		t.Error("a redirect to the same host that ends in 500 passed the check")
	}
}

func TestDirectCheckHTTPSWithoutVerification(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.3:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil {
			w.WriteHeader(http.StatusBadRequest)
		}
	}), ReadHeaderTimeout: 5 * time.Second}}
	s.StartTLS() // a self-signed certificate nobody trusts
	t.Cleanup(s.Close)
	port := int32(l.Addr().(*net.TCPAddr).Port)
	probe := httpProbe("/", intstr.FromInt32(port))
	probe.HTTPGet.Scheme = corev1.URISchemeHTTPS
	if !checkOnce(t, probePod("127.0.0.3", port, probe, nil), port) {
		t.Error("HTTPS check against an untrusted certificate failed; the kubelet verifies none")
	}
	probe.HTTPGet.Scheme = corev1.URISchemeHTTP
	if checkOnce(t, probePod("127.0.0.3", port, probe, nil), port) {
		t.Error("plain HTTP to a TLS port passed the check")
	}
}

func TestDirectCheckTimesOut(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	_, port := serveAt(t, "127.0.0.2", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	probe := httpProbe("/slow", intstr.FromInt32(port))
	probe.TimeoutSeconds = 1
	began := time.Now()
	if checkOnce(t, probePod("127.0.0.2", port, probe, nil), port) {
		t.Error("a check that got no answer passed")
	}
	if took := time.Since(began); took < 900*time.Millisecond || took > 3*time.Second {
		t.Errorf("the check gave up after %v, want about timeoutSeconds (1s)", took)
	}
}

func TestDirectCheckTCPSocket(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.4:0")
	if err != nil {
		t.Fatal(err)
	}
	port := int32(l.Addr().(*net.TCPAddr).Port)
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("web")}}}
	pod := probePod("127.0.0.4", port, probe, nil)
	if !checkOnce(t, pod, port) {
		t.Error("tcpSocket check of a listening port failed")
	}
	_ = l.Close()
	if checkOnce(t, pod, port) {
		t.Error("tcpSocket check of a closed port passed")
	}
}

// grpcHealthServer answers grpc.health.v1.Health/Check over h2c with
// the status the service asked for has in statuses (absent: NOT_FOUND,
// an error status).
func grpcHealthServer(t *testing.T, ip string, statuses map[string]uint64) int32 {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != grpcHealthPath || r.Header.Get("Content-Type") != "application/grpc" || r.ProtoMajor != 2 {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var service string
		if len(body) > 5 && body[5] == 0x0a {
			n, k := binary.Uvarint(body[6:])
			service = string(body[6+k : 6+k+int(n)])
		}
		w.Header().Set("Content-Type", "application/grpc")
		st, ok := statuses[service]
		if !ok {
			w.Header().Set("Grpc-Status", "5") // NOT_FOUND, trailers-only
			w.WriteHeader(http.StatusOK)
			return
		}
		// An unknown field first: the reader must skip it.
		msg := []byte{0x12, 0x02, 'h', 'i', 0x08, byte(st)}
		frame := make([]byte, 5, 5+len(msg))
		binary.BigEndian.PutUint32(frame[1:], uint32(len(msg)))
		_, _ = w.Write(append(frame, msg...))
		w.Header().Set(http.TrailerPrefix+"Grpc-Status", "0")
	})
	_, port := serveAt(t, ip, h2c.NewHandler(h, &http2.Server{}))
	return port
}

func TestDirectCheckGRPC(t *testing.T) {
	port := grpcHealthServer(t, "127.0.0.5", map[string]uint64{"": grpcServing, "db": 2 /* NOT_SERVING */})
	for _, tc := range []struct {
		service *string
		want    bool
	}{{nil, true}, {ptr.To("db"), false}, {ptr.To("unknown"), false}} {
		probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: port, Service: tc.service}}}
		if got := checkOnce(t, probePod("127.0.0.5", port, probe, nil), port); got != tc.want {
			t.Errorf("grpc service %v: check passed = %v, want %v", ptr.Deref(tc.service, ""), got, tc.want)
		}
	}
}

func TestGRPCHealthFraming(t *testing.T) {
	req := grpcHealthRequest("db")
	if want := []byte{0, 0, 0, 0, 4, 0x0a, 2, 'd', 'b'}; string(req) != string(want) {
		t.Errorf("request frame = %v, want %v", req, want)
	}
	if req := grpcHealthRequest(""); string(req) != string([]byte{0, 0, 0, 0, 0}) {
		t.Errorf("empty request frame = %v", req)
	}
	for _, tc := range []struct {
		frame []byte
		want  uint64
		ok    bool
	}{
		{[]byte{0, 0, 0, 0, 2, 0x08, 1}, 1, true},
		{[]byte{0, 0, 0, 0, 0}, 0, true},                // UNKNOWN, the default
		{[]byte{1, 0, 0, 0, 2, 0x08, 1}, 0, false},      // compressed
		{[]byte{0, 0, 0, 0, 9, 0x08, 1}, 0, false},      // short
		{[]byte{0, 0, 0, 0, 2, 0x0d, 1}, 0, false},      // fixed32: not in the message
		{[]byte{0, 0, 0, 0, 3, 0x12, 9, 'x'}, 0, false}, // a field longer than the message
	} {
		if got, ok := grpcServingStatus(tc.frame); got != tc.want || ok != tc.ok {
			t.Errorf("grpcServingStatus(%v) = %d, %v; want %d, %v", tc.frame, got, ok, tc.want, tc.ok)
		}
	}
}

func TestDirectCheckStartupGatesReadiness(t *testing.T) {
	var started atomic.Bool
	var readinessHits atomic.Int32
	_, port := serveAt(t, "127.0.0.2", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/started":
			if !started.Load() {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
		case "/ready":
			readinessHits.Add(1)
		}
	}))
	pod := probePod("127.0.0.2", port, httpProbe("/ready", intstr.FromInt32(port)), httpProbe("/started", intstr.FromInt32(port)))
	plan, err := PlanFor(pod, endpointOf(pod, port))
	if err != nil {
		t.Fatal(err)
	}
	k, st := NewChecker(), plan.NewState()
	for range 3 {
		if k.CheckPod(context.Background(), plan, st) {
			t.Fatal("the pod passed while its startup probe fails")
		}
	}
	if n := readinessHits.Load(); n != 0 {
		t.Errorf("the readiness check ran %d times before the startup check passed", n)
	}
	started.Store(true)
	if !k.CheckPod(context.Background(), plan, st) {
		t.Error("the pod did not pass once its startup and readiness checks did")
	}
	// A container with only a startup probe is ready once started, as for
	// the kubelet.
	only := probePod("127.0.0.2", port, nil, httpProbe("/started", intstr.FromInt32(port)))
	if !checkOnce(t, only, port) {
		t.Error("a started container without a readiness probe is not ready")
	}
}

func TestDirectCheckSuccessThreshold(t *testing.T) {
	var fail atomic.Bool
	_, port := serveAt(t, "127.0.0.2", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fail.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	probe := httpProbe("/ready", intstr.FromInt32(port))
	probe.SuccessThreshold = 3
	pod := probePod("127.0.0.2", port, probe, nil)
	plan, err := PlanFor(pod, endpointOf(pod, port))
	if err != nil {
		t.Fatal(err)
	}
	k, st := NewChecker(), plan.NewState()
	round := func() bool { return k.CheckPod(context.Background(), plan, st) }
	if round() || round() {
		t.Fatal("passed before 3 consecutive successes")
	}
	fail.Store(true)
	if round() {
		t.Fatal("passed on a failure")
	}
	fail.Store(false)
	if round() || round() {
		t.Fatal("a failure did not start the count over")
	}
	if !round() {
		t.Error("did not pass on the third consecutive success")
	}
}

func TestDirectCheckEveryContainer(t *testing.T) {
	var sidecarReady atomic.Bool
	_, appPort := serveAt(t, "127.0.0.2", http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	_, sidePort := serveAt(t, "127.0.0.2", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !sidecarReady.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	pod := probePod("127.0.0.2", appPort, httpProbe("/", intstr.FromInt32(appPort)), nil)
	pod.Spec.InitContainers = []corev1.Container{{Name: "proxy", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
		ReadinessProbe: httpProbe("/", intstr.FromInt32(sidePort))}}
	if checkOnce(t, pod, appPort) {
		t.Error("the pod passed while its sidecar's readiness check fails")
	}
	sidecarReady.Store(true)
	if !checkOnce(t, pod, appPort) {
		t.Error("the pod did not pass with every container ready")
	}
}

func TestDirectCheckNoProbeIsLeftToTheKubelet(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.6:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := int32(l.Addr().(*net.TCPAddr).Port)
	pod := probePod("127.0.0.6", port, nil, nil)
	_, err = PlanFor(pod, endpointOf(pod, port))
	var fe *FallbackError
	if !errors.As(err, &fe) || fe.Reason != FallbackNoProbe {
		t.Errorf("a pod without probes whose port accepts: %v, want the %s fallback", err, FallbackNoProbe)
	}
}

// planFor leaves to the kubelet what it cannot check the same way, and
// every pod that is not the endpoint's.
func TestPlanForFallsBack(t *testing.T) {
	const ip = "10.244.0.7"
	ok := func() *corev1.Pod { return probePod(ip, 8080, httpProbe("/ready", intstr.FromString("web")), nil) }
	for _, tc := range []struct {
		name   string
		change func(*corev1.Pod)
		ep     func(*Endpoint)
		reason string
	}{
		{name: "checkable", reason: ""},
		{name: "exec readiness", reason: FallbackExec, change: func(p *corev1.Pod) {
			p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
		}},
		{name: "exec startup", reason: FallbackExec, change: func(p *corev1.Pod) {
			p.Spec.Containers[0].StartupProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
		}},
		{name: "exec in a second container", reason: FallbackExec, change: func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "side",
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}})
		}},
		{name: "httpGet host elsewhere", reason: FallbackHost, change: func(p *corev1.Pod) { p.Spec.Containers[0].ReadinessProbe.HTTPGet.Host = "10.0.0.1" }},
		{name: "httpGet host is the pod", reason: "", change: func(p *corev1.Pod) { p.Spec.Containers[0].ReadinessProbe.HTTPGet.Host = ip }},
		{name: "tcpSocket host elsewhere", reason: FallbackHost, change: func(p *corev1.Pod) {
			p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Host: "example.com", Port: intstr.FromInt32(80)}}}
		}},
		{name: "unknown port name", reason: FallbackNamedPort, change: func(p *corev1.Pod) { p.Spec.Containers[0].ReadinessProbe.HTTPGet.Port = intstr.FromString("admin") }},
		{name: "initialDelaySeconds long past", reason: "", change: func(p *corev1.Pod) {
			p.Spec.Containers[0].ReadinessProbe.InitialDelaySeconds = 5
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", State: corev1.ContainerState{
				Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Now().Add(-time.Minute))}}}}
		}},
		{name: "initialDelaySeconds not yet past", reason: "", change: func(p *corev1.Pod) {
			p.Spec.Containers[0].ReadinessProbe.InitialDelaySeconds = 5
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", State: corev1.ContainerState{
				Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Now().Add(-time.Second))}}}}
		}},
		// Tenant safety: the slice's address must be the pod's own.
		{name: "address is not the pod's", reason: FallbackPodMismatch, ep: func(e *Endpoint) { e.IP = "10.96.0.10" }},
		{name: "address is the pod's second IP", reason: "", change: func(p *corev1.Pod) {
			p.Status.PodIP = "10.244.9.9"
			p.Status.PodIPs = []corev1.PodIP{{IP: "10.244.9.9"}, {IP: ip}}
		}},
		{name: "another pod of that name", reason: FallbackPodMismatch, ep: func(e *Endpoint) { e.UID = types.UID("other") }},
		{name: "pod being deleted", reason: FallbackPodMismatch, change: func(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.Now()) }},
		{name: "pod without an address", reason: FallbackPodMismatch, change: func(p *corev1.Pod) { p.Status = corev1.PodStatus{} }},
		// Tenant safety: a host-network pod's address is the node's.
		{name: "host network", reason: FallbackHostNetwork, change: func(p *corev1.Pod) { p.Spec.HostNetwork = true }},
	} {
		pod := ok()
		if tc.change != nil {
			tc.change(pod)
		}
		ep := Endpoint{IP: ip, Port: 8080, Pod: "web-1", UID: "pod-uid-1"}
		if tc.ep != nil {
			tc.ep(&ep)
		}
		_, err := PlanFor(pod, ep)
		got := ""
		if fe, isFallback := err.(*FallbackError); isFallback {
			got = fe.Reason
		} else if err != nil {
			t.Errorf("%s: error %v is no fallback", tc.name, err)
		}
		if got != tc.reason {
			t.Errorf("%s: fallback %q (%v), want %q", tc.name, got, err, tc.reason)
		}
	}
}

// A probe with initialDelaySeconds is checked no sooner than the kubelet
// may run it: the plan waits for a pod read that shows the container
// running (ErrNotStarted, no fallback), and no check connects before
// startedAt, as the API and the kubelet's prober have it, plus the delay;
// at that instant it does. The startup probe's own delay
// gates it the same way, and so does a sidecar's.
func TestDirectCheckWaitsOutInitialDelay(t *testing.T) {
	var hits atomic.Int32    // checks of the delayed probe's path
	var delayed atomic.Value // that path
	_, port := serveAt(t, "127.0.0.2", http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		if r.URL.Path == delayed.Load() {
			hits.Add(1)
		}
	}))
	started := time.Date(2026, 11, 28, 5, 0, 7, 0, time.UTC) // as the API has it: whole seconds
	running := func(name string) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}}}
	}
	for _, tc := range []struct {
		name  string
		path  string              // the delayed probe's
		setUp func(p *corev1.Pod) // gives a probe its delay, 5 s; the pod does not run yet
		run   func(p *corev1.Pod) // says the delayed container runs
	}{
		{name: "readiness", path: "/ready", setUp: func(p *corev1.Pod) { p.Spec.Containers[0].ReadinessProbe.InitialDelaySeconds = 5 },
			run: func(p *corev1.Pod) { p.Status.ContainerStatuses = []corev1.ContainerStatus{running("app")} }},
		{name: "startup", path: "/started", setUp: func(p *corev1.Pod) {
			p.Spec.Containers[0].ReadinessProbe = nil
			p.Spec.Containers[0].StartupProbe = httpProbe("/started", intstr.FromInt32(port))
			p.Spec.Containers[0].StartupProbe.InitialDelaySeconds = 5
		}, run: func(p *corev1.Pod) { p.Status.ContainerStatuses = []corev1.ContainerStatus{running("app")} }},
		{name: "sidecar", path: "/side", setUp: func(p *corev1.Pod) {
			side := httpProbe("/side", intstr.FromInt32(port))
			side.InitialDelaySeconds = 5
			p.Spec.InitContainers = []corev1.Container{{Name: "side", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways), ReadinessProbe: side}}
		}, run: func(p *corev1.Pod) {
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{running("side")}
			p.Status.ContainerStatuses = []corev1.ContainerStatus{running("app")}
		}},
	} {
		hits.Store(0)
		delayed.Store(tc.path)
		pod := probePod("127.0.0.2", port, httpProbe("/ready", intstr.FromInt32(port)), nil)
		tc.setUp(pod)
		_, err := PlanFor(pod, endpointOf(pod, port))
		var fe *FallbackError
		if !errors.Is(err, ErrNotStarted) || errors.As(err, &fe) {
			t.Errorf("%s: a pod read before the delayed container runs: %v, want ErrNotStarted and no fallback", tc.name, err)
		}
		tc.run(pod)
		plan, err := PlanFor(pod, endpointOf(pod, port))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		k, st := NewChecker(), plan.NewState()
		for _, at := range []time.Duration{0, time.Second, 5*time.Second - time.Nanosecond} {
			k.now = func() time.Time { return started.Add(at) }
			if k.CheckPod(context.Background(), plan, st) {
				t.Errorf("%s: passed %s after the start the API shows, before the delay", tc.name, at)
			}
		}
		if n := hits.Load(); n != 0 {
			t.Errorf("%s: %d checks reached the pod before the delay was over", tc.name, n)
		}
		k.now = func() time.Time { return started.Add(5 * time.Second) }
		if !k.CheckPod(context.Background(), plan, st) || hits.Load() == 0 {
			t.Errorf("%s: did not pass once the delay was over (%d checks)", tc.name, hits.Load())
		}
	}
}

func TestPlanForAddressesOnlyThePod(t *testing.T) {
	pod := probePod("10.244.0.7", 8080, httpProbe("/ready", intstr.FromString("web")), nil)
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "side",
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9000}}}},
		corev1.Container{Name: "plain"})
	plan, err := PlanFor(pod, endpointOf(pod, 8080))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.244.0.7:8080", "10.244.0.7:9000"}
	if len(plan.containers) != 3 {
		t.Fatalf("%d containers planned, want 3", len(plan.containers))
	}
	for i, c := range plan.containers[:2] {
		if c.readiness == nil || c.readiness.addr != want[i] {
			t.Errorf("container %s checks %+v, want address %s", c.name, c.readiness, want[i])
		}
	}
	if c := plan.containers[2]; c.readiness != nil || c.startup != nil {
		t.Errorf("a container without probes is checked (%+v); it is Ready to the kubelet once it runs", c)
	}
}
