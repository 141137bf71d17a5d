package podcheck

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// TestChecksTallyWhatThePodAnswered: a start as a waiting page shows it,
// refused while nothing listens, then the app's 503s, then its 200,
// each kind counted in the order it came.
func TestChecksTallyWhatThePodAnswered(t *testing.T) {
	var status atomic.Int32
	status.Store(http.StatusServiceUnavailable)
	// A port nothing listens on yet: reserve one, then free it.
	l, err := net.Listen("tcp", "127.0.0.6:0")
	if err != nil {
		t.Fatal(err)
	}
	port := int32(l.Addr().(*net.TCPAddr).Port)
	_ = l.Close()
	probe := httpProbe("/ready", intstr.FromInt32(port))
	probe.SuccessThreshold = 2
	pod := probePod("127.0.0.6", port, probe, nil)
	plan, err := PlanFor(pod, endpointOf(pod, port))
	if err != nil {
		t.Fatal(err)
	}
	k, st := NewChecker(), plan.NewState()
	round := func(want bool) {
		t.Helper()
		if got := k.CheckPod(context.Background(), plan, st); got != want {
			t.Fatalf("check passed = %v, want %v", got, want)
		}
	}
	round(false)
	round(false)
	if st.Answers().Latest() != AnswerRefused {
		t.Fatalf("latest answer %q, want refused", st.Answers().Latest())
	}
	l, err = net.Listen("tcp", net.JoinHostPort("127.0.0.6", strconv.Itoa(int(port))))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(int(status.Load())) })}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	for range 3 {
		round(false)
	}
	status.Store(http.StatusOK)
	round(false) // one 200 of the two in a row the probe asks
	round(true)
	want := []AnswerCount{{AnswerRefused, 2}, {"HTTP 503", 3}, {"HTTP 200", 2}}
	if got := st.Answers().List(); !equalCounts(got, want) {
		t.Errorf("tally %v, want %v", got, want)
	}
}

func equalCounts(a, b []AnswerCount) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestAnswersKeepTheLatestKinds(t *testing.T) {
	var a Answers
	for _, x := range []Answer{"refused", "HTTP 500", "refused", "HTTP 502", "HTTP 503", "timeout", "HTTP 503"} {
		a.add(x)
	}
	want := []AnswerCount{{"HTTP 500", 1}, {"HTTP 502", 1}, {"HTTP 503", 2}, {"timeout", 1}}
	if got := a.List(); !equalCounts(got, want) {
		t.Errorf("tally %v, want %v (the oldest kind, refused, dropped past %d)", got, want, MaxAnswerKinds)
	}
	if a.Latest() != "HTTP 503" {
		t.Errorf("latest %q, want HTTP 503", a.Latest())
	}
	snap := a
	a.add("HTTP 200")
	if len(snap.List()) != 4 || snap.List()[0].Answer != "HTTP 500" {
		t.Errorf("a copy changed with the tally: %v", snap.List())
	}
}

func TestAnswerWordsAreBounded(t *testing.T) {
	for code, want := range map[int]Answer{503: "HTTP 503", 200: "HTTP 200", 99: AnswerError, 1000: AnswerError, -1: AnswerError} {
		if got := httpAnswer(code); got != want {
			t.Errorf("httpAnswer(%d) = %q, want %q", code, got, want)
		}
	}
	for code, want := range map[string]Answer{"5": "gRPC status 5", "16": "gRPC status 16", "17": AnswerError, "0": AnswerError,
		"05": AnswerError, " 5": AnswerError, "<b>": AnswerError, "": AnswerError} {
		if got := grpcCodeAnswer(code); got != want {
			t.Errorf("grpcCodeAnswer(%q) = %q, want %q", code, got, want)
		}
	}
	for st, want := range map[uint64]Answer{0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN", 4: AnswerError} {
		if got := grpcStatusAnswer(st); got != want {
			t.Errorf("grpcStatusAnswer(%d) = %q, want %q", st, got, want)
		}
	}
}

// TestGRPCAndTCPAnswersAreTallied: a gRPC service NOT_SERVING, one the
// server does not know (an error status), and a tcpSocket check.
func TestGRPCAndTCPAnswersAreTallied(t *testing.T) {
	port := grpcHealthServer(t, "127.0.0.5", map[string]uint64{"db": 2})
	for service, want := range map[string]Answer{"db": "NOT_SERVING", "unknown": "gRPC status 5"} {
		probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: port, Service: ptr.To(service)}}}
		if got := latestAnswer(t, probePod("127.0.0.5", port, probe, nil), port); got != want {
			t.Errorf("grpc service %s: answer %q, want %q", service, got, want)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.4:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	tport := int32(l.Addr().(*net.TCPAddr).Port)
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(tport)}}}
	if got := latestAnswer(t, probePod("127.0.0.4", tport, probe, nil), tport); got != AnswerOpen {
		t.Errorf("tcpSocket: answer %q, want open", got)
	}
}

// latestAnswer runs one round of pod's checks and returns its answer.
func latestAnswer(t *testing.T, pod *corev1.Pod, port int32) Answer {
	t.Helper()
	plan, err := PlanFor(pod, endpointOf(pod, port))
	if err != nil {
		t.Fatal(err)
	}
	st := plan.NewState()
	NewChecker().CheckPod(context.Background(), plan, st)
	return st.Answers().Latest()
}
