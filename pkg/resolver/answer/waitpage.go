package answer

import (
	"bytes"
	"fmt"
	"html/template"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
)

// The waiting page, said once here.
//
// A browser navigation held for a Service that is waking is answered,
// once it has waited the resolver's Config.WaitingPageAfter without a
// Ready pod, with a small HTML page (503, Retry-After) that reloads
// itself every PageRefresh: the person sees that the Service is
// starting, and a later reload reaches the pod. The request leaves its hold when the page is
// written, so the page costs no place in the queues while the person
// reads it; each reload is held, and wakes, as any request. Every other
// request (APIs, gRPC, fetch, WebSockets, TCP) is held as before.
//
// It is on for a Service when its ElastiService's spec.waitingPage says
// enabled, or when Config.WaitingPage is set and spec.waitingPage does not
// say disabled; spec.waitingPage.after, when set, replaces
// Config.WaitingPageAfter for that Service. Which held request gets the
// page, and when, is the resolver's to decide; this package writes it.

// PageRefresh is how often the page reloads itself, and its Retry-After.
const PageRefresh = time.Second

// maxPageClocks bounds the Services whose wake start the pages remember
// (pageClock); past it a page counts from its own request.
const maxPageClocks = 4096

// pageContentSecurityPolicy lets the page load nothing and run nothing:
// its only style is inline.
const pageContentSecurityPolicy = "default-src 'none'; style-src 'unsafe-inline'"

// PageSwitch reads the spec.waitingPage of a Service's ElastiService, nil
// when it has none. NamedIndex is one.
type PageSwitch interface {
	WaitingPage(clusterview.ServiceRef) *elastiv1alpha1.WaitingPage
}

// IsNavigation reports whether req is a browser's top-level navigation,
// the only request a waiting page may answer: GET or HEAD over HTTP/1 or
// HTTP/2, with no body, no Upgrade and no Range, and Sec-Fetch-Mode:
// navigate or, from a client that sends no Sec-Fetch-Mode, an Accept
// that names text/html. A fetch or XHR from a page says another
// Sec-Fetch-Mode and is held as before.
func IsNavigation(req *http.Request) bool {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		return false
	}
	if req.ProtoMajor != 1 && req.ProtoMajor != 2 {
		return false
	}
	if req.ContentLength != 0 || req.Header.Get("Upgrade") != "" || req.Header.Get("Range") != "" {
		return false
	}
	if mode := req.Header.Get("Sec-Fetch-Mode"); mode != "" {
		return strings.EqualFold(mode, "navigate")
	}
	return acceptsHTML(req.Header.Values("Accept"))
}

// acceptsHTML reports whether an Accept header's media ranges name
// text/html with a quality above zero. A wildcard does not count: an API
// client sends */*, a browser names text/html.
func acceptsHTML(accept []string) bool {
	for _, v := range accept {
		for r := range strings.SplitSeq(v, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(r))
			if err != nil || mt != "text/html" {
				continue
			}
			if q, ok := params["q"]; ok {
				if f, err := strconv.ParseFloat(q, 64); err != nil || f <= 0 {
					continue
				}
			}
			return true
		}
	}
	return false
}

// pageTemplate is the page: self-contained, no script, no external
// resource; html/template escapes what it is given. Its refresh is a
// constant of the text, never data.
var pageTemplate = template.Must(template.New("page").Parse(fmt.Sprintf(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="refresh" content="%d">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Service}} is starting</title>
<style>body{font-family:system-ui,sans-serif;max-width:36em;margin:4em auto;padding:0 1em;color:#222}.note{color:#666}</style>
</head>
<body>
<h1>{{.Service}} is starting</h1>
<p>It was asleep and is waking up: {{.Progress}}. It has been waking for {{.Elapsed}}{{if .Estimate}}, and usually takes about {{.Estimate}}{{end}}.</p>
<p class="note">This page reloads itself and shows the service once it is ready.</p>
</body>
</html>
`, int(PageRefresh/time.Second))))

type pageData struct {
	Service  string
	Progress string
	Elapsed  string
	Estimate string
}

// Pages writes the waiting page and the wake status (wake.go): how far
// a Service's wake is, and since when it runs, as its wake's clock says.
type Pages struct {
	clock    *pageClock
	written  prometheus.Counter
	statuses prometheus.Counter
}

// NewPages returns the pages, counted in m. after is the resolver's
// Config.WaitingPageAfter: a wake's pages count on while reloads come
// within the longest delay a page may have (after, or the longest
// spec.waitingPage.after) and ten reloads more.
func NewPages(after time.Duration, m Metrics) *Pages {
	return &Pages{clock: newPageClock(max(after, elastiv1alpha1.MaxWaitingPageAfter) + 10*PageRefresh),
		written: m.WaitingPages, statuses: m.WakeStatuses}
}

// Write answers req with the waiting page for svc, whose wake is wake and
// began at began as far as this resolver knows (pageClock).
func (p *Pages) Write(w http.ResponseWriter, req *http.Request, logger klog.Logger, svc clusterview.ServiceRef, wake Wake, began time.Time) {
	now := time.Now()
	since := p.clock.since(svc, began, now)
	data := pageData{Service: svc.Name, Progress: wake.words(now),
		Elapsed: strconv.Itoa(wholeSeconds(max(0, now.Sub(since)))) + " s"}
	if wake.Estimate > 0 {
		data.Estimate = strconv.Itoa(max(1, wholeSeconds(wake.Estimate))) + " s"
	}
	var body bytes.Buffer
	if err := pageTemplate.Execute(&body, data); err != nil {
		// Only a write to the buffer could fail; answer as a timeout would.
		logger.Error(err, "Rendering the waiting page")
		Error(w, http.StatusServiceUnavailable, fmt.Sprintf("service %s is starting; retry", svc))
		return
	}
	p.written.Inc()
	logger.V(4).Info("Answered a browser with the waiting page", "waking", now.Sub(since), "stage", wake.Progress.Stage)
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(body.Len()))
	h.Set("Cache-Control", "no-store")
	h.Set("Retry-After", RetryAfterSeconds(PageRefresh))
	h.Set("Content-Security-Policy", pageContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusServiceUnavailable)
	if req.Method != http.MethodHead {
		_, _ = w.Write(body.Bytes())
	}
}

// Forget ends svc's count: a held navigation or status ask reached a
// pod, its wake is over.
func (p *Pages) Forget(svc clusterview.ServiceRef) { p.clock.forget(svc) }

// pageClock remembers, per Service, when the pages of its current wake
// began counting, so a reload says how long the wake has taken, not how
// long the reload waited. An entry lives while pages are answered for
// the Service, at most idle after the last one, and goes when a held
// navigation reaches a pod; there are at most maxPageClocks, and only of
// Services the resolver is in front of.
type pageClock struct {
	idle time.Duration

	mu     sync.Mutex
	starts map[clusterview.ServiceRef]pageStart
}

type pageStart struct{ since, seen time.Time }

func newPageClock(idle time.Duration) *pageClock {
	return &pageClock{idle: idle, starts: map[clusterview.ServiceRef]pageStart{}}
}

// since returns when svc's wake began: the start of the first request of
// the pages answered for it without a pause longer than idle, or began,
// this request's, when none was.
func (c *pageClock) since(svc clusterview.ServiceRef, began, now time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.starts[svc]; ok && now.Sub(s.seen) <= c.idle {
		s.seen = now
		c.starts[svc] = s
		return s.since
	}
	if _, ok := c.starts[svc]; !ok && len(c.starts) >= maxPageClocks {
		for k, s := range c.starts {
			if now.Sub(s.seen) > c.idle {
				delete(c.starts, k)
			}
		}
		if len(c.starts) >= maxPageClocks {
			return began
		}
	}
	c.starts[svc] = pageStart{since: began, seen: now}
	return began
}

// forget ends svc's count: its wake is over.
func (c *pageClock) forget(svc clusterview.ServiceRef) {
	c.mu.Lock()
	delete(c.starts, svc)
	c.mu.Unlock()
}
