// Package podcheck checks a pod's readiness the way the kubelet's prober
// (k8s.io/kubernetes pkg/probe and pkg/kubelet/prober) runs a container's
// readinessProbe and startupProbe: httpGet, tcpSocket and grpc, each with
// the probe's timeoutSeconds, successThreshold consecutive successes for
// readiness. It only ever connects to the pod's own address; where the
// kubelet's way cannot be followed it says why (FallbackError), and the
// caller waits for the kubelet's Ready instead.
package podcheck

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Endpoint is the address to check and the pod an EndpointSlice says
// owns it (its targetRef).
type Endpoint struct {
	IP   string
	Port int32
	Pod  string
	UID  types.UID
}

// Reasons a pod cannot be checked the kubelet's way (FallbackError.Reason).
const (
	FallbackExec        = "exec"
	FallbackHost        = "host"
	FallbackNamedPort   = "named_port"
	FallbackPodMismatch = "pod_mismatch"
	FallbackNoProbe     = "no_probe"
	FallbackHostNetwork = "host_network"
)

// FallbackReasons are the reasons PlanFor gives, for metric labels.
var FallbackReasons = []string{FallbackExec, FallbackHost, FallbackNamedPort, FallbackPodMismatch, FallbackNoProbe, FallbackHostNetwork}

// ErrNotStarted is PlanFor's error for a pod with a probe that has
// initialDelaySeconds whose container the pod read does not show running:
// when the kubelet may first run that probe is not known yet. The caller
// reads the pod again.
var ErrNotStarted = errors.New("container not shown running yet")

// FallbackError is why a pod cannot be checked the kubelet's way.
type FallbackError struct {
	Reason string
	Detail string
}

func (e *FallbackError) Error() string { return e.Reason + ": " + e.Detail }

func fallback(reason, detail string) error { return &FallbackError{reason, detail} }

// Plan is what to check on one pod: its containers and restartable
// init containers (sidecars), whose readiness makes the pod's.
type Plan struct {
	containers []containerPlan
}

// containerPlan is one container's checks. startup, when set, must pass
// once before readiness is checked at all, as the kubelet runs no
// readiness probe before the startup probe succeeded. A container with
// neither probe has no check, as it is Ready to the kubelet once it runs;
// a pod none of whose containers has a probe is left to the kubelet.
type containerPlan struct {
	name      string
	startup   *podCheck
	readiness *podCheck
}

// podCheck is one probe's handler at the pod's address.
type podCheck struct {
	kind      string // "http", "tcp", "grpc"
	addr      string // ip:port
	timeout   time.Duration
	threshold int
	// notBefore, when set, is the earliest instant the kubelet may run
	// the probe, after its initialDelaySeconds; no check runs before it.
	notBefore time.Time
	// http
	scheme string
	target string // path and query
	header http.Header
	host   string
	// grpc
	service string
}

// State is the progress of a plan's checks on one pod.
type State struct {
	started     []bool
	consecutive []int
	// answers tallies what the pod answered the readiness and startup
	// checks, for the waiting page and the wake status (answers.go).
	answers Answers
}

// Answers returns what the pod answered its checks so far.
func (s *State) Answers() Answers { return s.answers }

func (p *Plan) NewState() *State {
	return &State{started: make([]bool, len(p.containers)), consecutive: make([]int, len(p.containers))}
}

// PlanFor builds the checks of pod for the endpoint ep, or a
// FallbackError when the kubelet's way cannot be followed. The pod must be
// the one ep names and own ep's address: a slice is writable by anyone
// with EndpointSlice rights in the namespace, while status.podIP is the
// kubelet's word, so the resolver only ever connects to an address it
// could already forward to.
func PlanFor(pod *corev1.Pod, ep Endpoint) (*Plan, error) {
	if pod.UID != ep.UID || pod.Name != ep.Pod {
		return nil, fallback(FallbackPodMismatch, fmt.Sprintf("pod %s is not the endpoint's (uid %s)", pod.Name, ep.UID))
	}
	if pod.DeletionTimestamp != nil {
		return nil, fallback(FallbackPodMismatch, "pod is being deleted")
	}
	if !podOwns(pod, ep.IP) {
		return nil, fallback(FallbackPodMismatch, fmt.Sprintf("address %s is not the pod's (%s)", ep.IP, pod.Status.PodIP))
	}
	if pod.Spec.HostNetwork {
		// Its address is the node's: a check would reach the node's own
		// ports (the kubelet's, node agents'), not only the pod's.
		return nil, fallback(FallbackHostNetwork, "the pod uses the host's network")
	}
	var containers []corev1.Container
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			containers = append(containers, c)
		}
	}
	containers = append(containers, pod.Spec.Containers...)
	plan := &Plan{}
	checked := false
	for i := range containers {
		c := &containers[i]
		cp := containerPlan{name: c.Name}
		var err error
		if cp.startup, err = checkFor(c.StartupProbe, c, pod, ep.IP, false); err != nil {
			return nil, err
		}
		if cp.readiness, err = checkFor(c.ReadinessProbe, c, pod, ep.IP, true); err != nil {
			return nil, err
		}
		// A container with neither probe is Ready to the kubelet once it
		// runs: it has no check here either (CheckPod counts it ready).
		checked = checked || cp.startup != nil || cp.readiness != nil
		plan.containers = append(plan.containers, cp)
	}
	if !checked {
		// No container has a probe: the kubelet calls the pod Ready as
		// soon as it runs, so the slice says Ready within moments, and a
		// port that accepts says nothing of the app behind it. Leave it to
		// the kubelet.
		return nil, fallback(FallbackNoProbe, "no container has a readiness or startup probe")
	}
	return plan, nil
}

func podOwns(pod *corev1.Pod, ip string) bool {
	if pod.Status.PodIP == ip {
		return true
	}
	return slices.ContainsFunc(pod.Status.PodIPs, func(p corev1.PodIP) bool { return p.IP == ip })
}

// checkFor is probe's handler as a podCheck, nil without a probe.
func checkFor(probe *corev1.Probe, c *corev1.Container, pod *corev1.Pod, ip string, readiness bool) (*podCheck, error) {
	if probe == nil {
		return nil, nil
	}
	pc := &podCheck{timeout: min(time.Duration(max(probe.TimeoutSeconds, 1))*time.Second, MaxCheckTimeout), threshold: 1}
	if readiness {
		pc.threshold = int(max(probe.SuccessThreshold, 1))
	}
	h := probe.ProbeHandler
	switch {
	case h.HTTPGet != nil:
		if err := httpCheckFor(pc, h.HTTPGet, c, ip); err != nil {
			return nil, err
		}
	case h.TCPSocket != nil:
		t := h.TCPSocket
		if t.Host != "" && t.Host != ip {
			return nil, fallback(FallbackHost, fmt.Sprintf("container %s: tcpSocket host %q", c.Name, t.Host))
		}
		port, err := containerPort(t.Port, c)
		if err != nil {
			return nil, err
		}
		pc.kind, pc.addr = "tcp", net.JoinHostPort(ip, strconv.Itoa(port))
	case h.GRPC != nil:
		pc.kind, pc.addr = "grpc", net.JoinHostPort(ip, strconv.Itoa(int(h.GRPC.Port)))
		if h.GRPC.Service != nil {
			pc.service = *h.GRPC.Service
		}
	default: // exec, or a handler this resolver does not know
		return nil, fallback(FallbackExec, fmt.Sprintf("container %s: not an httpGet, tcpSocket or grpc probe", c.Name))
	}
	if probe.InitialDelaySeconds > 0 {
		// The kubelet runs no check before initialDelaySeconds after the
		// container's startedAt as its status manager keeps it, cut down
		// to the second as the API shows it (normalizeStatus); its prober
		// reads that copy. So the API's startedAt plus the delay is the
		// kubelet's own earliest instant, on the node's clock.
		started, ok := runningSince(pod, c.Name)
		if !ok {
			return nil, fmt.Errorf("%w: container %s has initialDelaySeconds %d", ErrNotStarted, c.Name, probe.InitialDelaySeconds)
		}
		pc.notBefore = started.Add(time.Duration(probe.InitialDelaySeconds) * time.Second)
	}
	return pc, nil
}

// httpCheckFor fills pc from g as the kubelet builds its request
// (k8s.io/kubernetes pkg/probe/http): scheme http unless set, the path with
// its query, the headers, a Host header as the request's Host, and a
// User-Agent and Accept: */* unless the probe sets them.
func httpCheckFor(pc *podCheck, g *corev1.HTTPGetAction, c *corev1.Container, ip string) error {
	if g.Host != "" && g.Host != ip {
		return fallback(FallbackHost, fmt.Sprintf("container %s: httpGet host %q", c.Name, g.Host))
	}
	port, err := containerPort(g.Port, c)
	if err != nil {
		return err
	}
	pc.kind, pc.addr = "http", net.JoinHostPort(ip, strconv.Itoa(port))
	pc.scheme = strings.ToLower(string(g.Scheme))
	if pc.scheme == "" {
		pc.scheme = "http"
	}
	pc.target = g.Path
	pc.header = http.Header{}
	for _, hd := range g.HTTPHeaders {
		pc.header.Add(hd.Name, hd.Value)
	}
	if _, ok := pc.header["User-Agent"]; !ok {
		pc.header.Set("User-Agent", "kube-probe/elasti")
	}
	if _, ok := pc.header["Accept"]; !ok {
		pc.header.Set("Accept", "*/*")
	} else if pc.header.Get("Accept") == "" {
		pc.header.Del("Accept")
	}
	pc.host = pc.header.Get("Host")
	return nil
}

// runningSince returns when the pod's status says container name started
// running, and false when it does not say it runs.
func runningSince(pod *corev1.Pod, name string) (time.Time, bool) {
	for _, s := range slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses) {
		if s.Name == name && s.State.Running != nil && !s.State.Running.StartedAt.IsZero() {
			return s.State.Running.StartedAt.Time, true
		}
	}
	return time.Time{}, false
}

// containerPort resolves a probe's port the way the kubelet does: a
// number, or the name of one of the container's ports.
func containerPort(p intstr.IntOrString, c *corev1.Container) (int, error) {
	if p.Type == intstr.Int {
		if p.IntVal < 1 || p.IntVal > 65535 {
			return 0, fallback(FallbackNamedPort, fmt.Sprintf("container %s: port %d out of range", c.Name, p.IntVal))
		}
		return int(p.IntVal), nil
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	if n, err := strconv.Atoi(p.StrVal); err == nil && n > 0 && n < 65536 {
		return n, nil // the kubelet takes a numeric string as the number
	}
	return 0, fallback(FallbackNamedPort, fmt.Sprintf("container %s: no port named %q", c.Name, p.StrVal))
}

// Checker runs checks. Its transports keep no connection between checks,
// as the kubelet's do not.
type Checker struct {
	// now is the clock a check's notBefore is read against.
	now    func() time.Time
	dialer *net.Dialer
	h1     *http.Transport
	h2c    *http2.Transport
}

// What one check may cost, whatever the pod answers. The pod is the
// tenant's, and the resolver that checks it serves every namespace: a
// check holds at most MaxCheckHeaderBytes of status line and headers (or
// of an h2c header list, trailers included), maxProbeBody of body, and
// lasts at most MaxCheckTimeout. With the resolver's bound on the pods
// checked at once (64), all checks together hold at most about 2 MiB.
const (
	// maxProbeBody is the kubelet's: it reads at most 10 KiB of an answer.
	maxProbeBody = 10 << 10
	// MaxCheckHeaderBytes bounds an answer's headers. Go's default is
	// 10 MiB; a readiness answer needs a few hundred bytes.
	MaxCheckHeaderBytes = 16 << 10
	// MaxCheckTimeout caps a probe's timeoutSeconds for the resolver's own
	// check: a check past it fails and is tried again at the next tick,
	// and the kubelet's Ready still releases the held requests.
	MaxCheckTimeout = 2 * time.Second
)

func NewChecker() *Checker {
	d := &net.Dialer{}
	return &Checker{
		now:    time.Now,
		dialer: d,
		h1: &http.Transport{
			Proxy:             nil, // pods are dialled directly, as the kubelet does
			DialContext:       d.DialContext,
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the kubelet verifies no probe's certificate
			DisableKeepAlives: true,
			// As the kubelet's prober: no gzip asked for or inflated.
			DisableCompression:     true,
			MaxResponseHeaderBytes: MaxCheckHeaderBytes,
		},
		h2c: &http2.Transport{
			AllowHTTP:          true,
			DisableCompression: true,
			MaxHeaderListSize:  MaxCheckHeaderBytes,
			// The smallest frame HTTP/2 allows: a gRPC answer is tiny.
			MaxReadFrameSize: 16 << 10,
		},
	}
}

// CheckPod runs one round of the plan's checks on the pod and reports
// whether every container is ready: started (its startup check passed
// once) and its readiness check passed threshold times in a row.
func (k *Checker) CheckPod(ctx context.Context, plan *Plan, st *State) bool {
	all := true
	for i, c := range plan.containers {
		if !st.started[i] {
			if c.startup != nil && !k.checkAndTally(ctx, c.startup, st) {
				all = false
				continue
			}
			st.started[i] = true
		}
		if c.readiness == nil {
			continue // started is ready, as for the kubelet
		}
		if k.checkAndTally(ctx, c.readiness, st) {
			st.consecutive[i]++
		} else {
			st.consecutive[i] = 0
		}
		if st.consecutive[i] < c.readiness.threshold {
			all = false
		}
	}
	return all
}

// checkAndTally runs c once and tallies its answer in st, unless it
// was not due yet.
func (k *Checker) checkAndTally(ctx context.Context, c *podCheck, st *State) bool {
	ok, a := k.check(ctx, c)
	if a != "" {
		st.answers.add(a)
	}
	return ok
}

// check runs c once within its timeout, and says what the pod answered;
// before c's notBefore it fails without connecting, and without an
// answer, as the kubelet has not run it yet either.
func (k *Checker) check(ctx context.Context, c *podCheck) (bool, Answer) {
	if k.now().Before(c.notBefore) {
		return false, ""
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	switch c.kind {
	case "tcp":
		conn, err := k.dialer.DialContext(ctx, "tcp", c.addr)
		if err != nil {
			return false, errorAnswer(err)
		}
		_ = conn.Close()
		return true, AnswerOpen
	case "http":
		return k.checkHTTP(ctx, c)
	case "grpc":
		return k.checkGRPC(ctx, c)
	}
	return false, AnswerError
}

func (k *Checker) checkHTTP(ctx context.Context, c *podCheck) (bool, Answer) {
	u, err := url.Parse(c.target)
	if err != nil {
		u = &url.URL{Path: c.target} // as the kubelet: pass it along as is
	}
	u.Scheme, u.Host = c.scheme, c.addr
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return false, AnswerError
	}
	req.Header = c.header.Clone()
	req.Host = c.host
	client := &http.Client{Transport: k.h1, CheckRedirect: sameHostRedirects}
	resp, err := client.Do(req)
	if err != nil {
		return false, errorAnswer(err)
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxProbeBody))
	return resp.StatusCode >= 200 && resp.StatusCode < 400, httpAnswer(resp.StatusCode)
}

// sameHostRedirects is the kubelet's redirect rule: follow redirects to
// the same host, up to 10; one to another host ends the check with the
// redirect, which counts as a success.
func sameHostRedirects(req *http.Request, via []*http.Request) error {
	if req.URL.Hostname() != via[0].URL.Hostname() {
		return http.ErrUseLastResponse
	}
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	return nil
}

// gRPC health checking (grpc.health.v1): the request and the answer are
// tiny protobufs, encoded here by hand rather than with a gRPC client.
const (
	grpcHealthPath = "/grpc.health.v1.Health/Check"
	grpcServing    = 1 // HealthCheckResponse.ServingStatus SERVING
)

// grpcHealthRequest is HealthCheckRequest{service} in a gRPC frame.
func grpcHealthRequest(service string) []byte {
	var msg []byte
	if service != "" {
		msg = append(msg, 0x0a) // field 1, length-delimited
		msg = binary.AppendUvarint(msg, uint64(len(service)))
		msg = append(msg, service...)
	}
	frame := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(frame[1:], uint32(len(msg)))
	return append(frame, msg...)
}

// grpcServingStatus reads HealthCheckResponse.status from one gRPC frame.
func grpcServingStatus(frame []byte) (uint64, bool) {
	if len(frame) < 5 || frame[0] != 0 {
		return 0, false // short, or compressed, which the request did not offer
	}
	n := binary.BigEndian.Uint32(frame[1:5])
	if uint64(len(frame)-5) < uint64(n) {
		return 0, false
	}
	msg := frame[5 : 5+n]
	var status uint64
	for len(msg) > 0 {
		key, k := binary.Uvarint(msg)
		if k <= 0 {
			return 0, false
		}
		msg = msg[k:]
		switch key & 7 {
		case 0: // varint
			v, k := binary.Uvarint(msg)
			if k <= 0 {
				return 0, false
			}
			msg = msg[k:]
			if key>>3 == 1 {
				status = v
			}
		case 2: // length-delimited: skip
			l, k := binary.Uvarint(msg)
			if k <= 0 || uint64(len(msg)-k) < l {
				return 0, false
			}
			msg = msg[k+int(l):]
		default:
			return 0, false
		}
	}
	return status, true
}

func (k *Checker) checkGRPC(ctx context.Context, c *podCheck) (bool, Answer) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+c.addr+grpcHealthPath,
		bytes.NewReader(grpcHealthRequest(c.service)))
	if err != nil {
		return false, AnswerError
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("TE", "trailers")
	req.Header.Set("User-Agent", "kube-probe/elasti")
	// A connection of its own, closed after, as the kubelet's gRPC probe
	// keeps none either.
	conn, err := k.dialer.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return false, errorAnswer(err)
	}
	defer func() { _ = conn.Close() }()
	cc, err := k.h2c.NewClientConn(conn)
	if err != nil {
		return false, errorAnswer(err)
	}
	defer func() { _ = cc.Close() }()
	resp, err := cc.RoundTrip(req)
	if err != nil {
		return false, errorAnswer(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxProbeBody))
	if err != nil {
		return false, errorAnswer(err)
	}
	if resp.StatusCode != http.StatusOK {
		return false, httpAnswer(resp.StatusCode)
	}
	code := resp.Trailer.Get("Grpc-Status")
	if code == "" {
		code = resp.Header.Get("Grpc-Status") // a trailers-only answer
	}
	if code != "0" {
		return false, grpcCodeAnswer(code)
	}
	status, ok := grpcServingStatus(body)
	if !ok {
		return false, AnswerError
	}
	return status == grpcServing, grpcStatusAnswer(status)
}
