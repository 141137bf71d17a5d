package traffic

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/test/localcluster/realnet"
)

// TestBrowserGetsTheWaitingPageUntilWebWakes: web's ElastiService asks
// for the waiting page, and web's pods are the late app with a readiness
// probe, so a wake takes seconds. A browser-like navigation by web's short
// name, through kube-proxy, is answered with the page (503, reloading
// itself) at once; reloading it, as the page makes a
// browser do, reaches the new pod's answer once web is woken, and web was
// scaled up once. While the app loads, a page says so (started, not ready
// yet), and an API client that asks for the wake status with Prefer, by
// web's ClusterIP, gets it at once as JSON, with the same stages.
func TestBrowserGetsTheWaitingPageUntilWebWakes(t *testing.T) {
	sideBySideScenario(t)
	const (
		lateAppDelay = 5 * time.Second
		maxReloads   = 60
	)
	s := newScenario(t)
	s.e.UpdateSpec(app, func(es *elastiv1alpha1.ElastiService) {
		es.Spec.WaitingPage = &elastiv1alpha1.WaitingPage{Enabled: true}
	})
	s.waitEveryResolverListens(1)
	s.sleep()
	s.runLateReadyApp(lateAppDelay, "/ready")
	writes := s.scaleWrites()

	browser := realnet.Request{URL: "http://" + app + "/shop", Timeout: quickTimeout, Header: map[string]string{
		"Accept":         "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
		"Sec-Fetch-Mode": "navigate",
		"Sec-Fetch-Dest": "document",
		"User-Agent":     "Mozilla/5.0 (elasti e2e)",
	}}
	first := s.do(browser)
	if first.Status != http.StatusServiceUnavailable || !strings.Contains(first.Body, `<meta http-equiv="refresh" content="1">`) ||
		!strings.Contains(first.Body, "web is starting") || first.Header.Get("Content-Type") != "text/html; charset=utf-8" ||
		first.Header.Get("Retry-After") != "1" || first.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("first navigation: want the waiting page, got %s", first)
	}
	t.Logf("waiting page after %s", first.Duration.Round(time.Millisecond))

	asks := realnet.Request{URL: "http://" + s.clusterIP() + "/v1/models", Timeout: quickTimeout, Host: app,
		Header: map[string]string{"Accept": "application/json", "Prefer": "respond-async"}}
	pages, statuses := 1, 0
	var stages, words []string
	ask := func() {
		resp := s.do(asks)
		if resp.Status == http.StatusOK {
			return // woken between two pages
		}
		var st struct{ Reason, Stage string }
		if resp.Status != http.StatusServiceUnavailable || resp.Header.Get("Preference-Applied") != "respond-async" ||
			json.Unmarshal([]byte(resp.Body), &st) != nil || st.Reason != "Waking" {
			t.Fatalf("a status ask: want the wake status, got %s", resp)
		}
		statuses++
		if len(stages) == 0 || stages[len(stages)-1] != st.Stage {
			stages = append(stages, st.Stage)
		}
	}
	ask()
	for range maxReloads {
		time.Sleep(time.Second)
		resp := s.do(browser)
		if resp.Status == http.StatusOK {
			// The app answered 503 to its readiness check for
			// lateAppDelay once started: some page and some status said so.
			if !slices.Contains(stages, "Starting") || !slices.ContainsFunc(words, func(w string) bool { return strings.Contains(w, "started, not ready yet") }) {
				t.Errorf("no page or status said web's pod had started and was not ready: stages %v, pages %q", stages, words)
			}
			t.Logf("%d status asks, stages %v", statuses, stages)
			// Direct probing may forward before the kubelet marks the pod
			// Ready: the answer is from web's one pod, which turns Ready.
			var reply echoReply
			if err := json.Unmarshal([]byte(resp.Body), &reply); err != nil || reply.Path != "/shop" {
				t.Fatalf("want web's answer to the navigation's own path, got %s", resp)
			}
			pods, err := s.e.Kube.CoreV1().Pods(s.e.NS).List(s.ctx, metav1.ListOptions{LabelSelector: "app=" + app})
			if err != nil {
				t.Fatal(err)
			}
			if len(pods.Items) != 1 || pods.Items[0].Status.PodIP != reply.ServedBy {
				t.Fatalf("answered by %s, want web's one pod (%d pods)", reply.ServedBy, len(pods.Items))
			}
			s.e.Eventually("web's pod to be Ready", func() (bool, string) {
				ips := s.e.ReadyPodIPs(app)
				return len(ips) == 1 && ips[0] == reply.ServedBy, fmt.Sprint(ips)
			})
			if got := s.e.Replicas(elastiv1alpha1.KindDeployment, app); got != 1 {
				t.Errorf("web has %d replicas after the wake, want 1", got)
			}
			if got := s.scaleWrites() - writes; got != 1 {
				t.Errorf("%d scale-ups for a browser reloading the page; want exactly 1", got)
			}
			t.Logf("%d waiting pages, then the pod's answer", pages)
			return
		}
		if resp.Status != http.StatusServiceUnavailable || !strings.Contains(resp.Body, "web is starting") {
			t.Fatalf("reload %d: want the waiting page or the pod's answer, got %s", pages, resp)
		}
		if _, rest, ok := strings.Cut(resp.Body, "waking up: "); ok {
			words = append(words, strings.SplitN(rest, ".", 2)[0])
		}
		pages++
		ask()
	}
	t.Fatalf("web did not answer within %d reloads", maxReloads)
}
