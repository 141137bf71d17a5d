package resolver

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/elasti-dev/elasti/pkg/resolver/clusterview/clusterviewtest"
	"github.com/elasti-dev/elasti/pkg/resolver/internal/resolvertest"

	v1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/resolver/answer"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
)

// navigation is what a browser sends when a person opens the page.
func navigation(t *testing.T, e *testEnv, method string) *http.Request {
	req := e.request(t, context.Background(), method, "/shop?q=1", nil)
	req.Header.Set("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")
	req.Header.Set("Sec-Fetch-Mode", "navigate")
	req.Header.Set("Sec-Fetch-Dest", "document")
	return req
}

func pageConfig(after time.Duration) Config {
	cfg := testConfig()
	cfg.WaitingPage = true
	cfg.WaitingPageAfter = after
	return cfg
}

// checkPage checks the headers of a waiting page.
func checkPage(t *testing.T, resp *http.Response) {
	t.Helper()
	want := map[string]string{
		"Content-Type":            "text/html; charset=utf-8",
		"Cache-Control":           "no-store",
		"Retry-After":             "1",
		"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'",
		"X-Content-Type-Options":  "nosniff",
	}
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("status %d, want 503", resp.StatusCode)
	}
	for k, v := range want {
		if got := resp.Header.Get(k); got != v {
			t.Errorf("%s: %q, want %q", k, got, v)
		}
	}
	if resp.ContentLength <= 0 || resp.ContentLength > 2048 {
		t.Errorf("Content-Length %d, want a small page", resp.ContentLength)
	}
}

// A browser navigation held past --waiting-page-after gets the page,
// leaves its hold, and the wake goes on: a later reload says what the
// resolver sees, and once a pod is Ready it gets the pod's answer.
func TestWaitingPageAnswersABrowserAfterTheDelay(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	const after = 200 * time.Millisecond
	e := newEnv(t, pageConfig(after))
	e.backend(t, "10.244.0.1:8080", named("pod"))
	client := newClient(t)

	start := time.Now()
	resp, err := client.Do(navigation(t, e, "GET"))
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	if took := time.Since(start); took < after {
		t.Errorf("page after %v, want at least %v", took, after)
	}
	checkPage(t, resp)
	for _, want := range []string{`<meta http-equiv="refresh" content="1">`, "<title>web is starting</title>", "scaling up, no pod yet", "It has been waking for 0 s."} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q:\n%s", want, body)
		}
	}
	for _, never := range []string{"<script", "src=", "href=", "team"} {
		if strings.Contains(body, never) {
			t.Errorf("page has %q:\n%s", never, body)
		}
	}
	if got := e.r.holds.Held(testSvc); got != 0 {
		t.Errorf("%d held after the page, want 0", got)
	}
	if e.op.posts.Load() < 1 {
		t.Error("the page's request did not wake the Service")
	}
	if got := metricValue(t, e.r.metrics.Answer.WaitingPages); got != 1 {
		t.Errorf("waiting pages %v, want 1", got)
	}

	e.eps.SetUnready(testSvc, clusterview.UnreadyEndpoint{IP: "10.244.0.1", Port: 8080, Pod: "web-1"}, clusterview.UnreadyEndpoint{IP: "10.244.0.2", Port: 8080, Pod: "web-2"})
	resp, err = client.Do(navigation(t, e, "GET"))
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "started, not ready yet") {
		t.Errorf("reload: %d %q, want the page with its pods started", resp.StatusCode, body)
	}

	if got := e.answerOnceHeld(t, client, navigation(t, e, "GET"), "10.244.0.1:8080"); got != "200 pod /shop" {
		t.Errorf("reload once a pod is Ready: %q, want the pod's answer", got)
	}
	if got := metricValue(t, e.r.metrics.Answer.WaitingPages); got != 2 {
		t.Errorf("waiting pages %v, want 2", got)
	}
}

// HEAD gets the page's headers and no body.
func TestWaitingPageHeadHasNoBody(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	e := newEnv(t, pageConfig(0))
	resp, err := newClient(t).Do(navigation(t, e, "HEAD"))
	if err != nil {
		t.Fatal(err)
	}
	checkPage(t, resp)
	if body := readAll(t, resp); body != "" {
		t.Errorf("HEAD body %q", body)
	}
}

// A cold start faster than the delay never shows the page.
func TestWaitingPageNotShownOnAFastWake(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	e := newEnv(t, pageConfig(5*time.Second))
	e.backend(t, "10.244.0.1:8080", named("pod"))
	if got := e.answerOnceHeld(t, newClient(t), navigation(t, e, "GET"), "10.244.0.1:8080"); got != "200 pod /shop" {
		t.Errorf("got %q, want the pod's answer", got)
	}
	if got := metricValue(t, e.r.metrics.Answer.WaitingPages); got != 0 {
		t.Errorf("waiting pages %v, want 0", got)
	}
}

// pageSwitch is a fixed spec.waitingPage for testSvc.
type pageSwitch struct{ wp *v1.WaitingPage }

func (p pageSwitch) WaitingPage(svc clusterview.ServiceRef) *v1.WaitingPage {
	if svc != testSvc {
		return nil
	}
	return p.wp
}

// Requests that are not a navigation, and navigations for a Service the
// page is off for, are held past the delay and answered by the pod.
func TestWaitingPageOthersAreHeldAsBefore(t *testing.T) {
	const after = 50 * time.Millisecond
	api := func(t *testing.T, e *testEnv) *http.Request {
		req := e.request(t, context.Background(), "GET", "/api", nil)
		req.Header.Set("Accept", "application/json")
		return req
	}
	for name, c := range map[string]struct {
		flag bool
		sw   answer.PageSwitch
		req  func(*testing.T, *testEnv) *http.Request
	}{
		"API client":       {true, nil, api},
		"POST from a form": {true, nil, func(t *testing.T, e *testEnv) *http.Request { return withBody(navigation(t, e, "POST")) }},
		"fetch from a page": {true, nil, func(t *testing.T, e *testEnv) *http.Request {
			r := navigation(t, e, "GET")
			r.Header.Set("Sec-Fetch-Mode", "cors")
			return r
		}},
		"WebSocket": {true, nil, func(t *testing.T, e *testEnv) *http.Request {
			r := navigation(t, e, "GET")
			r.Header.Set("Upgrade", "websocket")
			return r
		}},
		"Range": {true, nil, func(t *testing.T, e *testEnv) *http.Request {
			r := navigation(t, e, "GET")
			r.Header.Set("Range", "bytes=0-")
			return r
		}},
		"flag off, no spec.waitingPage": {false, pageSwitch{}, func(t *testing.T, e *testEnv) *http.Request { return navigation(t, e, "GET") }},
		"flag off, no named index":      {false, nil, func(t *testing.T, e *testEnv) *http.Request { return navigation(t, e, "GET") }},
		"flag on, spec disables": {true, pageSwitch{&v1.WaitingPage{Enabled: false}}, func(t *testing.T, e *testEnv) *http.Request {
			return navigation(t, e, "GET")
		}},
		"spec enables, after past the wait": {false, pageSwitch{&v1.WaitingPage{Enabled: true, After: "1m"}}, func(t *testing.T, e *testEnv) *http.Request {
			return navigation(t, e, "GET")
		}},
	} {
		t.Run(name, func(t *testing.T) {
			resolvertest.CheckNoLeaks(t)
			e := newEnv(t, pageConfig(after), func(o *Options) { o.Pages = c.sw })
			e.r.cfg.WaitingPage = c.flag
			e.backend(t, "10.244.0.1:8080", named("pod"))
			done := make(chan string, 1)
			go func() { done <- fetch(newClient(t), c.req(t, e)) }()
			resolvertest.Eventually(t, 5*time.Second, "held", func() bool { return e.r.holds.Held(testSvc) == 1 })
			time.Sleep(6 * after)
			if got := e.r.holds.Held(testSvc); got != 1 {
				t.Fatalf("%d held %v after the delay, want 1", got, 6*after)
			}
			e.eps.Set(testSvc, "10.244.0.1:8080")
			if got := <-done; !strings.HasPrefix(got, "200 pod") {
				t.Errorf("got %q, want the pod's answer", got)
			}
			if got := metricValue(t, e.r.metrics.Answer.WaitingPages); got != 0 {
				t.Errorf("waiting pages %v, want 0", got)
			}
		})
	}
}

func withBody(r *http.Request) *http.Request {
	r.Body = http.NoBody
	r.ContentLength = 0
	return r
}

// spec.waitingPage turns the page on or off per Service, whatever the
// flag, and its after replaces the flag's delay; an after the operator
// would refuse leaves the flag's. It survives the cache's trim, and no
// other Service of the namespace is concerned.
func TestWaitingPageSpec(t *testing.T) {
	const flagAfter = 3 * time.Second
	for _, c := range []struct {
		wp        *v1.WaitingPage
		flag      bool
		want      bool
		wantAfter time.Duration
	}{
		{nil, false, false, flagAfter},
		{nil, true, true, flagAfter},
		{&v1.WaitingPage{Enabled: true}, false, true, flagAfter},
		{&v1.WaitingPage{Enabled: false}, true, false, flagAfter},
		{&v1.WaitingPage{Enabled: true, After: "0s"}, false, true, 0},
		{&v1.WaitingPage{Enabled: true, After: "1500ms"}, false, true, 1500 * time.Millisecond},
		{&v1.WaitingPage{Enabled: true, After: "1m"}, false, true, time.Minute},
		{&v1.WaitingPage{Enabled: true, After: "1m1s"}, false, true, flagAfter},
		{&v1.WaitingPage{Enabled: true, After: "-1s"}, false, true, flagAfter},
		{&v1.WaitingPage{Enabled: true, After: "soon"}, false, true, flagAfter},
	} {
		named, idx := clusterview.NewMemoryNamedIndex()
		es := resolvertest.ElastiService("team", "shop", "web", 1)
		es.Spec.WaitingPage = c.wp
		es.Annotations = map[string]string{"other": strings.Repeat("y", 1024)}
		trimmed, _ := clusterview.TrimForCache(es)
		if err := idx.Add(trimmed); err != nil {
			t.Fatal(err)
		}
		if _, ok := trimmed.(*v1.ElastiService).Annotations["other"]; ok {
			t.Error("the cache keeps annotations")
		}
		r := &Resolver{cfg: Config{WaitingPage: c.flag, WaitingPageAfter: flagAfter}, pages: named}
		req := httptest.NewRequest("GET", "http://web.team/", nil)
		req.Header.Set("Sec-Fetch-Mode", "navigate")
		if e := r.earlyAnswerFor(req, testSvc); e.page != c.want || e.after != c.wantAfter || e.status {
			t.Errorf("%+v with --waiting-page=%v: %+v, want page %v after %v", c.wp, c.flag, e, c.want, c.wantAfter)
		}
		if wp := r.pages.WaitingPage(clusterview.ServiceRef{Namespace: "team", Name: "api"}); wp != nil {
			t.Errorf("another Service: %+v", wp)
		}
	}
}

func TestWaitingPageAfterNegativeIsRefused(t *testing.T) {
	cfg := testConfig()
	cfg.WaitingPageAfter = -time.Second
	if _, err := cfg.complete(); err == nil {
		t.Error("a negative --waiting-page-after was accepted")
	}
}

// A page answered at once ends its request's hold, but not the direct
// checks of the Service's starting pod: they go on across the browser's
// reload, so the reload after the pod passes gets the pod's answer
// without waiting for the slice's Ready, and never before it passes.
func TestWaitingPageAtOnceKeepsProbingAcrossReloads(t *testing.T) {
	app := clusterviewtest.NewStartingApp(t, "127.0.0.2")
	pods := resolvertest.NewFakePods(app.Pod("web-1", "u1"))
	cfg := pageConfig(0)
	cfg.ProbePods = true
	e := newEnv(t, cfg, func(o *Options) { o.Pods = pods })
	e.net.route(app.Addr(), app.Addr())
	e.eps.SetUnready(testSvc, app.Endpoint("web-1", "u1"))
	client := newClient(t)

	reload := func() *http.Response {
		resp, err := client.Do(navigation(t, e, "GET"))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if resp := reload(); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("first navigation: %d, want the page", resp.StatusCode)
	} else {
		readAll(t, resp)
	}
	// Between reloads nothing is held, yet the pod is still checked.
	resolvertest.Eventually(t, 5*time.Second, "the pod checked between reloads", func() bool {
		return e.r.holds.Held(testSvc) == 0 && app.Checks.Load() >= 4
	})
	app.Ready.Store(true)
	// The browser reloads, each time held for a moment and paged, until a
	// reload finds the pod passed: the slice never says Ready.
	var last string
	resolvertest.Eventually(t, 5*time.Second, "a reload answered by the pod", func() bool {
		resp := reload()
		body := readAll(t, resp)
		last = fmt.Sprintf("%d %.40q", resp.StatusCode, body)
		if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("reload: %s, want the page or the pod's answer", last)
		}
		return resp.StatusCode == http.StatusOK && body == "pod"
	})
	if n := app.EarlyHits.Load(); n != 0 {
		t.Errorf("the app got %d requests while its readiness answered 503", n)
	}
	// The linger ends: nothing is probed once the pages stop.
	resolvertest.Eventually(t, 2*pageProbeLinger, "probing to stop", func() bool { return e.r.holds.Direct().Probing() == 0 })
}
