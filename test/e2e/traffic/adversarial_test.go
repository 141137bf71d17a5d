package traffic

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	corev1 "k8s.io/api/core/v1"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/test/localcluster/realnet"
)

const (
	// randomHostsProgram is a client-pod program (realnet.Program): N
	// requests one after another on one kept-alive connection, each with a
	// Host of its own. A Request with Repeat sends one Host only.
	randomHostsProgram = "random-hosts"
	// h2AuthorityProgram is a client-pod program: one HTTP/2 request with
	// prior knowledge whose :authority and Host header differ. Go's HTTP/2
	// client never sends a Host header, so the frames are written by hand.
	h2AuthorityProgram = "h2-authority"
)

func init() {
	realnet.RegisterProgram(randomHostsProgram, runRandomHosts)
	realnet.RegisterProgram(h2AuthorityProgram, runH2Authority)
}

// randomHostsCall asks for N GETs of URL, on one connection, each with a
// random Host naming a Service that does not exist: half as
// "<svc>.<ns>", half as "<svc>.<Namespace>.svc.cluster.local".
type randomHostsCall struct {
	URL       string        `json:"url"`
	N         int           `json:"n"`
	Namespace string        `json:"namespace"`
	Seed      uint64        `json:"seed"`
	Deadline  time.Duration `json:"deadline"`
}

// randomHostsTally is what the client saw: answers by status, and the
// first error, if the connection failed.
type randomHostsTally struct {
	Statuses map[int]int `json:"statuses"`
	Errors   int         `json:"errors"`
	FirstErr string      `json:"firstErr,omitempty"`
	// Connections is how many connections the client opened: one when
	// keep-alive held all along.
	Connections int `json:"connections"`
}

func runRandomHosts(ctx context.Context, arg json.RawMessage) (any, error) {
	var c randomHostsCall
	if err := json.Unmarshal(arg, &c); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.Deadline)
	defer cancel()
	tally := randomHostsTally{Statuses: map[int]int{}}
	dialer := &net.Dialer{}
	t := &http.Transport{Proxy: nil, MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			tally.Connections++
			return dialer.DialContext(ctx, network, addr)
		}}
	defer t.CloseIdleConnections()
	client := &http.Client{Transport: t, Timeout: 5 * time.Second}
	rng := rand.New(rand.NewPCG(c.Seed, c.Seed^0x9e3779b97f4a7c15))
	for i := 0; i < c.N && ctx.Err() == nil; i++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL, nil)
		if err != nil {
			return nil, err
		}
		if i%2 == 0 {
			req.Host = randomLabel(rng) + "." + randomLabel(rng)
		} else {
			req.Host = randomLabel(rng) + "." + c.Namespace + ".svc.cluster.local"
		}
		resp, err := client.Do(req)
		if err != nil {
			tally.Errors++
			if tally.FirstErr == "" {
				tally.FirstErr = err.Error()
			}
			continue
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		resp.Body.Close()
		tally.Statuses[resp.StatusCode]++
	}
	return tally, nil
}

// randomLabel is a valid DNS label of 20 random letters and digits,
// starting with a letter: a name no test creates.
func randomLabel(rng *rand.Rand) string {
	const letters = "abcdefghijklmnopqrstuvwxyz"
	const alnum = letters + "0123456789"
	b := make([]byte, 20)
	b[0] = letters[rng.IntN(len(letters))]
	for i := 1; i < len(b); i++ {
		b[i] = alnum[rng.IntN(len(alnum))]
	}
	return string(b)
}

// h2AuthorityCall is one unary gRPC call to Addr (host:port) over h2c with
// prior knowledge, with :authority Authority and a Host header Host, as a
// gRPC client whose connection was set up for one name and whose metadata
// names another would send it.
type h2AuthorityCall struct {
	Addr      string        `json:"addr"`
	Authority string        `json:"authority"`
	Host      string        `json:"host"`
	Message   []byte        `json:"message"`
	Timeout   time.Duration `json:"timeout"`
}

// h2Answer is the answer's :status, body and the pod named in its trailers
// (servedByHeader); Err is set when none came (a GOAWAY, a stream reset,
// the timeout).
type h2Answer struct {
	Status   int    `json:"status"`
	Body     string `json:"body,omitempty"`
	ServedBy string `json:"servedBy,omitempty"`
	Err      string `json:"err,omitempty"`
}

func (a h2Answer) String() string {
	if a.Err != "" {
		return fmt.Sprintf("status %d, error %s", a.Status, a.Err)
	}
	return fmt.Sprintf("status %d, served by %q: %.300q", a.Status, a.ServedBy, a.Body)
}

func runH2Authority(ctx context.Context, arg json.RawMessage) (any, error) {
	var c h2AuthorityCall
	if err := json.Unmarshal(arg, &c); err != nil {
		return nil, err
	}
	ans, err := h2Exchange(ctx, c)
	if err != nil {
		ans.Err = err.Error()
	}
	return ans, nil
}

func h2Exchange(ctx context.Context, c h2AuthorityCall) (h2Answer, error) {
	var ans h2Answer
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", c.Addr)
	if err != nil {
		return ans, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(c.Timeout)); err != nil {
		return ans, err
	}
	bw := bufio.NewWriter(conn)
	if _, err := bw.WriteString(http2.ClientPreface); err != nil {
		return ans, err
	}
	fr := http2.NewFramer(bw, bufio.NewReader(conn))
	if err := fr.WriteSettings(); err != nil {
		return ans, err
	}
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range []hpack.HeaderField{
		{Name: ":method", Value: http.MethodPost}, {Name: ":scheme", Value: "http"},
		{Name: ":path", Value: "/echo.Echo/Say"}, {Name: ":authority", Value: c.Authority}, {Name: "host", Value: c.Host},
		{Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"},
	} {
		if err := enc.WriteField(f); err != nil {
			return ans, err
		}
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes(), EndHeaders: true}); err != nil {
		return ans, err
	}
	if err := fr.WriteData(1, true, grpcFrame(c.Message)); err != nil {
		return ans, err
	}
	if err := bw.Flush(); err != nil {
		return ans, err
	}
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	var body strings.Builder
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return ans, err
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				if err := fr.WriteSettingsAck(); err != nil {
					return ans, err
				}
				if err := bw.Flush(); err != nil {
					return ans, err
				}
			}
		case *http2.MetaHeadersFrame:
			if s := f.PseudoValue("status"); s != "" && ans.Status == 0 {
				fmt.Sscan(s, &ans.Status)
			}
			for _, hf := range f.RegularFields() {
				if strings.EqualFold(hf.Name, servedByHeader) {
					ans.ServedBy = hf.Value
				}
			}
			if f.StreamEnded() {
				ans.Body = body.String()
				return ans, nil
			}
		case *http2.DataFrame:
			if body.Len() < 1<<16 {
				body.Write(f.Data())
			}
			if f.StreamEnded() {
				ans.Body = body.String()
				return ans, nil
			}
		case *http2.RSTStreamFrame:
			return ans, fmt.Errorf("stream reset: %v", f.ErrCode)
		case *http2.GoAwayFrame:
			if f.LastStreamID < 1 {
				return ans, fmt.Errorf("GOAWAY: %v %q", f.ErrCode, f.DebugData())
			}
		}
	}
}

// TestAdversarialVariantsThroughKubeProxy plays the attacker through the
// real traffic path: a client pod of the test's namespace sends what an
// attacking pod would, through kube-proxy to the resolver's Service (by
// DNS name, so CoreDNS and the ClusterIP rules are on the path), and the
// answers and the resolver's own metrics say what it kept.
func TestAdversarialVariantsThroughKubeProxy(t *testing.T) {
	s := newProtocolsScenario(t)
	shared := fmt.Sprintf("http://%s.%s:8012/", resolverService, elastiNamespace)

	t.Run("random Hosts", func(t *testing.T) { s.in(t).randomHosts(shared) })
	t.Run("encodings of the Service's name", func(t *testing.T) { s.in(t).hostEncodings(shared) })
	t.Run("HTTP/2 authority against Host", func(t *testing.T) { s.in(t).h2Authority() })
}

// randomHosts: 5,000 requests with random Hosts of Services that do not
// exist, on one kept-alive connection, are each answered 404 at once and
// leave the resolver holding nothing, notifying nothing and tracking no
// new source, with its heap within a bound.
func (s *scenario) randomHosts(shared string) {
	const n = 5000
	// heapBound: go_memstats_heap_inuse_bytes is read without a forced GC,
	// so it includes the requests' garbage not yet collected: with GOGC at
	// 100 that is at most the live heap again, a few MiB in the bed's
	// resolver. A map keyed by Host would keep each of the 5,000 names with
	// its entry (well over 1 KiB each with a broadcaster and its channels),
	// and the growth would not come back; 16 MiB is above the first and is
	// the figure the issue sets for 100,000 such requests.
	const heapBound = 16 << 20
	type before struct{ heap, sources, notified int }
	pods := s.readyResolverPods()
	was := map[string]before{}
	for _, p := range pods {
		was[p.Name] = before{
			heap:     s.mustGauge(p, "go_memstats_heap_inuse_bytes"),
			sources:  s.mustGauge(p, "elasti_resolver_wake_rate_limit_sources"),
			notified: s.counterTotal(p, "elasti_resolver_operator_notifications_total"),
		}
	}
	var tally randomHostsTally
	call := randomHostsCall{URL: shared, N: n, Namespace: s.e.NS, Seed: uint64(time.Now().UnixNano()), Deadline: 3 * time.Minute}
	if err := s.client.Run(s.ctx, randomHostsProgram, call, call.Deadline+30*time.Second, &tally); err != nil {
		s.t.Fatal(err)
	}
	s.t.Logf("%d requests with random Hosts: %+v", n, tally)
	if tally.Statuses[http.StatusNotFound] != n {
		s.t.Errorf("want all %d answered 404 (no such Service behind elasti); got %+v", n, tally)
	}
	if tally.Connections != 1 {
		s.t.Errorf("the burst opened %d connections; want one kept alive, as an attacking pod would", tally.Connections)
	}
	for _, p := range pods {
		w := was[p.Name]
		heap := s.mustGauge(p, "go_memstats_heap_inuse_bytes")
		s.t.Logf("%s: heap in use %d -> %d bytes (%+d)", p.Name, w.heap, heap, heap-w.heap)
		if heap-w.heap >= heapBound {
			s.t.Errorf("%s's heap grew by %d bytes over %d random Hosts; want under %d", p.Name, heap-w.heap, n, heapBound)
		}
		if held := s.mustGauge(p, "elasti_resolver_queued_requests"); held != 0 {
			s.t.Errorf("%s holds %d requests after random Hosts; want 0", p.Name, held)
		}
		if got := s.mustGauge(p, "elasti_resolver_wake_rate_limit_sources"); got > w.sources {
			s.t.Errorf("%s tracks %d wake sources after random Hosts (was %d); want none added", p.Name, got, w.sources)
		}
		if got := s.counterTotal(p, "elasti_resolver_operator_notifications_total"); got != w.notified {
			s.t.Errorf("%s notified the operator %d times for random Hosts; want 0", p.Name, got-w.notified)
		}
	}
}

// hostEncodings: web asleep, each spelling of a Host is sent through the
// resolver Service's ClusterIP, where the Host alone names the Service.
// The spellings that do not name web are answered 400 or 404 and web
// stays at zero; each spelling that names it (case, trailing dot, default
// port, the namespace-qualified and full names, the ClusterIP as an
// IPv4-mapped IPv6 literal) is held, wakes web and gets the new pod's
// answer.
func (s *scenario) hostEncodings(shared string) {
	ns, ip := s.e.NS, s.clusterIP()
	s.sleep()
	for _, tc := range []struct{ host, why string }{
		{"w%65b." + ns, "percent-encoded: not a DNS label"},
		{"web." + ns + ".svc.cluster.local.evil.example", "a longer name ending elsewhere"},
		{"web." + ns + ".svc.other.domain", "another cluster domain"},
		{"web." + ns + "..", "two trailing dots"},
		{"web." + ns + ":080", "the port with a leading zero"},
		{"web." + ns + ":65536", "a port past 65535"},
		{"[fd00::1]", "an IPv6 literal that is no ClusterIP"},
		{"web\u212a." + ns, "a Kelvin sign, which Unicode folds to k"},
		{"web-" + ns, "no dot"},
		{"web." + ns + "x", "one letter past the namespace"},
	} {
		resp := s.do(realnet.Request{URL: shared, Host: tc.host, Timeout: quickTimeout})
		if resp.Status != http.StatusBadRequest && resp.Status != http.StatusNotFound {
			s.t.Errorf("Host %q (%s): %s; want 400 or 404", tc.host, tc.why, resp)
		}
	}
	// The resolver calls the operator at once for a wake; a second is
	// ample for a scale that should not come.
	s.e.HoldsReplicas(elastiv1alpha1.KindDeployment, app, 0, 2*time.Second)

	for i, host := range []string{
		"WEB." + strings.ToUpper(ns),
		"web." + ns + ".",
		"web." + ns + ":80",
		"web." + ns + ".svc",
		"Web." + ns + ".svc.cluster.local.:80",
		"[::ffff:" + ip + "]:80",
	} {
		if i > 0 {
			s.sleep()
		}
		s.t.Logf("Host %q", host)
		s.expectWokenHeld(s.do(realnet.Request{URL: shared, Host: host, Timeout: wakeTimeout}))
	}
}

// h2Authority: over HTTP/2 with prior knowledge to the resolver Service's
// shared port, the Service is the one :authority names, never the Host
// header's. A gRPC call whose :authority names no Service and whose Host
// names web's gRPC port wakes nothing; one whose :authority names web's
// gRPC port and whose Host names another Service wakes web and is answered
// by its pod. The call goes to the port that declares h2c (an HTTP/2
// request is forwarded over HTTP/2, and web's HTTP port speaks HTTP/1 only,
// as it would answer the client without elasti).
func (s *scenario) h2Authority() {
	s.sleep()
	addr := fmt.Sprintf("%s.%s:8012", resolverService, elastiNamespace)
	port := fmt.Sprintf(":%d", grpcEchoPort)
	web, nosuch := app+"."+s.e.NS+port, "nosuch."+s.e.NS+port
	msg := []byte("authority, not host, from " + s.e.NS)
	h2 := func(authority, host string, timeout time.Duration) h2Answer {
		var a h2Answer
		call := h2AuthorityCall{Addr: addr, Authority: authority, Host: host, Message: msg, Timeout: timeout}
		if err := s.client.Run(s.ctx, h2AuthorityProgram, call, timeout+10*time.Second, &a); err != nil {
			s.t.Fatal(err)
		}
		return a
	}
	if a := h2(nosuch, web, quickTimeout); a.Status != http.StatusNotFound && a.Status != http.StatusBadRequest {
		s.t.Errorf(":authority %s, Host %s: %s; want 404 or 400", nosuch, web, a)
	}
	s.e.HoldsReplicas(elastiv1alpha1.KindDeployment, app, 0, 2*time.Second)

	a := h2(web, nosuch, wakeTimeout)
	if a.Status != http.StatusOK || a.Body != string(grpcFrame(msg)) {
		s.t.Fatalf(":authority %s, Host %s: %s; want web woken and its pod's echo", web, nosuch, a)
	}
	if got := s.e.Replicas(elastiv1alpha1.KindDeployment, app); got != 1 {
		s.t.Errorf("web has %d replicas after the wake; want 1", got)
	}
	s.expectReadyPod(a.ServedBy)
	s.e.WaitMode(app, elastiv1alpha1.ModeServe)
}

// mustGauge is resolverGauge, failing the test when it cannot be read.
func (s *scenario) mustGauge(p corev1.Pod, name string) int {
	s.t.Helper()
	n, err := s.resolverGauge(p, name)
	if err != nil {
		s.t.Fatal(err)
	}
	return n
}

// counterTotal sums every series of the counter name on p's /metrics.
func (s *scenario) counterTotal(p corev1.Pod, name string) int {
	s.t.Helper()
	resp := s.do(realnet.Request{URL: fmt.Sprintf("http://%s:%d/metrics", p.Status.PodIP, resolverInternalPort), Timeout: quickTimeout})
	if resp.Status != http.StatusOK {
		s.t.Fatalf("%s's metrics: %s", p.Name, resp)
	}
	total := 0.0
	for _, line := range strings.Split(resp.Body, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err != nil {
			s.t.Fatalf("%s's metrics: %q: %v", p.Name, line, err)
		}
		total += v
	}
	return int(total)
}

// TestAdversarialNamespaceShareThroughKubeProxy: with --global-queue=4 and
// --namespace-share=50, each resolver pod holds at most 2 requests for one
// namespace's Services. Through kube-proxy (web's ClusterIP, each request
// on a connection of its own, spread over the resolver pods), with the
// operator down so that nothing wakes:
//
//   - team A floods its sleeping web: at most 2 held per resolver pod (the
//     boundary), each one past refused at once with 503, Retry-After and
//     a body naming the namespace, counted as a namespace overflow;
//   - team B, another namespace, calls its own sleeping web: held, in the
//     half A could not take;
//
// once the operator is back, B's request and A's held ones are answered by
// their own Service's new pod.
func TestAdversarialNamespaceShareThroughKubeProxy(t *testing.T) {
	const (
		global, share = 4, 2 // --namespace-share=50 of --global-queue=4
		flood         = 12   // over two resolver pods, each gets past 2 but for a 0.6% chance
		// Held across the operator's return and the wakes, and within the
		// resolver's own request timeout (120 s), which would answer 504.
		holdFor = 90 * time.Second
	)
	a := newScenario(t)
	b := newScenario(t)
	// The per-Service queue may not exceed the global one (the resolver
	// refuses to start otherwise).
	a.setResolverArgs(fmt.Sprintf("--global-queue=%d", global), fmt.Sprintf("--per-service-queue=%d", global), "--namespace-share=50")
	a.waitEveryResolverListens(1)
	b.waitEveryResolverListens(1)
	a.sleep()
	b.sleep()
	a.scaleOperator(0)
	pods := a.readyResolverPods()
	overflowBefore := 0
	for _, p := range pods {
		overflowBefore += a.overflowOn(p, "namespace")
	}

	aHeld := a.heldBy(a.client, realnet.Request{URL: "http://" + app + "/", Parallel: flood, Timeout: holdFor})
	overflowNow := func() int {
		n := -overflowBefore
		for _, p := range pods {
			n += a.overflowOn(p, "namespace")
		}
		return n
	}
	// Every request of the flood has been held or refused before B's is
	// sent.
	a.eventually("each request of team A's flood to be held or refused", func() (bool, string) {
		held, desc := a.heldRequests()
		refused := overflowNow()
		return held+refused == flood, fmt.Sprintf("%d refused; %s", refused, desc)
	})
	perPod, desc := a.heldPerPod()
	if perPod == nil {
		t.Fatal(desc)
	}
	aHeldNow := 0
	for name, n := range perPod {
		aHeldNow += n
		if n > share {
			t.Errorf("team A holds %d places on %s, past its share of %d: %s", n, name, share, desc)
		}
	}
	bHeld := b.heldBy(b.client, realnet.Request{URL: "http://" + app + "/", Timeout: holdFor})
	a.eventually("team B's request to be held beside A's", func() (bool, string) {
		held, desc := a.heldRequests()
		return held == aHeldNow+1, desc
	})

	a.scaleOperator(1)
	burst := <-aHeld
	if len(burst.Parallel) != flood {
		t.Fatalf("team A's flood: %s", burst)
	}
	var answered, refused int
	for _, r := range burst.Parallel {
		switch {
		case r.Status == http.StatusOK:
			a.expectWoken(r)
			answered++
		case r.Status == http.StatusServiceUnavailable:
			refused++
			if r.Header.Get("Retry-After") == "" || !strings.Contains(r.Body, "for services of namespace "+a.e.NS) || r.Duration >= holdFor/2 {
				t.Errorf("a refusal past the namespace share must come at once, with Retry-After and the namespace: %s, Retry-After %q", r, r.Header.Get("Retry-After"))
			}
		default:
			t.Errorf("team A's flood: want each request held and answered, or refused with 503; got %s", r)
		}
	}
	t.Logf("team A: %d held and answered, %d refused, over %d resolver pods", answered, refused, len(pods))
	if answered != aHeldNow || answered > share*len(pods) || answered+refused != flood {
		t.Errorf("team A had %d answered (%d were held) and %d refused of %d, with a share of %d on each of %d resolver pods", answered, aHeldNow, refused, flood, share, len(pods))
	}
	if overflow := overflowNow(); overflow != refused {
		t.Errorf("the resolver pods counted %d namespace overflows; want %d, one per refusal", overflow, refused)
	}
	b.expectWoken(<-bHeld)
}
