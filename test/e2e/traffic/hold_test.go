package traffic

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/test/localcluster/realnet"
)

const (
	// holdTimeout is web's spec.hold.timeout in the hold-bounds test, far
	// below the resolver's --request-timeout (2m), and holdAppReady how
	// long after its start web's pod listens: past the timeout, so every
	// request held for the first wake meets it.
	holdTimeout  = 4 * time.Second
	holdAppReady = 15 * time.Second
)

// holdAnswer is the JSON body a client past a hold bound reads.
type holdAnswer struct {
	Service, Reason, Message string
	RetryAfterSeconds        int
}

// TestAServicesOwnHoldBoundsThroughKubeProxy: web's ElastiService sets
// spec.hold (a 4 s timeout, one request held at once on each resolver
// pod), and web's pod listens, and so passes its readiness probe, 15 s
// after it starts. Of three requests by ClusterIP at once, two reach one
// of the two resolver pods, so at least one is past maxRequests: it gets
// 503 with Retry-After at once, its body naming HoldMaxRequests. The ones
// held get 503 HoldTimeout once their 4 s are over, not the resolver's 2
// minutes. Once the pod is Ready, a request is answered by it. A timeout
// past the API's hour is refused by the operator (InvalidSpec), with the
// field named.
func TestAServicesOwnHoldBoundsThroughKubeProxy(t *testing.T) {
	sideBySideScenario(t) // waits on its own Service only, restarts nothing
	s := newScenario(t)
	// Set before the sleep, so that the resolvers' caches have it by the
	// time the Service sleeps: seconds, where their watches take
	// milliseconds.
	s.e.UpdateSpec(app, func(es *elastiv1alpha1.ElastiService) {
		es.Spec.Hold = &elastiv1alpha1.Hold{Timeout: holdTimeout.String(), MaxRequests: 1}
	})
	s.sleep()
	s.runLateReadyApp(holdAppReady, "/")

	sent := time.Now()
	burst := s.do(realnet.Request{URL: "http://" + s.clusterIP() + "/held", Parallel: 3, Timeout: time.Minute,
		Header: map[string]string{"Accept": "application/json"}})
	reasons := map[string]int{}
	for i, r := range burst.Parallel {
		var a holdAnswer
		if r.Status != http.StatusServiceUnavailable || json.Unmarshal([]byte(r.Body), &a) != nil || a.Service != s.e.NS+"/"+app {
			t.Fatalf("request %d: %s, want 503 with a JSON body naming %s/%s", i, r, s.e.NS, app)
		}
		if r.Header.Get("Retry-After") == "" || a.RetryAfterSeconds < 1 {
			t.Errorf("request %d: no Retry-After: %s", i, r)
		}
		reasons[a.Reason]++
		if a.Reason == "HoldTimeout" && r.Duration < holdTimeout {
			t.Errorf("request %d: HoldTimeout after %s, before its %s", i, r.Duration, holdTimeout)
		}
	}
	if reasons["HoldMaxRequests"] < 1 || reasons["HoldTimeout"] < 1 || reasons["HoldMaxRequests"]+reasons["HoldTimeout"] != 3 {
		t.Fatalf("reasons %v of three requests at once, want at least one past maxRequests and one past the timeout: %+v", reasons, burst.Parallel)
	}
	if took := time.Since(sent); took > time.Minute {
		t.Errorf("the burst took %s: the resolver's own timeout, not the Service's", took)
	}

	// The held requests woke web: once its pod listens, one is answered.
	s.e.EventuallyWithin("web to answer once its pod listens", time.Minute, func() (bool, string) {
		resp := s.do(realnet.Request{URL: "http://" + s.clusterIP() + "/", Timeout: 10 * time.Second})
		return resp.Status == http.StatusOK, resp.String()
	})

	// Past the API's bound the operator refuses the spec, naming the field.
	s.e.UpdateSpec(app, func(es *elastiv1alpha1.ElastiService) { es.Spec.Hold.Timeout = "1h0m1s" })
	es := s.e.WaitReason(app, metav1.ConditionFalse, "InvalidSpec")
	if c := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionReady); c == nil || !strings.Contains(c.Message, "spec.hold.timeout") {
		t.Errorf("InvalidSpec without the field: %+v", c)
	}
}

// longHoldAppStart is how long after its start web's pod listens in
// TestAHeldRequestOutlastsTheIntermediaries: past 60 s, the idle timeout
// many load balancers cut a silent connection at, and Traefik's own
// entry point readTimeout (60 s by default in Traefik v3).
const longHoldAppStart = 75 * time.Second

// TestAHeldRequestOutlastsTheIntermediaries (issue 41, item 2): web's pod
// listens 75 s after it starts, and is Ready only then (its readiness
// probe), and its ElastiService holds a request up
// to 3 minutes (spec.hold). Six requests sent at once while web sleeps,
// by its short name and its ClusterIP (kube-proxy), through Traefik by an
// Ingress host and through Traefik's Gateway API provider by an HTTPRoute
// hostname, a raw TCP connection to its TCP port and an HTTP/2 request
// (prior knowledge) to its h2c port, are each held for the whole start,
// silent all along, and answered by the woken pod: no intermediary on
// the bed's paths cuts a request held that long. An API client behind one that does asks with
// Prefer: wait=N instead (TestBrowserGetsTheWaitingPageUntilWebWakes).
func TestAHeldRequestOutlastsTheIntermediaries(t *testing.T) {
	sideBySideScenario(t) // waits on its own Service only, restarts nothing
	tcpPort := corev1.ServicePort{Name: "tcp", Port: tcpEchoPort, TargetPort: intstr.FromInt32(tcpEchoPort)}
	s := newScenarioWithPorts(t, tcpPort, grpcEchoServicePort)
	s.waitResolverPorts(3)
	ingHost, gwHost := "long-"+s.e.NS+".example.com", "long-gw-"+s.e.NS+".example.com"
	s.ingress("long-hold", ingHost)
	s.httpRoute("long-hold", gwHost)
	s.e.UpdateSpec(app, func(es *elastiv1alpha1.ElastiService) {
		es.Spec.Hold = &elastiv1alpha1.Hold{Timeout: "3m"}
	})
	// Both routes answer before the sleep, so a held request's failure is
	// the hold's, not a route not yet programmed.
	for _, host := range []string{ingHost, gwHost} {
		s.e.EventuallyWithin("Traefik to route "+host, time.Minute, func() (bool, string) {
			resp := s.do(realnet.Request{URL: "http://" + ingressAddr + "/", Host: host, Timeout: quickTimeout})
			return resp.Status == http.StatusOK, resp.String()
		})
	}
	s.sleep()
	// Traefik follows the switch to the resolver after its providers'
	// throttle; until then it dials the gone pod (30 s, then 504).
	s.waitIngressFollows()
	s.runLateReadyApp(longHoldAppStart, "/")

	ways := map[string]realnet.Request{
		"short name": {URL: "http://" + app + "/held"},
		"ClusterIP":  {URL: "http://" + s.clusterIP() + "/held"},
		"Ingress":    {URL: "http://" + ingressAddr + "/held", Host: ingHost},
		"HTTPRoute":  {URL: "http://" + ingressAddr + "/held", Host: gwHost},
		"raw TCP":    {URL: fmt.Sprintf("tcp://%s:%d", app, tcpEchoPort), Protocol: realnet.ProtocolTCP, Body: "held"},
		"HTTP/2":     {URL: fmt.Sprintf("http://%s:%d/held", app, grpcEchoPort), Protocol: realnet.ProtocolH2C},
	}
	answers := map[string]realnet.Response{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for way, req := range ways {
		req.Timeout = 3*time.Minute + 30*time.Second
		wg.Go(func() {
			resp := s.do(req)
			mu.Lock()
			answers[way] = resp
			mu.Unlock()
		})
	}
	wg.Wait()
	for way, resp := range answers {
		var reply echoReply
		switch way {
		case "raw TCP":
			servedBy, echoed, _ := strings.Cut(resp.Body, " ")
			if resp.Err != "" || echoed != "held" {
				t.Errorf("%s: %s, want the woken pod's echo of held", way, resp)
				continue
			}
			reply.ServedBy = servedBy
		default:
			if resp.Status != http.StatusOK || json.Unmarshal([]byte(resp.Body), &reply) != nil || resp.Header.Get("X-Elasti-Cold-Start") == "" {
				t.Errorf("%s: %s, want the woken pod's answer, held", way, resp)
				continue
			}
		}
		// Direct probing may forward before the kubelet marks the pod
		// Ready: the answer is from web's one pod, which turns Ready.
		s.e.Eventually(way+"'s answerer to be web's Ready pod", func() (bool, string) {
			ips := s.e.ReadyPodIPs(app)
			return slices.Contains(ips, reply.ServedBy), fmt.Sprintf("answered by %s, Ready %v", reply.ServedBy, ips)
		})
		if resp.Duration < longHoldAppStart-5*time.Second {
			t.Errorf("%s: answered after %s, before web's pod could listen (%s after its start)", way, resp.Duration, longHoldAppStart)
		}
		t.Logf("%s: held %s (the resolver's cold-start header: %q)", way, resp.Duration.Round(time.Millisecond), resp.Header.Get("X-Elasti-Cold-Start"))
	}
}
