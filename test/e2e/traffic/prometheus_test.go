package traffic

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/idle"
	"github.com/elasti-dev/elasti/pkg/triggers"
	"github.com/elasti-dev/elasti/test/localcluster/podnet"
	"github.com/elasti-dev/elasti/test/localcluster/realnet"
	"github.com/elasti-dev/elasti/test/testenv"
)

// The trigger tests run against the bed's real Prometheus
// (realnet.PrometheusURL, the manifests' default server), which discovers
// the pods through the apiserver and scrapes Traefik and the app pods
// every 2 s. The operator polls every pollingInterval.

// idleTimeout bounds the wait for a target to be scaled to zero once its
// traffic stopped: the query's rate window must empty (a minute at most
// here), then the cooldown pass, then a poll see it.
const idleTimeout = 3 * time.Minute

// pollsToHold is how many of the operator's polls a test watches a target
// stay up for, where it must never go down.
const pollsToHold = 5

// trigger is one prometheus trigger's metadata, as a user writes it.
func trigger(query, threshold string) elastiv1alpha1.ScaleTrigger {
	md, err := json.Marshal(map[string]string{"query": query, "threshold": threshold})
	if err != nil {
		panic(err)
	}
	return elastiv1alpha1.ScaleTrigger{Type: elastiv1alpha1.TriggerTypePrometheus, Metadata: md}
}

// ingressRate is KubeElasti's documented ingress-rate trigger, written for
// Traefik: the rate of requests the ingress controller sent to web's
// Service (Traefik names an Ingress backend <ns>-<svc>-<port>@kubernetes).
func ingressRate(ns, window string, orVector0 bool) string {
	q := fmt.Sprintf(`sum(rate(traefik_service_requests_total{service=~"%s-%s-.*@kubernetes"}[%s]))`, ns, app, window)
	if orVector0 {
		q += " or vector(0)"
	}
	return q
}

// appRate is the rate of requests web's own pods answered, from their
// http_requests_total: every path counts, the short name and the ingress.
func appRate(ns, window string) string {
	return fmt.Sprintf(`sum(rate(%s{namespace=%q,job="kubernetes-pods"}[%s])) or vector(0)`, appRequestsMetric, ns, window)
}

// newPrometheusScenario is newScenario with web's pods scraped by
// Prometheus (the annotations of its kubernetes-pods job) and an
// ElastiService with cooldown seconds and the triggers trigs makes for
// the test's namespace. It returns once Prometheus has scraped web's pod:
// Prometheus counts only what happens between two of its scrapes, so
// traffic sent before the first one is never in a rate(). Its discovery
// reaches the scrape loops every 5 s, and a Prometheus just restarted by
// a serial test finds every pod anew: a CI run's rate-window test once
// sent its whole 8 s busy spell before that first scrape, read a rate
// below its threshold and saw web go to zero.
func newPrometheusScenario(t testing.TB, cooldown int32, trigs func(ns string) []elastiv1alpha1.ScaleTrigger) *scenario {
	t.Helper()
	b := testBed(t)
	e := testenv.New(t)
	e.Deployment(app, 1, func(d *appsv1.Deployment) {
		d.Spec.Template.Annotations = map[string]string{
			"prometheus.io/scrape": "true",
			"prometheus.io/port":   strconv.Itoa(appPort),
		}
	})
	e.Service(app, app)
	e.Eventually("web's pod to be Ready", func() (bool, string) {
		ips := e.ReadyPodIPs(app)
		return len(ips) == 1, fmt.Sprint(ips)
	})
	client, err := b.Client(t.Context(), e.NS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	s := &scenario{t: t, bed: b, e: e, client: client, ctx: t.Context(), explained: new(atomic.Bool)}
	t.Cleanup(s.explainFailure)
	t.Cleanup(s.explainPrometheus)
	// Before the ElastiService, whose cooldown counts from its creation:
	// the wait must not eat into a test's cooldown.
	s.e.Eventually("Prometheus to have scraped web's pod", func() (bool, string) {
		v, ok, why := s.value("count(" + s.appSeries() + ")")
		return ok && v == 1, why
	})
	e.ElastiServiceWith(app, app, elastiv1alpha1.KindDeployment, app, func(es *elastiv1alpha1.ElastiService) {
		es.Spec.MinTargetReplicas = 1
		es.Spec.CooldownPeriod = cooldown
		es.Spec.Triggers = trigs(e.NS)
	})
	e.WaitMode(app, elastiv1alpha1.ModeServe)
	// By its short name, as the scenarios then send their traffic: the
	// resolver's shared port answers a request by ClusterIP too, so only
	// the short name (which it cannot resolve there) tells that kube-proxy
	// has left a resolver slice of web's first, not yet serving, sync.
	s.e.Eventually("kube-proxy to route web's ClusterIP and short name to its pod", func() (bool, string) {
		resp := s.do(realnet.Request{URL: "http://" + s.clusterIP() + "/", Timeout: 2 * time.Second})
		if resp.Status != 200 {
			return false, resp.String()
		}
		resp = s.do(realnet.Request{URL: "http://" + app + "/", Timeout: 2 * time.Second})
		return resp.Status == 200, resp.String()
	})
	return s
}

// appSeries selects web's request counter as Prometheus scrapes it.
func (s *scenario) appSeries() string {
	return fmt.Sprintf(`%s{namespace=%q,job="kubernetes-pods"}`, appRequestsMetric, s.e.NS)
}

// promResult is the part of a Prometheus query answer the tests read:
// Value for an instant vector, Values for a range vector.
type promResult struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
			Values [][2]any          `json:"values"`
		} `json:"result"`
	} `json:"data"`
}

// query asks the bed's Prometheus from the client pod, as any pod would.
func (s *scenario) query(q string) (promResult, realnet.Response) {
	s.t.Helper()
	resp := s.do(realnet.Request{URL: realnet.PrometheusURL + "/api/v1/query?" + url.Values{"query": {q}}.Encode(), Timeout: quickTimeout})
	var r promResult
	if err := json.Unmarshal([]byte(resp.Body), &r); err != nil {
		r.Status = "unreadable: " + err.Error()
	}
	return r, resp
}

// value is q's single value, or false with why there is none.
func (s *scenario) value(q string) (float64, bool, string) {
	s.t.Helper()
	r, resp := s.query(q)
	if r.Status != "success" || len(r.Data.Result) != 1 {
		return 0, false, resp.String()
	}
	str, _ := r.Data.Result[0].Value[1].(string)
	v, err := strconv.ParseFloat(str, 64)
	return v, err == nil, resp.String()
}

// explainPrometheus logs, for a failed test, what Prometheus scrapes.
func (s *scenario) explainPrometheus() {
	if !s.t.Failed() {
		return
	}
	resp, err := s.client.Do(context.Background(), realnet.Request{URL: realnet.PrometheusURL + "/api/v1/query?query=up", Timeout: quickTimeout})
	if err != nil {
		s.t.Logf("Prometheus's up series: %v", err)
		return
	}
	var r promResult
	_ = json.Unmarshal([]byte(resp.Body), &r)
	var ups []string
	for _, x := range r.Data.Result {
		ups = append(ups, fmt.Sprintf("%s/%s/%s=%v", x.Metric["job"], x.Metric["namespace"], x.Metric["container"], x.Value[1]))
	}
	s.t.Logf("Prometheus's up series: %s (%s)", strings.Join(ups, " "), r.Status)
	s.t.Logf("Prometheus's log:\n%s", s.bed.Node.Logs(realnet.PrometheusNamespace, realnet.PrometheusDeployment, 15))
}

// send sends n requests to web by short name and n through the ingress
// (when host is set), one after another, and fails on any answer but 200.
func (s *scenario) send(n int, host string) {
	s.t.Helper()
	reqs := []realnet.Request{{URL: "http://" + app + "/", Timeout: wakeTimeout, Repeat: n - 1}}
	if host != "" {
		reqs = append(reqs, realnet.Request{URL: "http://" + ingressAddr + "/", Host: host, Timeout: wakeTimeout, Repeat: n - 1})
	}
	for _, req := range reqs {
		// Repeat stops at the first failure, and reports it.
		if resp := s.do(req); resp.Status != 200 || resp.Err != "" || len(resp.Repeats) != req.Repeat {
			s.t.Fatalf("a request of the traffic to %s failed after %d repeats: %s", req.URL, len(resp.Repeats), resp)
		}
	}
}

// busyFor sends traffic (a batch of n requests every second) for d, and
// fails if the target is ever not at one replica meanwhile.
func (s *scenario) busyFor(d time.Duration, n int, host string) {
	s.t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); {
		s.send(n, host)
		if got := s.e.Replicas(elastiv1alpha1.KindDeployment, app); got != 1 {
			s.t.Fatalf("web went to %d replicas while its traffic continued", got)
		}
		time.Sleep(time.Second)
	}
}

// holdingCooldown is the cooldown a scenario starts with when its test
// must first fill a rate() window: it keeps web up, as idle or not, until
// the test sets its real cooldown (setCooldown). A cooldown counts from
// the ElastiService's creation, and a window of a minute reaches a
// threshold of 0.5 only once 30 requests are in it: a short cooldown from
// the creation ran out while the window still filled, and web went to
// zero under its own traffic.
const holdingCooldown = 900

// busyUntil sends traffic as busyFor does until Prometheus reads q at or
// above threshold, for at most a minute.
func (s *scenario) busyUntil(q string, threshold float64, n int, host string) {
	s.t.Helper()
	for end := time.Now().Add(time.Minute); ; {
		s.busyFor(time.Second, n, host)
		v, ok, why := s.value(q)
		if ok && v >= threshold {
			return
		}
		if time.Now().After(end) {
			s.t.Fatalf("Prometheus never read the traffic at %v or above within a minute: %v %v %s", threshold, v, ok, why)
		}
	}
}

// setCooldown sets web's cooldown; it counts from the creation, long past.
func (s *scenario) setCooldown(cooldown time.Duration) {
	s.t.Helper()
	s.e.UpdateSpec(app, func(es *elastiv1alpha1.ElastiService) { es.Spec.CooldownPeriod = int32(cooldown / time.Second) })
}

// waitTriggersCondition waits for the TriggersEvaluated condition with
// status and reason, and returns its message.
func (s *scenario) waitTriggersCondition(status metav1.ConditionStatus, reason string) string {
	s.t.Helper()
	var msg string
	s.e.Eventually(fmt.Sprintf("condition %s=%s reason %s", elastiv1alpha1.ConditionTriggersEvaluated, status, reason), func() (bool, string) {
		c := meta.FindStatusCondition(s.e.Get(app).Status.Conditions, elastiv1alpha1.ConditionTriggersEvaluated)
		if c == nil {
			return false, "no such condition"
		}
		msg = c.Message
		return c.Status == status && c.Reason == reason, fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
	})
	return msg
}

// waitTriggerEvent waits for a TriggerError event of web whose message
// holds substr (earlier ones may say other things: Prometheus not yet up
// for the whole cooldown, say).
func (s *scenario) waitTriggerEvent(substr string) {
	s.t.Helper()
	s.e.Eventually("a "+idle.ReasonTriggerError+" event saying "+substr, func() (bool, string) {
		evs, err := s.e.Kube.CoreV1().Events(s.e.NS).List(s.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + app})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, ev := range evs.Items {
			if ev.Reason == idle.ReasonTriggerError {
				if strings.Contains(ev.Message, substr) {
					return true, ""
				}
				seen = append(seen, ev.Message)
			}
		}
		return false, strings.Join(seen, " | ")
	})
}

// holdsUp asserts web stays at one replica for pollsToHold polls.
func (s *scenario) holdsUp() {
	s.t.Helper()
	poll, err := time.ParseDuration(pollingInterval)
	if err != nil {
		s.t.Fatal(err)
	}
	s.e.HoldsReplicas(elastiv1alpha1.KindDeployment, app, 1, pollsToHold*poll)
}

// waitScaledToZero waits until the operator scaled web to zero for
// idleness and put the resolver in front.
func (s *scenario) waitScaledToZero() {
	s.t.Helper()
	s.e.EventuallyWithin("web to be scaled to zero as idle", idleTimeout, func() (bool, string) {
		ok, msg := s.e.HasEvent(app, idle.ReasonScaledToZero)
		return ok && s.e.Replicas(elastiv1alpha1.KindDeployment, app) == 0, msg
	})
	s.e.WaitMode(app, elastiv1alpha1.ModeProxy)
}

// one is a trigger list of one trigger, made for the test's namespace.
func one(query func(ns string) string, threshold string) func(ns string) []elastiv1alpha1.ScaleTrigger {
	return func(ns string) []elastiv1alpha1.ScaleTrigger {
		return []elastiv1alpha1.ScaleTrigger{trigger(query(ns), threshold)}
	}
}

// TestIngressRateTriggerWithOrVector0 runs KubeElasti's documented ingress
// trigger, `sum(rate(<ingress requests>[1m])) or vector(0)`, against the
// real Prometheus: while requests come through the ingress its value is
// above the threshold and web stays up past its cooldown; once they stop
// and the minute's window empties, web is scaled to zero.
func TestIngressRateTriggerWithOrVector0(t *testing.T) {
	sideBySideScenario(t)
	const cooldown = 10 * time.Second
	s := newPrometheusScenario(t, holdingCooldown, one(func(ns string) string { return ingressRate(ns, "1m", true) }, "0.5"))
	query := ingressRate(s.e.NS, "1m", true)
	s.ingress("by-service-name", s.fqdn())
	s.waitIngressRoutes(realnet.Request{URL: "http://" + ingressAddr + "/", Host: s.fqdn()})
	s.busyUntil(query, 0.5, 3, s.fqdn())
	s.setCooldown(cooldown)
	// Busy for longer than the cooldown, so that only the query keeps web up.
	s.busyFor(2*cooldown, 3, s.fqdn())
	v, ok, why := s.value(query)
	if !ok || v < 0.5 {
		t.Fatalf("Prometheus must see the ingress traffic above the threshold 0.5 while it runs: %v %v %s", v, ok, why)
	}
	t.Logf("ingress rate after the busy spell: %.2f/s", v)
	s.waitScaledToZero()
	if v, ok, why := s.value(query); !ok || v >= 0.5 {
		t.Errorf("scaled to zero while Prometheus reads %v (%v, %s), not below 0.5", v, ok, why)
	}
}

// TestIngressRateTriggerWithoutOrVector0 runs the same query without `or
// vector(0)` for a Service nothing ever reached through the ingress: it
// matches no series, which elasti, as KubeElasti, does not read as 0.
// web stays up, and the ElastiService says why in a TriggerError event and
// its TriggersEvaluated condition (False, EmptyResult).
func TestIngressRateTriggerWithoutOrVector0(t *testing.T) {
	sideBySideScenario(t)
	s := newPrometheusScenario(t, 2, one(func(ns string) string { return ingressRate(ns, "1m", false) }, "0.5"))
	if r, resp := s.query(ingressRate(s.e.NS, "1m", false)); r.Status != "success" || len(r.Data.Result) != 0 {
		t.Fatalf("want an empty result from Prometheus: %s", resp)
	}
	s.waitTriggersCondition(metav1.ConditionFalse, string(triggers.ReasonEmptyResult))
	s.waitTriggerEvent("no series")
	s.holdsUp()
}

// TestRateWindowLongerThanCooldown: a trigger whose rate() window (30 s)
// is longer than the cooldown (4 s) keeps web up for as long as the window
// still holds its traffic, well past the cooldown, and lets it go to zero
// once Prometheus reads the rate below the threshold.
func TestRateWindowLongerThanCooldown(t *testing.T) {
	sideBySideScenario(t)
	const cooldown = 4 * time.Second
	query := func(ns string) string { return appRate(ns, "30s") }
	s := newPrometheusScenario(t, holdingCooldown, one(query, "0.2"))
	started := time.Now()
	s.busyFor(8*time.Second, 3, "")
	s.setCooldown(cooldown)
	stopped := time.Now()
	// Watch, after the cooldown has passed since the last request, that web
	// is up every time Prometheus still reads the rate at or above the
	// threshold, until it is scaled to zero. Every look is kept for a
	// failure to show, with the samples Prometheus holds.
	var upPastCooldown int
	var looks []string
	explain := func() {
		t.Logf("traffic from -%s to 0; looks after it (since, rate, replicas): %s", stopped.Sub(started).Round(time.Millisecond), strings.Join(looks, " "))
		t.Logf("web's counter as Prometheus holds it, since the traffic began: %s", s.samplesSince(s.appSeries(), started))
	}
	for {
		if time.Since(stopped) > idleTimeout {
			explain()
			t.Fatalf("web not scaled to zero within %s of its last request", idleTimeout)
		}
		replicas := s.e.Replicas(elastiv1alpha1.KindDeployment, app)
		v, ok, why := s.value(query(s.e.NS))
		if !ok {
			explain()
			t.Fatalf("the trigger's query has no value: %s", why)
		}
		since := time.Since(stopped)
		looks = append(looks, fmt.Sprintf("%s=%.2f/%d", since.Round(100*time.Millisecond), v, replicas))
		if replicas == 0 {
			break
		}
		if v >= 0.2 && since > cooldown+2*time.Second {
			upPastCooldown++
		}
		time.Sleep(500 * time.Millisecond)
	}
	if upPastCooldown == 0 {
		explain()
		t.Fatalf("web was never seen up, with the rate above the threshold, after its cooldown: the window did not outlive the cooldown, so this test proves nothing")
	}
	if v, _, why := s.value(query(s.e.NS)); v >= 0.2 {
		explain()
		t.Errorf("scaled to zero while the rate is %v, not below 0.2: %s", v, why)
	}
	t.Logf("web stayed up for %d looks past its cooldown while the 30 s window held traffic; scaled to zero %s after its last request",
		upPastCooldown, time.Since(stopped).Round(time.Second))
}

// samplesSince is every sample of series Prometheus holds from since on,
// as "+offset=value" pairs, for a failure to show what its rate() read.
func (s *scenario) samplesSince(series string, since time.Time) string {
	s.t.Helper()
	window := time.Since(since).Round(time.Second) + time.Second
	r, resp := s.query(fmt.Sprintf("%s[%ds]", series, int(window.Seconds())))
	if r.Status != "success" {
		return fmt.Sprintf("unreadable (%s): %s", r.Status, resp)
	}
	var out []string
	for _, res := range r.Data.Result {
		for _, v := range res.Values {
			ts, _ := v[0].(float64)
			at := time.Unix(0, int64(ts*float64(time.Second)))
			out = append(out, fmt.Sprintf("+%s=%v", at.Sub(since).Round(100*time.Millisecond), v[1]))
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, " ")
}

// TestTriggerSyntaxErrorIsAConditionAndAnEvent: a query Prometheus cannot
// parse is answered 400 bad_data; the operator keeps web up, says so in a
// TriggerError event and the TriggersEvaluated condition (BadStatus, with
// Prometheus's status and error type), and clears the condition once the
// query is fixed.
func TestTriggerSyntaxErrorIsAConditionAndAnEvent(t *testing.T) {
	sideBySideScenario(t)
	broken := func(ns string) string { return fmt.Sprintf(`sum(rate(%s{namespace=%q}[1m])`, appRequestsMetric, ns) }
	s := newPrometheusScenario(t, 2, one(broken, "0.5"))
	if r, resp := s.query(broken(s.e.NS)); resp.Status != http.StatusBadRequest || r.ErrorType != "bad_data" {
		t.Fatalf("want Prometheus's 400 bad_data for the broken query: %s", resp)
	}
	msg := s.waitTriggersCondition(metav1.ConditionFalse, string(triggers.ReasonBadStatus))
	if !strings.Contains(msg, "HTTP 400") || !strings.Contains(msg, "bad_data") {
		t.Errorf("the condition's message does not carry Prometheus's status and error type: %q", msg)
	}
	s.waitTriggerEvent("bad_data")
	s.holdsUp()

	s.e.UpdateSpec(app, func(es *elastiv1alpha1.ElastiService) {
		es.Spec.Triggers = []elastiv1alpha1.ScaleTrigger{trigger(appRate(s.e.NS, "10s"), "0.5")}
	})
	s.waitTriggersCondition(metav1.ConditionTrue, elastiv1alpha1.ReasonTriggersEvaluated)
	s.waitScaledToZero()
}

// TestPrometheusStoppedKeepsTargetUp: with the bed's Prometheus scaled to
// zero, its Service has no endpoint and every query is refused; web stays
// up and the condition says Unreachable.
func TestPrometheusStoppedKeepsTargetUp(t *testing.T) {
	s := newPrometheusScenario(t, 2, one(func(ns string) string { return appRate(ns, "10s") }, "0.5"))
	s.scalePrometheus(s.ctx, 0)
	// The test's context is done by then.
	t.Cleanup(func() { s.scalePrometheus(context.Background(), 1) })
	s.waitTriggersCondition(metav1.ConditionFalse, string(triggers.ReasonUnreachable))
	s.waitTriggerEvent("prometheus")
	s.holdsUp()
}

// scalePrometheus scales the bed's Prometheus and waits for it.
func (s *scenario) scalePrometheus(ctx context.Context, replicas int32) {
	s.t.Helper()
	scale, err := s.e.Kube.AppsV1().Deployments(realnet.PrometheusNamespace).GetScale(ctx, realnet.PrometheusDeployment, metav1.GetOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	scale.Spec.Replicas = replicas
	if _, err := s.e.Kube.AppsV1().Deployments(realnet.PrometheusNamespace).UpdateScale(ctx, realnet.PrometheusDeployment, scale, metav1.UpdateOptions{}); err != nil {
		s.t.Fatal(err)
	}
	if replicas > 0 {
		if err := s.bed.WaitDeploymentReady(ctx, realnet.PrometheusNamespace, realnet.PrometheusDeployment, readyTimeout); err != nil {
			s.t.Fatal(err)
		}
		return
	}
	s.e.Eventually("Prometheus's pods to be gone", func() (bool, string) {
		pods, err := s.e.Kube.CoreV1().Pods(realnet.PrometheusNamespace).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0, fmt.Sprint(err, pods)
	})
}

// badPrometheus serves, inside the node namespace (where the operator's
// pod reaches it at podnet.NamespaceIP), a Prometheus that answers every
// request with handler, until the test ends.
func badPrometheus(s *scenario, handler http.HandlerFunc) string {
	s.t.Helper()
	ln, err := s.bed.Network.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		s.t.Fatal(err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	s.t.Cleanup(func() { _ = srv.Close() })
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return "http://" + net.JoinHostPort(podnet.NamespaceIP, port)
}

// TestSlowOr503PrometheusKeepsTargetUp: a Prometheus that answers 503, or
// answers after the operator's query timeout, never lets web go down; the
// condition says BadStatus or Timeout.
func TestSlowOr503PrometheusKeepsTargetUp(t *testing.T) {
	sideBySideScenario(t)
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		reason  triggers.Reason
	}{
		{"503", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"status":"error","errorType":"unavailable","error":"TSDB not ready"}`)
		}, triggers.ReasonBadStatus},
		// Past the operator's 5 s query timeout, then cut.
		{"slow", func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(20 * time.Second):
			}
		}, triggers.ReasonTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sideBySideScenario(t)
			var addr string
			s := newPrometheusScenario(t, 2, func(ns string) []elastiv1alpha1.ScaleTrigger { return nil })
			addr = badPrometheus(s, tc.handler)
			md, _ := json.Marshal(map[string]string{"query": appRate(s.e.NS, "10s"), "threshold": "0.5", "serverAddress": addr})
			s.e.UpdateSpec(app, func(es *elastiv1alpha1.ElastiService) {
				es.Spec.Triggers = []elastiv1alpha1.ScaleTrigger{{Type: elastiv1alpha1.TriggerTypePrometheus, Metadata: md}}
			})
			s.waitTriggersCondition(metav1.ConditionFalse, string(tc.reason))
			s.holdsUp()
		})
	}
}

// TestTrafficAloneDrivesTheLifecycle is the loop users rely on, driven by
// nothing but requests and the real Prometheus: a client pod calls web by
// its short name and through the ingress, then stops; after the cooldown
// web is at zero; one request wakes it; continued traffic keeps it up,
// with no scale-down, for several cooldowns.
func TestTrafficAloneDrivesTheLifecycle(t *testing.T) {
	sideBySideScenario(t)
	const cooldown = 15 * time.Second
	query := func(ns string) string { return appRate(ns, "20s") }
	s := newPrometheusScenario(t, int32(cooldown/time.Second), one(query, "0.2"))
	s.ingress("by-service-name", s.fqdn())
	s.waitIngressRoutes(realnet.Request{URL: "http://" + ingressAddr + "/", Host: s.fqdn()})

	s.busyFor(cooldown+5*time.Second, 2, s.fqdn())
	s.waitScaledToZero()
	if err := s.bed.WaitKubeProxyFollows(s.ctx, s.e.NS, app, testenv.WaitTimeout); err != nil {
		t.Fatal(err)
	}
	s.expectWoken(s.do(realnet.Request{URL: "http://" + app + "/", Timeout: wakeTimeout}))
	woken := s.e.Get(app).Status.LastScaledUpTime
	scaledDown := s.countEvents(idle.ReasonScaledToZero)
	// The ingress controller follows the switch back to the pod after its
	// throttle; a request it sent meanwhile once hung here for a minute
	// (see waitIngressReachesResolver for the same on the way down).
	s.send(1, "")
	s.waitIngressFollows()

	// Continued traffic, for three cooldowns: the new pod's own series
	// starts from nothing, and the wake's cooldown must bridge that gap.
	s.busyFor(3*cooldown, 2, s.fqdn())
	if n := s.countEvents(idle.ReasonScaledToZero); n != scaledDown {
		t.Errorf("%d scale-downs while traffic continued after the wake (at %v)", n-scaledDown, woken)
	}
	v, ok, why := s.value(query(s.e.NS))
	if !ok || v < 0.2 {
		t.Errorf("Prometheus does not see the continued traffic above the threshold: %v %v %s", v, ok, why)
	}
}

// countEvents counts web's events with reason (an event's count included).
func (s *scenario) countEvents(reason string) int32 {
	s.t.Helper()
	evs, err := s.e.Kube.CoreV1().Events(s.e.NS).List(s.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + app})
	if err != nil {
		s.t.Fatal(err)
	}
	var n int32
	for _, ev := range evs.Items {
		if ev.Reason == reason {
			n += max(ev.Count, 1)
		}
	}
	return n
}

// TestAuthorizationHeaderFromSecret: the operator's default Prometheus
// sits behind an authenticating proxy (as a Prometheus behind
// oauth2-proxy or a gateway does) that answers 401 to anything but one
// bearer token. The token reaches the operator as users pass it: a Secret,
// and PROMETHEUS_TRIGGER_AUTHORIZATION_HEADER taken from it with
// secretKeyRef. Every query carries it, none is refused, and web goes to
// zero on the real Prometheus's answer.
func TestAuthorizationHeaderFromSecret(t *testing.T) {
	const token = "Bearer elasti-test-token"
	s := newPrometheusScenario(t, 2, func(ns string) []elastiv1alpha1.ScaleTrigger { return nil })
	pods, err := s.e.Kube.CoreV1().Pods(realnet.PrometheusNamespace).List(s.ctx, metav1.ListOptions{LabelSelector: "app=prometheus"})
	if err != nil || len(pods.Items) != 1 || pods.Items[0].Status.PodIP == "" {
		t.Fatalf("want one Prometheus pod with an IP: %v %v", err, pods)
	}
	upstream := &url.URL{Scheme: "http", Host: net.JoinHostPort(pods.Items[0].Status.PodIP, "9090")}
	proxy := httputil.NewSingleHostReverseProxy(upstream)
	var authorized, refused atomic.Int64
	addr := badPrometheus(s, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != token {
			refused.Add(1)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		authorized.Add(1)
		proxy.ServeHTTP(w, r)
	})

	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus-auth-test", Namespace: elastiNamespace},
		StringData: map[string]string{"authorization": token},
	}
	if _, err := s.e.Kube.CoreV1().Secrets(elastiNamespace).Create(s.ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.e.Kube.CoreV1().Secrets(elastiNamespace).Delete(context.Background(), secret.Name, metav1.DeleteOptions{})
	})
	s.setOperatorEnv(
		corev1.EnvVar{Name: "PROMETHEUS_TRIGGER_SERVER_ADDRESS", Value: addr},
		corev1.EnvVar{Name: "PROMETHEUS_TRIGGER_AUTHORIZATION_HEADER", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: secret.Name}, Key: "authorization"},
		}},
	)

	// No serverAddress: the default server, the only one the default
	// credential goes to.
	s.e.UpdateSpec(app, func(es *elastiv1alpha1.ElastiService) {
		es.Spec.Triggers = []elastiv1alpha1.ScaleTrigger{trigger(appRate(s.e.NS, "10s"), "0.5")}
	})
	s.waitScaledToZero()
	if authorized.Load() == 0 || refused.Load() != 0 {
		t.Errorf("the proxy let %d queries through and refused %d; want every query to carry the Secret's header", authorized.Load(), refused.Load())
	}
}

// setOperatorEnv sets env on the operator's manager container, waits for
// the rollout, and restores the container's env (and waits again) when the
// test ends.
func (s *scenario) setOperatorEnv(env ...corev1.EnvVar) {
	s.t.Helper()
	deployments := s.e.Kube.AppsV1().Deployments(elastiNamespace)
	d, err := deployments.Get(s.ctx, operatorDeployment, metav1.GetOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	saved := slices.Clone(d.Spec.Template.Spec.Containers[0].Env)
	update := func(ctx context.Context, vars []corev1.EnvVar) error {
		d, err := deployments.Get(ctx, operatorDeployment, metav1.GetOptions{})
		if err != nil {
			return err
		}
		d.Spec.Template.Spec.Containers[0].Env = vars
		if _, err := deployments.Update(ctx, d, metav1.UpdateOptions{}); err != nil {
			return err
		}
		return s.bed.WaitDeploymentReady(ctx, elastiNamespace, operatorDeployment, readyTimeout)
	}
	vars := slices.Clone(saved)
	for _, e := range env {
		i := slices.IndexFunc(vars, func(v corev1.EnvVar) bool { return v.Name == e.Name })
		if i < 0 {
			vars = append(vars, e)
		} else {
			vars[i] = e
		}
	}
	s.t.Cleanup(func() {
		if err := update(context.Background(), saved); err != nil {
			s.t.Errorf("restoring the operator's env: %v", err)
		}
	})
	if err := update(s.ctx, vars); err != nil {
		s.t.Fatal(err)
	}
}

// TestPrometheusScrapesTheBed: the bed's Prometheus found, through
// Kubernetes service discovery, and scrapes itself (so the default uptime
// filter up{container="prometheus"} has its series), Traefik, elasti's
// operator and resolver, and an app pod that asks for it.
func TestPrometheusScrapesTheBed(t *testing.T) {
	sideBySideScenario(t)
	s := newPrometheusScenario(t, 900, func(string) []elastiv1alpha1.ScaleTrigger { return nil })
	for _, want := range []struct{ namespace, container string }{
		{realnet.PrometheusNamespace, "prometheus"},
		{realnet.IngressNamespace, "traefik"},
		{elastiNamespace, "manager"},
		{elastiNamespace, "resolver"},
		{s.e.NS, "app"},
	} {
		q := fmt.Sprintf(`max(up{namespace=%q,container=%q})`, want.namespace, want.container)
		s.e.Eventually("Prometheus to scrape "+want.namespace+"/"+want.container, func() (bool, string) {
			v, ok, why := s.value(q)
			return ok && v == 1, why
		})
	}
	for _, metric := range []string{"traefik_entrypoint_requests_total", "elasti_operator_scale_to_zero_evaluations_total", appRequestsMetric} {
		s.e.Eventually("Prometheus to hold "+metric, func() (bool, string) {
			v, ok, why := s.value("count(" + metric + ")")
			return ok && v > 0, why
		})
	}
}
