package traffic

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/elasti-dev/elasti/pkg/resolver"
	"github.com/elasti-dev/elasti/test/localcluster/realnet"
)

// The late app: this test binary again, run by the process node as the
// container of web's pods, with a server that listens only a while after
// it starts. The pod has no readiness probe, so the process node reports
// it Ready as soon as the process runs, as a kubelet does: Ready before it
// listens, like any app without a readiness probe (or with one that does
// not check the port it serves).
const (
	// lateAppImage names the image the process node runs it for.
	lateAppImage = "elasti-e2e-late-app"
	// lateAppListenDelayEnv, set in the container's environment, is how
	// long it waits before it listens.
	lateAppListenDelayEnv = "ELASTI_E2E_LATE_APP_LISTEN_DELAY"
	// lateAppListening starts the log line it writes once it listens,
	// followed by the time in RFC 3339 with nanoseconds.
	lateAppListening = "late app: listening since "
)

// lateAppMain runs the late app when the environment asks for it, and
// exits; otherwise it returns at once. TestMain calls it first.
func lateAppMain() {
	v, ok := os.LookupEnv(lateAppListenDelayEnv)
	if !ok {
		return
	}
	delay, err := time.ParseDuration(v)
	if err != nil {
		fmt.Fprintf(os.Stderr, "late app: %s=%q: %v\n", lateAppListenDelayEnv, v, err)
		os.Exit(2)
	}
	fmt.Fprintf(os.Stderr, "late app: started; listening on :%d in %s\n", appPort, delay)
	time.Sleep(delay)
	// The raw TCP and h2c echoes first, so they listen by the time the
	// HTTP port, which readiness probes check, does.
	if err := listenLateEchoes(); err != nil {
		fmt.Fprintf(os.Stderr, "late app: %v\n", err)
		os.Exit(1)
	}
	srv := &http.Server{Addr: fmt.Sprintf(":%d", appPort), Handler: appHandler(), ReadHeaderTimeout: 10 * time.Second}
	ln, err := net.Listen("tcp", srv.Addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "late app: %v\n", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "%s%s\n", lateAppListening, time.Now().Format(time.RFC3339Nano))
	err = srv.Serve(ln)
	fmt.Fprintf(os.Stderr, "late app: %v\n", err)
	os.Exit(1)
}

// listenLateEchoes serves the late app's raw TCP echo (tcpEchoPort) and
// its h2c echo (grpcEchoPort), as the app pods on kwok have them.
func listenLateEchoes() error {
	tcpLn, err := net.Listen("tcp", fmt.Sprintf(":%d", tcpEchoPort))
	if err != nil {
		return err
	}
	go serveTCPEcho(tcpLn)
	h2Ln, err := net.Listen("tcp", fmt.Sprintf(":%d", grpcEchoPort))
	if err != nil {
		return err
	}
	h2 := &http.Server{Handler: http.HandlerFunc(h2cEcho), ReadHeaderTimeout: 10 * time.Second, Protocols: new(http.Protocols)}
	h2.Protocols.SetUnencryptedHTTP2(true)
	go func() { _ = h2.Serve(h2Ln) }()
	return nil
}

// connectFailuresMetric counts the resolver's failed connects to pods.
const connectFailuresMetric = "elasti_resolver_pod_connect_failures_total"

// maxLateConnectFailures bounds the failed connects one request to a lone
// pod may cost: the resolver makes one connect a round, and its rounds
// back off from 50 ms, doubling to 1 s, for at most 10 s: 14 rounds
// (pkg/resolver's unit tests check the schedule). A pod 2 s late should
// cost about 7.
const maxLateConnectFailures = 14

// TestHeldRequestReachesAPodReadyBeforeItListens: web sleeps; its pods now
// run on the process node as the late app, Ready as soon as the process
// starts and listening 2 s later. A request by DNS name wakes web; the
// resolver sees the pod Ready, connects, and is refused until the server
// listens. The request must still get the pod's answer, with no 502 from
// the first refusal, and the resolver must have met the refusal (else the
// test proves nothing) and retried a bounded number of times.
func TestHeldRequestReachesAPodReadyBeforeItListens(t *testing.T) {
	const lateAppDelay = 2 * time.Second
	s := newScenario(t)
	s.waitEveryResolverListens(1)
	s.sleep()
	s.runLateApp(lateAppDelay)
	failuresBefore := s.resolverCounterSum(connectFailuresMetric)

	var (
		ready    podSeen
		watching sync.WaitGroup
	)
	stop := make(chan struct{})
	watching.Go(func() { ready = s.watchAppReady(stop) })
	resp := s.do(realnet.Request{URL: "http://" + s.fqdn() + "/late", Timeout: wakeTimeout})
	close(stop)
	watching.Wait()
	if resp.Status == http.StatusBadGateway {
		t.Fatalf("the resolver answered 502 for a pod that was Ready before it listened: %s", resp)
	}
	s.expectWokenHeld(resp)
	if ready.name == "" {
		t.Fatal("never saw web's pod Ready")
	}
	listened := s.lateAppListenedAt(ready.name)
	failures := s.resolverCounterSum(connectFailuresMetric) - failuresBefore
	t.Logf("pod %s seen Ready at %s, listening %s later; the request took %s (held %s) and cost %d failed connects",
		ready.name, ready.at.Format("15:04:05.000"), listened.Sub(ready.at).Round(time.Millisecond),
		resp.Duration.Round(time.Millisecond), resp.Header.Get(resolver.DefaultColdStartHeader), failures)
	if gap := listened.Sub(ready.at); gap < lateAppDelay/4 {
		t.Errorf("the pod was seen Ready only %s before it listened; the test did not make a pod that is Ready before it listens", gap)
	}
	if failures < 1 {
		t.Errorf("the resolver never failed to connect: it did not meet the pod before it listened, so the test proves nothing")
	}
	if failures > maxLateConnectFailures {
		t.Errorf("%d failed connects for one request to a pod %s late; want at most %d", failures, lateAppDelay, maxLateConnectFailures)
	}
}

// runLateApp makes web's pods the late app on the process node, listening
// delay after they start, with no readiness probe.
func (s *scenario) runLateApp(delay time.Duration) {
	s.t.Helper()
	s.updateApp(func(d *appsv1.Deployment) { s.asLateApp(&d.Spec.Template.Spec, delay) })
}

// runLateReadyApp is runLateApp with a readiness probe of path every
// second: the pod is not Ready, to the kubelet or to the resolver's direct
// check, until it listens, delay after it starts.
func (s *scenario) runLateReadyApp(delay time.Duration, path string) {
	s.t.Helper()
	s.updateApp(func(d *appsv1.Deployment) {
		s.asLateApp(&d.Spec.Template.Spec, delay)
		d.Spec.Template.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(appPort)}},
			PeriodSeconds: 1,
		}
	})
}

// asLateApp makes spec's pods the late app on the process node, listening
// delay after they start, with no readiness probe.
func (s *scenario) asLateApp(spec *corev1.PodSpec, delay time.Duration) {
	s.t.Helper()
	// The process node gives every pod its ServiceAccount's token, and the
	// local control plane runs no controller that makes "default".
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: lateAppImage, Namespace: s.e.NS}}
	if _, err := s.e.Kube.CoreV1().ServiceAccounts(s.e.NS).Create(s.ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		s.t.Fatal(err)
	}
	spec.ServiceAccountName = sa.Name
	spec.NodeSelector, spec.Tolerations = nil, nil
	c := &spec.Containers[0]
	c.Image = "registry.example/" + lateAppImage + ":1"
	c.Env = append(c.Env, corev1.EnvVar{Name: lateAppListenDelayEnv, Value: delay.String()})
	c.ReadinessProbe = nil
}

// podSeen is a pod and when the test first saw it Ready.
type podSeen struct {
	name string
	at   time.Time
}

// watchAppReady polls web's pods until one is Ready or stop is closed,
// and returns the first Ready one and when it was first seen so.
func (s *scenario) watchAppReady(stop <-chan struct{}) podSeen {
	ticker := time.NewTicker(20 * time.Millisecond)
	defer ticker.Stop()
	for {
		list, err := s.e.Kube.CoreV1().Pods(s.e.NS).List(s.ctx, metav1.ListOptions{LabelSelector: "app=" + app})
		now := time.Now()
		if err == nil {
			for _, p := range list.Items {
				for _, c := range p.Status.Conditions {
					if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil {
						return podSeen{name: p.Name, at: now}
					}
				}
			}
		}
		select {
		case <-stop:
			return podSeen{}
		case <-ticker.C:
		}
	}
}

// lateAppListenedAt reads from the late app's log when it began to listen.
func (s *scenario) lateAppListenedAt(pod string) time.Time {
	s.t.Helper()
	path := s.bed.Node.LogPath(s.e.NS, pod, "app")
	f, err := os.Open(path)
	if err != nil {
		s.t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), lateAppListening); ok {
			at, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				s.t.Fatal(err)
			}
			return at
		}
	}
	s.t.Fatalf("the late app's log %s does not say when it listened:\n%s", path, s.bed.Node.Logs(s.e.NS, pod, 20))
	return time.Time{}
}

// resolverCounterSum sums an unlabelled counter over the Ready resolver
// pods.
func (s *scenario) resolverCounterSum(name string) int {
	s.t.Helper()
	total := 0
	for _, p := range s.readyResolverPods() {
		n, err := s.resolverGauge(p, name)
		if err != nil {
			s.t.Fatal(err)
		}
		total += n
	}
	return total
}
