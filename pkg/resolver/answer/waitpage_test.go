package answer

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"

	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
)

var testSvc = clusterview.ServiceRef{Namespace: "team", Name: "web"}

func TestIsNavigation(t *testing.T) {
	for _, c := range []struct {
		method string
		header map[string]string
		want   bool
	}{
		{"GET", map[string]string{"Sec-Fetch-Mode": "navigate"}, true},
		{"GET", map[string]string{"Sec-Fetch-Mode": "Navigate", "Accept": "application/json"}, true},
		{"HEAD", map[string]string{"Accept": "text/html"}, true},
		{"GET", map[string]string{"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}, true},
		{"GET", map[string]string{"Accept": "application/json, TEXT/HTML;q=0.5"}, true},
		{"GET", map[string]string{"Accept": "text/html;q=0"}, false},
		{"GET", map[string]string{"Accept": "text/html;q=bad"}, false},
		{"GET", map[string]string{"Accept": "*/*"}, false},
		{"GET", map[string]string{"Accept": "text/*"}, false},
		{"GET", map[string]string{"Accept": "text/htmlx"}, false},
		{"GET", map[string]string{}, false},
		{"GET", map[string]string{"Sec-Fetch-Mode": "cors", "Accept": "text/html"}, false},
		{"GET", map[string]string{"Sec-Fetch-Mode": "no-cors", "Accept": "text/html"}, false},
		{"GET", map[string]string{"Sec-Fetch-Mode": "navigate", "Upgrade": "websocket"}, false},
		{"GET", map[string]string{"Sec-Fetch-Mode": "navigate", "Range": "bytes=0-1"}, false},
		{"POST", map[string]string{"Sec-Fetch-Mode": "navigate", "Accept": "text/html"}, false},
		{"OPTIONS", map[string]string{"Accept": "text/html"}, false},
	} {
		req := httptest.NewRequest(c.method, "http://web.team/", nil)
		for k, v := range c.header {
			req.Header.Set(k, v)
		}
		if got := IsNavigation(req); got != c.want {
			t.Errorf("%s %v: %v, want %v", c.method, c.header, got, c.want)
		}
	}
	// A body (which no navigation by GET has) and HTTP/3 or HTTP/0.9
	// framing are not navigations either.
	withLen := httptest.NewRequest("GET", "http://web.team/", strings.NewReader("x"))
	withLen.Header.Set("Sec-Fetch-Mode", "navigate")
	if IsNavigation(withLen) {
		t.Error("GET with a body counted as a navigation")
	}
	h3 := httptest.NewRequest("GET", "http://web.team/", nil)
	h3.Header.Set("Sec-Fetch-Mode", "navigate")
	h3.ProtoMajor = 3
	if IsNavigation(h3) {
		t.Error("HTTP/3 counted as a navigation")
	}
}

// The page escapes the Service's name and stays small whatever it is.
func TestWaitingPageEscapesAndIsBounded(t *testing.T) {
	p := NewPages(0, NewMetrics())
	logger, _ := ktesting.NewTestContext(t)
	svc := clusterview.ServiceRef{Namespace: "team", Name: `<script>alert("x")</script>&` + strings.Repeat("a", 63)}
	w := httptest.NewRecorder()
	p.Write(w, httptest.NewRequest("GET", "/", nil), logger, svc, Wake{}, time.Now().Add(-90*time.Second))
	body := w.Body.String()
	if strings.Contains(body, "<script>") || !strings.Contains(body, "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;&amp;") {
		t.Errorf("name not escaped:\n%s", body)
	}
	if !strings.Contains(body, "waking for 90 s") {
		t.Errorf("elapsed time missing:\n%s", body)
	}
	if w.Body.Len() > 2048 {
		t.Errorf("page of %d bytes", w.Body.Len())
	}
}

// The pages of one wake count from its first request while reloads keep
// coming; after a pause, or once the wake is over, a page counts anew.
// The clock is bounded.
func TestPageClock(t *testing.T) {
	c := newPageClock(10 * time.Second)
	t0 := time.Now()
	if got := c.since(testSvc, t0, t0.Add(time.Second)); !got.Equal(t0) {
		t.Errorf("first page: %v", got)
	}
	if got := c.since(testSvc, t0.Add(3*time.Second), t0.Add(4*time.Second)); !got.Equal(t0) {
		t.Errorf("reload: since %v, want the first request's %v", got, t0)
	}
	late := t0.Add(30 * time.Second)
	if got := c.since(testSvc, late, late.Add(time.Second)); !got.Equal(late) {
		t.Errorf("after a pause: since %v, want %v", got, late)
	}
	c.forget(testSvc)
	now := late.Add(2 * time.Second)
	if got := c.since(testSvc, now, now); !got.Equal(now) {
		t.Errorf("after forget: since %v, want %v", got, now)
	}
	for i := range maxPageClocks + 10 {
		c.since(clusterview.ServiceRef{Namespace: "ns", Name: fmt.Sprint("s", i)}, now, now)
	}
	if n := len(c.starts); n > maxPageClocks {
		t.Errorf("%d clocks kept, want at most %d", n, maxPageClocks)
	}
	// Stale ones make room.
	later := now.Add(time.Minute)
	c.since(clusterview.ServiceRef{Namespace: "ns", Name: "new"}, later, later)
	if _, ok := c.starts[clusterview.ServiceRef{Namespace: "ns", Name: "new"}]; !ok || len(c.starts) != 1 {
		t.Errorf("stale clocks not pruned: %d kept", len(c.starts))
	}
}
