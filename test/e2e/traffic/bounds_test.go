package traffic

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elasti-dev/elasti/test/localcluster/realnet"
)

// heldBy waits for the request or connection req from client, which the
// resolver holds, and sends its answer on the returned channel.
func (s *scenario) heldBy(client *realnet.Client, req realnet.Request) <-chan realnet.Response {
	out := make(chan realnet.Response, 1)
	go func() {
		resp, err := client.Do(s.ctx, req)
		if err != nil {
			resp.Err = err.Error()
		}
		out <- resp
	}()
	return out
}

// waitHeldOn waits until the resolver pod p holds n requests and
// connections.
func (s *scenario) waitHeldOn(p corev1.Pod, n int) {
	s.t.Helper()
	s.eventually(fmt.Sprintf("%s to hold %d", p.Name, n), func() (bool, string) {
		held, err := s.resolverGauge(p, "elasti_resolver_queued_requests")
		if err != nil {
			return false, err.Error()
		}
		return held == n, fmt.Sprintf("%s holds %d", p.Name, held)
	})
}

// overflowOn is elasti_resolver_queue_overflow_total of scope on p.
func (s *scenario) overflowOn(p corev1.Pod, scope string) int {
	s.t.Helper()
	n, err := s.resolverGauge(p, fmt.Sprintf("elasti_resolver_queue_overflow_total{scope=%q}", scope))
	if err != nil {
		s.t.Fatal(err)
	}
	return n
}

// expectStillUp checks that the resolver pod p is the same pod, Ready,
// with no container restarted since before.
func (s *scenario) expectStillUp(before corev1.Pod) {
	s.t.Helper()
	p, err := s.e.Kube.CoreV1().Pods(elastiNamespace).Get(s.ctx, before.Name, metav1.GetOptions{})
	if err != nil {
		s.t.Fatalf("resolver pod %s: %v", before.Name, err)
	}
	restarts := func(p *corev1.Pod) (n int32) {
		for _, c := range p.Status.ContainerStatuses {
			n += c.RestartCount
		}
		return n
	}
	ready := false
	for _, c := range p.Status.Conditions {
		ready = ready || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
	}
	if p.UID != before.UID || restarts(p) != restarts(&before) || !ready {
		s.t.Errorf("resolver pod %s: UID %s (was %s), %d restarts (was %d), Ready %v; want it up all along",
			p.Name, p.UID, before.UID, restarts(p), restarts(&before), ready)
	}
}

// TestHeldBytesBudgetRefusesPastItAndHoldsWithin: the header bytes that
// held requests keep in a resolver pod's memory are bounded by
// --max-held-bytes, one budget for every Service of every namespace.
// What keeps one tenant from spending it all is --per-source-queue: one
// client address holds at most that many requests. Here, on one resolver
// pod (addressed on each web's resolver port, as kube-proxy would pick
// it), with the operator down so that nothing wakes:
//
//   - a client of team A floods web with header-heavy requests: it gets
//     its share held and is refused past it (429);
//   - a client of team B, another namespace, calls its own sleeping web
//     with headers as heavy: held, in what A's share left;
//   - a second client of A spends the rest: its request is refused at
//     once with 503, Retry-After, a body that says why, and the bytes
//     overflow counted;
//
// once the operator is back, every held request is answered by its own
// Service's new pod, and the resolver pod was up all along. Before
// --max-held-bytes, the third request was held too, and 10,000 held
// requests of 64 KiB headers were far above the resolver's memory limit.
func TestHeldBytesBudgetRefusesPastItAndHoldsWithin(t *testing.T) {
	const (
		perSource = 2
		// Each request is charged its header names and values, target
		// and Host: a bit over header.
		header = 12 << 10
		// Three requests fit, a fourth does not.
		budget = 40 << 10
		// Held across the operator's return and the wakes, and within the
		// resolver's own request timeout (120 s), which would answer 504.
		holdFor = 90 * time.Second
	)
	a := newScenario(t)
	b := newScenario(t)
	// --namespace-share=100: what is tested here is the one budget and
	// the per-source share; at the default 50% team A's share of this
	// small budget would refuse its second request (namespace shares are
	// tested in pkg/resolver's adversarial_shares_test.go).
	a.setResolverArgs("--max-held-bytes="+strconv.Itoa(budget), "--per-source-queue="+strconv.Itoa(perSource), "--namespace-share=100")
	a.waitEveryResolverListens(1)
	b.waitEveryResolverListens(1)
	a.sleep()
	b.sleep()
	a.scaleOperator(0)
	p := a.readyResolverPods()[0]
	heavy := map[string]string{"X-Heavy": strings.Repeat("h", header)}
	urlOf := func(s *scenario) string {
		return fmt.Sprintf("http://%s:%d/", p.Status.PodIP, s.resolverPortFor(80))
	}

	const flood = 2 * perSource
	aHeld := a.heldBy(a.client, realnet.Request{URL: urlOf(a), Header: heavy, Parallel: flood, Timeout: holdFor})
	a.waitHeldOn(p, perSource)
	bHeld := b.heldBy(b.client, realnet.Request{URL: urlOf(b), Header: heavy, Timeout: holdFor})
	a.waitHeldOn(p, perSource+1)

	a2, err := a.bed.Client(a.ctx, a.e.NS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a2.Close)
	before := a.overflowOn(p, "bytes")
	refused, err := a2.Do(a.ctx, realnet.Request{URL: urlOf(a), Header: heavy, Timeout: quickTimeout})
	if err != nil {
		t.Fatal(err)
	}
	if after, err := strconv.Atoi(refused.Header.Get("Retry-After")); refused.Status != http.StatusServiceUnavailable ||
		err != nil || after < 1 || !strings.Contains(refused.Body, "too many requests are waiting for services to start") {
		t.Errorf("past the held-bytes budget: %s, Retry-After %q; want 503 at once, with Retry-After and why", refused, refused.Header.Get("Retry-After"))
	}
	if got := a.overflowOn(p, "bytes") - before; got != 1 {
		t.Errorf("%s counted %d refusals for held bytes; want 1", p.Name, got)
	}
	a.waitHeldOn(p, perSource+1) // the refusal took nothing

	a.scaleOperator(1)
	burst := <-aHeld
	if len(burst.Parallel) != flood {
		t.Fatalf("team A's flood: %s", burst)
	}
	var answered int
	for _, r := range burst.Parallel {
		switch r.Status {
		case http.StatusOK:
			a.expectWoken(r)
			answered++
		case http.StatusTooManyRequests:
		default:
			t.Errorf("team A's flood: want each request held and answered, or refused with 429; got %s", r)
		}
	}
	if answered != perSource {
		t.Errorf("team A's client had %d requests held and answered; want its share, %d", answered, perSource)
	}
	b.expectWoken(<-bHeld)
	a.waitHeldOn(p, 0)
	a.expectStillUp(p)
}

// TestHeldAndSplicedTCPConnectionsAreBounded: on a resolver port for a
// sleeping web's raw TCP port (one resolver pod, the operator down until
// the end), with --per-source-queue=1 and a short --splice-idle-timeout:
//
//   - a client that sends and half-closes while held is not taken for
//     gone: it keeps its place, so its next connection is closed at once
//     (its address holds its share), and it is answered after the wake.
//     A FIN cannot tell a half-close from a close, so the place is kept
//     until the wake or the request timeout; what bounds it is the
//     per-source share (docs/concepts/resolver.md, "How routing works");
//   - a client that gives up with a reset frees its place at once;
//   - a connection held, then spliced to the new pod, that goes silent
//     both ways is closed by the resolver, within its own wait and long
//     before the pod (the echo) would close it. Before
//     --splice-idle-timeout it stayed open for as long as the pod kept it.
func TestHeldAndSplicedTCPConnectionsAreBounded(t *testing.T) {
	const (
		idle    = 3 * time.Second
		holdFor = 90 * time.Second // see TestHeldBytesBudgetRefusesPastItAndHoldsWithin
	)
	s := newProtocolScenario(t)
	s.setResolverArgs("--per-source-queue=1", "--splice-idle-timeout="+idle.String())
	s.waitEveryResolverListens(1 + len(protocolPorts))
	s.sleep()
	s.scaleOperator(0)
	p := s.readyResolverPods()[0]
	url := fmt.Sprintf("tcp://%s:%d", p.Status.PodIP, s.resolverPortFor(protocolPorts[0].Port))

	halfClosed := s.heldBy(s.client, realnet.Request{URL: url, Protocol: realnet.ProtocolTCP, Body: "ping", Timeout: holdFor})
	s.waitHeldOn(p, 1)
	before := s.overflowOn(p, "client")
	again := s.do(realnet.Request{URL: url, Protocol: realnet.ProtocolTCP, Body: "ping", KeepOpen: true, Timeout: quickTimeout})
	if again.Err != "" || again.Closed == 0 || again.Body != "" {
		t.Errorf("the half-closed client's next connection: %s; want it closed at once, its client holding its share", again)
	}
	if got := s.overflowOn(p, "client") - before; got != 1 {
		t.Errorf("%s counted %d connections over their client's share; want 1", p.Name, got)
	}

	other, err := s.bed.Client(s.ctx, s.e.NS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	const giveUpAfter = 8 * time.Second
	gaveUp := s.heldBy(other, realnet.Request{URL: url, Protocol: realnet.ProtocolTCP, Body: "ping", KeepOpen: true, ResetAfter: giveUpAfter, Timeout: 2 * giveUpAfter})
	s.waitHeldOn(p, 2)
	if r := <-gaveUp; r.Err != "" || r.Closed != 0 {
		t.Errorf("a client that waited %s, then reset: %s; want it held until it reset", giveUpAfter, r)
	}
	s.waitHeldOn(p, 1) // its place is free, the half-closed client's kept

	// The echo keeps a connection tcpEchoLimit, far past this wait: a
	// close within it is the resolver's.
	silent := s.heldBy(other, realnet.Request{URL: url, Protocol: realnet.ProtocolTCP, Body: "ping", KeepOpen: true, Timeout: wakeTimeout})
	s.waitHeldOn(p, 2)
	s.scaleOperator(1)

	hc := <-halfClosed
	servedBy, echoed, _ := strings.Cut(hc.Body, " ")
	if hc.Err != "" || echoed != "ping" {
		t.Fatalf("the client that half-closed while held: %s; want the new pod's echo", hc)
	}
	s.expectServedByReadyPod(servedBy, hc)
	sp := <-silent
	servedBy, echoed, _ = strings.Cut(sp.Body, " ")
	if sp.Err != "" || echoed != "ping" || sp.Closed == 0 {
		t.Errorf("a spliced connection silent both ways after the echo: %s; want the echo, then the resolver closing it", sp)
	} else {
		s.expectServedByReadyPod(servedBy, sp)
	}
	s.waitHeldOn(p, 0)
}

// TestManagementServersDropStalledClients: every server of elasti's own
// endpoints, the operator's scale endpoint, metrics and probes and the
// resolver's internal and per-port-routing ports (all command.Server),
// closes a connection whose client, through kube-proxy or to the pod,
// sends nothing, stops in the middle of its header, or stops in the
// middle of a body it announced; and while such connections are open,
// other clients are answered. Before, the servers set only
// ReadHeaderTimeout: a client that stopped in its body kept its
// connection, and the handler reading it, for good.
func TestManagementServersDropStalledClients(t *testing.T) {
	const (
		// The servers' read timeouts are 10 s (command.Server); the
		// clients wait three times as long.
		stallFor = 30 * time.Second
		// Connections of each kind to each server, at once.
		each = 5
	)
	s := newScenario(t)
	list, err := s.e.Kube.CoreV1().Pods(elastiNamespace).List(s.ctx, metav1.ListOptions{LabelSelector: operatorLabel})
	if err != nil || len(list.Items) != 1 || list.Items[0].Status.PodIP == "" {
		t.Fatalf("the operator pod: %v, %d pods", err, len(list.Items))
	}
	operatorIP := list.Items[0].Status.PodIP
	servers := []struct{ name, addr, path string }{
		{"the operator's scale endpoint", "elasti-operator-controller-service." + elastiNamespace + ":8013", "/informer/incoming-request"},
		{"the operator's metrics", "elasti-operator-controller-manager-metrics-service." + elastiNamespace + ":8080", "/metrics"},
		{"the operator's probes", operatorIP + ":8081", "/healthz"},
		{"the resolver's internal port", resolverService + "." + elastiNamespace + ":8013", "/healthz"},
		{"the resolver's per-port-routing port", resolverService + "." + elastiNamespace + ":8014", "/"},
	}
	stalls := []struct{ name, sent string }{
		{"nothing", ""},
		{"half a header", "POST %s HTTP/1.1\r\nHost: elasti\r\n"},
		{"half a body", "POST %s HTTP/1.1\r\nHost: elasti\r\nContent-Type: application/json\r\nContent-Length: 64\r\n\r\n{\"count\":1,"},
	}
	type stalled struct {
		server, stall string
		resp          realnet.Response
	}
	var (
		mu      sync.Mutex
		results []stalled
		wg      sync.WaitGroup
	)
	for _, srv := range servers {
		for _, st := range stalls {
			sent := st.sent
			if sent != "" {
				sent = fmt.Sprintf(sent, srv.path)
			}
			wg.Go(func() {
				resp, err := s.client.Do(s.ctx, realnet.Request{URL: "tcp://" + srv.addr, Protocol: realnet.ProtocolTCP, Body: sent,
					KeepOpen: true, Parallel: each, Timeout: stallFor})
				if err != nil {
					resp.Err = err.Error()
				}
				mu.Lock()
				defer mu.Unlock()
				results = append(results, stalled{srv.name, st.name, resp})
			})
		}
	}

	// The stalled clients connect within a second or two and are held
	// for the servers' 10 s; meanwhile another client is answered by each.
	time.Sleep(3 * time.Second)
	other, err := s.bed.Client(s.ctx, s.e.NS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	for _, srv := range servers {
		resp, err := other.Do(s.ctx, realnet.Request{URL: "http://" + srv.addr + srv.path, Timeout: quickTimeout})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Err != "" {
			t.Errorf("%s, while stalled clients held connections: %s; want an answer", srv.name, resp)
		}
	}

	wg.Wait()
	slices.SortFunc(results, func(a, b stalled) int { return cmp.Or(cmp.Compare(a.server, b.server), cmp.Compare(a.stall, b.stall)) })
	for _, r := range results {
		if len(r.resp.Parallel) != each {
			t.Errorf("%s, a client that sent %s: %s", r.server, r.stall, r.resp)
			continue
		}
		var slowest time.Duration
		closed := true
		for _, c := range r.resp.Parallel {
			if c.Err != "" || c.Closed == 0 {
				t.Errorf("%s, a client that sent %s: %s; want the server to close the connection", r.server, r.stall, c)
				closed = false
			}
			slowest = max(slowest, c.Closed)
		}
		if closed {
			t.Logf("%s closed %d connections that sent %s within %s", r.server, each, r.stall, slowest.Round(time.Millisecond))
		}
	}
}
