package proberules

import (
	"context"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/elasti-dev/elasti/pkg/resolver/internal/resolvertest"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"

	v1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	elastifake "github.com/elasti-dev/elasti/pkg/generated/clientset/versioned/fake"
	elastiinformers "github.com/elasti-dev/elasti/pkg/generated/informers/externalversions"
	"github.com/elasti-dev/elasti/pkg/regexbudget"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
)

func TestProbeRuleMatching(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	rules := []v1.ProbeResponseRule{
		// 0: exact path, GET only.
		{Method: "GET", Path: &v1.PathMatch{Type: v1.MatchExact, Value: "/healthz"}, Response: resolvertest.CannedAnswer(200, "alive")},
		// 1: prefix with a header (case-insensitive name) and query regex.
		{
			Path:        &v1.PathMatch{Type: v1.MatchPathPrefix, Value: "/probe/"},
			Headers:     []v1.NameValueMatch{{Name: "user-agent", Type: v1.MatchRegularExpression, Value: "kube-probe/.*"}},
			QueryParams: []v1.NameValueMatch{{Name: "deep", Type: v1.MatchExact, Value: "0"}},
			Response:    resolvertest.CannedAnswer(204, ""),
		},
		// 2: invalid regex: never matches, never panics.
		{Path: &v1.PathMatch{Type: v1.MatchRegularExpression, Value: "(["}, Response: resolvertest.CannedAnswer(200, "broken")},
		// 3: regex path, full match only.
		{Path: &v1.PathMatch{Type: v1.MatchRegularExpression, Value: "/ready[0-9]"}, Response: resolvertest.CannedAnswer(503, "not yet")},
		// 4: header only, any method and path.
		{Headers: []v1.NameValueMatch{{Name: "X-Probe", Value: "lb"}}, Response: resolvertest.CannedAnswer(200, "lb ok")},
		// 5: unknown match type: invalid.
		{Path: &v1.PathMatch{Type: "Glob", Value: "/*"}, Response: resolvertest.CannedAnswer(200, "glob")},
		// 6: Host header.
		{Headers: []v1.NameValueMatch{{Name: "host", Type: v1.MatchRegularExpression, Value: "probe\\..*"}}, Response: resolvertest.CannedAnswer(200, "by host")},
		// 7, 8: values that escape the anchoring group once wrapped: invalid.
		{Path: &v1.PathMatch{Type: v1.MatchRegularExpression, Value: "/healthz)|(?:.*"}, Response: resolvertest.CannedAnswer(200, "escaped path")},
		{Headers: []v1.NameValueMatch{{Name: "X-Any", Type: v1.MatchRegularExpression, Value: "a)|(?:.*"}}, Response: resolvertest.CannedAnswer(200, "escaped header")},
	}
	p := NewStaticIndex(ctx)
	p.Upsert(resolvertest.ElastiService("team", "es", "web", 1, rules...))
	svc := clusterview.ServiceRef{Namespace: "team", Name: "web"}

	tests := []struct {
		method, target string
		headers        map[string]string
		host           string
		want           string // body of the expected answer, "" for no match
		status         int
	}{
		{"GET", "/healthz", nil, "", "alive", 200},
		{"get", "/healthz", nil, "", "alive", 200},
		{"POST", "/healthz", nil, "", "", 0},
		{"GET", "/healthz/", nil, "", "", 0},
		{"GET", "/healthz?x=1", nil, "", "alive", 200},
		{"GET", "/probe?deep=0", map[string]string{"User-Agent": "kube-probe/1.36"}, "", "-", 204},
		{"GET", "/probe/x?deep=0&deep=1", map[string]string{"USER-AGENT": "kube-probe/1.36"}, "", "-", 204},
		{"GET", "/prober?deep=0", map[string]string{"User-Agent": "kube-probe/1.36"}, "", "", 0},
		{"GET", "/probe?deep=1", map[string]string{"User-Agent": "kube-probe/1.36"}, "", "", 0},
		{"GET", "/probe?deep=0", map[string]string{"User-Agent": "curl/8"}, "", "", 0},
		{"GET", "/probe?deep=0", nil, "", "", 0},
		{"GET", "/ready1", nil, "", "not yet", 503},
		{"GET", "/ready12", nil, "", "", 0},
		{"GET", "/x/ready1", nil, "", "", 0},
		{"PUT", "/anything", map[string]string{"x-probe": "lb"}, "", "lb ok", 200},
		{"PUT", "/anything", map[string]string{"x-probe": "LB"}, "", "", 0},
		{"GET", "/", nil, "probe.team", "by host", 200},
		{"GET", "/", nil, "", "", 0},
		{"GET", "/anything", map[string]string{"X-Any": "b"}, "", "", 0},
	}
	for _, tc := range tests {
		req := httptest.NewRequest(tc.method, "http://web.team"+tc.target, nil)
		if tc.host != "" {
			req.Host = tc.host
		}
		for k, v := range tc.headers {
			req.Header.Set(k, v)
		}
		a, ok := p.MatchProbe(svc, req)
		if tc.want == "" {
			if ok {
				t.Errorf("%s %s %v: matched %+v, want no match", tc.method, tc.target, tc.headers, a)
			}
			continue
		}
		if !ok {
			t.Errorf("%s %s %v: no match, want %q", tc.method, tc.target, tc.headers, tc.want)
			continue
		}
		if a.Status != tc.status || (tc.want != "-" && a.Body != tc.want) {
			t.Errorf("%s %s: got %+v, want %d %q", tc.method, tc.target, a, tc.status, tc.want)
		}
	}

	if _, ok := p.MatchProbe(clusterview.ServiceRef{Namespace: "other", Name: "web"}, httptest.NewRequest("GET", "/healthz", nil)); ok {
		t.Error("a rule of team/web matched other/web")
	}
}

func TestRegexMustCompileWithoutAnchors(t *testing.T) {
	for _, v := range []string{"/healthz)|(?:.*", ").*(", "a)|(b"} {
		if _, err := newStringMatcher(v1.MatchRegularExpression, v, true, regexbudget.ForElastiService()); err == nil {
			t.Errorf("regular expression %q accepted; wrapped in anchors it matches more than it says", v)
		}
	}
	m, err := newStringMatcher(v1.MatchRegularExpression, "/a|/b", true, regexbudget.ForElastiService())
	if err != nil {
		t.Fatal(err)
	}
	if !m.match("/b") || m.match("/b/c") || m.match("x/a") {
		t.Error("a valid alternation is not anchored as a whole")
	}
}

func TestPathPrefixSemantics(t *testing.T) {
	cases := []struct {
		prefix, path string
		want         bool
	}{
		{"/", "/", true}, {"/", "/a/b", true},
		{"/api", "/api", true}, {"/api", "/api/", true}, {"/api", "/api/v1", true},
		{"/api", "/apis", false}, {"/api/", "/api", true}, {"/api/", "/api/x", true},
		{"/api", "/", false},
	}
	for _, c := range cases {
		m, err := newStringMatcher(v1.MatchPathPrefix, c.prefix, true, regexbudget.ForElastiService())
		if err != nil {
			t.Fatal(err)
		}
		if got := m.match(c.path); got != c.want {
			t.Errorf("PathPrefix %q on %q = %v, want %v", c.prefix, c.path, got, c.want)
		}
	}
	if _, err := newStringMatcher(v1.MatchPathPrefix, "/x", false, regexbudget.ForElastiService()); err == nil {
		t.Error("PathPrefix accepted for a header")
	}
}

func TestProbeCompiledOncePerGeneration(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	p := NewStaticIndex(ctx)
	rule := v1.ProbeResponseRule{Path: &v1.PathMatch{Type: v1.MatchRegularExpression, Value: "/h.*"}, Response: resolvertest.CannedAnswer(200, "a")}
	es := resolvertest.ElastiService("team", "es", "web", 3, rule)
	p.Upsert(es)
	first := p.bySvc[clusterview.ServiceRef{Namespace: "team", Name: "web"}][0]
	es2 := es.DeepCopy()
	es2.ResourceVersion = "99" // status-only change: same generation
	p.Upsert(es2)
	if p.bySvc[clusterview.ServiceRef{Namespace: "team", Name: "web"}][0] != first {
		t.Error("rules were recompiled for the same generation")
	}
	es3 := es.DeepCopy()
	es3.Generation = 4
	es3.Spec.ProbeResponse[0].Response.Body = "b"
	p.Upsert(es3)
	if a, _ := p.MatchProbe(clusterview.ServiceRef{Namespace: "team", Name: "web"}, httptest.NewRequest("GET", "/health", nil)); a.Body != "b" {
		t.Errorf("after a new generation got %q, want b", a.Body)
	}
	// Moving the ElastiService to another Service moves its rules.
	es4 := es3.DeepCopy()
	es4.Spec.Service = "api"
	p.Upsert(es4)
	if _, ok := p.MatchProbe(clusterview.ServiceRef{Namespace: "team", Name: "web"}, httptest.NewRequest("GET", "/health", nil)); ok {
		t.Error("rules stayed on the old Service")
	}
	if _, ok := p.MatchProbe(clusterview.ServiceRef{Namespace: "team", Name: "api"}, httptest.NewRequest("GET", "/health", nil)); !ok {
		t.Error("rules did not move to the new Service")
	}
	p.Delete("team", "es")
	if len(p.byName) != 0 || len(p.bySvc) != 0 {
		t.Errorf("index not empty after delete: %v %v", p.byName, p.bySvc)
	}
	// Bad status: the rule is invalid.
	p.Upsert(resolvertest.ElastiService("team", "bad", "web", 1, v1.ProbeResponseRule{Response: resolvertest.CannedAnswer(42, "x")}))
	if _, ok := p.MatchProbe(clusterview.ServiceRef{Namespace: "team", Name: "web"}, httptest.NewRequest("GET", "/", nil)); ok {
		t.Error("a rule with status 42 matched")
	}
}

func TestProbeIndexFromInformer(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rule := v1.ProbeResponseRule{Path: &v1.PathMatch{Type: v1.MatchExact, Value: "/healthz"}, Response: resolvertest.CannedAnswer(200, "ok")}
	client := elastifake.NewSimpleClientset(resolvertest.ElastiService("team", "es", "web", 1, rule))
	factory := elastiinformers.NewSharedInformerFactory(client, 0)
	p, err := NewIndex(ctx, factory.Elasti().V1alpha1().ElastiServices())
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	defer cancel()
	factory.WaitForCacheSync(ctx.Done())
	resolvertest.Eventually(t, 5*time.Second, "probe index synced", p.HasSynced)

	svc := clusterview.ServiceRef{Namespace: "team", Name: "web"}
	if a, ok := p.MatchProbe(svc, httptest.NewRequest("GET", "/healthz", nil)); !ok || a.Body != "ok" {
		t.Fatalf("initial rule: %+v %v", a, ok)
	}
	es, err := client.ElastiV1alpha1().ElastiServices("team").Get(ctx, "es", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	es.Generation = 2
	es.Spec.ProbeResponse[0].Response.Body = "updated"
	if _, err := client.ElastiV1alpha1().ElastiServices("team").Update(ctx, es, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	resolvertest.Eventually(t, 5*time.Second, "updated rule", func() bool {
		a, _ := p.MatchProbe(svc, httptest.NewRequest("GET", "/healthz", nil))
		return a.Body == "updated"
	})
	if err := client.ElastiV1alpha1().ElastiServices("team").Delete(ctx, "es", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	resolvertest.Eventually(t, 5*time.Second, "rule removal", func() bool {
		_, ok := p.MatchProbe(svc, httptest.NewRequest("GET", "/healthz", nil))
		return !ok
	})
	cancel()
	factory.Shutdown()
}

// TestProbeAnsweredForEveryFrontedService: during a move of spec.service
// the resolver still fronts the old Service (it keeps resolver ports in
// status), so a health check of the old one must be answered too, not
// wake the target; once the move completes, only the new one is.
func TestProbeAnsweredForEveryFrontedService(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	p := NewStaticIndex(ctx)
	rule := v1.ProbeResponseRule{Path: &v1.PathMatch{Type: v1.MatchExact, Value: "/healthz"}, Response: resolvertest.CannedAnswer(200, "ok")}
	es := resolvertest.ElastiService("team", "es", "web-v2", 1, rule)
	es.Status.ResolverPorts = []v1.ResolverPort{
		{Service: "web", Port: 80, ResolverPort: 20000},
		{Service: "web-v2", Port: 80, ResolverPort: 20001},
	}
	p.Upsert(es)
	probe := func(svc string) bool {
		_, ok := p.MatchProbe(clusterview.ServiceRef{Namespace: "team", Name: svc}, httptest.NewRequest("GET", "/healthz", nil))
		return ok
	}
	if !probe("web") || !probe("web-v2") {
		t.Fatalf("mid-move: old Service answered %v, new %v; want both", probe("web"), probe("web-v2"))
	}

	// The move completes: the old Service's ports are let go of. The
	// generation is unchanged, since only the status moved.
	done := es.DeepCopy()
	done.Status.ResolverPorts = done.Status.ResolverPorts[1:]
	key := types.NamespacedName{Namespace: "team", Name: "es"}
	compiled := &p.byName[key].rules[0]
	p.Upsert(done)
	if &p.byName[key].rules[0] != compiled {
		t.Error("a status-only change compiled the rules again")
	}
	if probe("web") || !probe("web-v2") {
		t.Fatalf("after the move: old Service answered %v, new %v; want only the new", probe("web"), probe("web-v2"))
	}

	p.Delete("team", "es")
	if probe("web-v2") {
		t.Fatal("a deleted ElastiService's rule still answers")
	}
}

// TestProbeOfAServiceAnsweredByItsOwnElastiService: mid-move, A still
// fronts its old Service "web", which B now names as spec.service. A probe
// of web gets B's answer, whatever the names' order.
func TestProbeOfAServiceAnsweredByItsOwnElastiService(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	p := NewStaticIndex(ctx)
	healthz := func(body string) v1.ProbeResponseRule {
		return v1.ProbeResponseRule{Path: &v1.PathMatch{Type: v1.MatchExact, Value: "/healthz"}, Response: resolvertest.CannedAnswer(200, body)}
	}
	moving := resolvertest.ElastiService("team", "a-moving", "web-v2", 1, healthz("from a"))
	moving.Status.ResolverPorts = []v1.ResolverPort{{Service: "web", Port: 80, ResolverPort: 20000}}
	p.Upsert(moving)
	p.Upsert(resolvertest.ElastiService("team", "b-owner", "web", 1, healthz("from b")))
	if a, ok := p.MatchProbe(clusterview.ServiceRef{Namespace: "team", Name: "web"}, httptest.NewRequest("GET", "/healthz", nil)); !ok || a.Body != "from b" {
		t.Errorf("probe of web answered %q (%v), want its own ElastiService's %q", a.Body, ok, "from b")
	}
	if a, _ := p.MatchProbe(clusterview.ServiceRef{Namespace: "team", Name: "web-v2"}, httptest.NewRequest("GET", "/healthz", nil)); a.Body != "from a" {
		t.Errorf("probe of web-v2 answered %q, want %q", a.Body, "from a")
	}
}

// Regular expressions too large to compile, all accepted by Go's regexp: a
// 3,000-character group repeated {1000} (about 120 MiB compiled; over the
// length bound too), a 1,000-character one (40 MiB), and a 100-character
// one within the length bound (4 MiB), and nested repeats.
var oversizedRegexps = []string{
	"(" + strings.Repeat("ab", 1500) + "){1000}",
	"(" + strings.Repeat("a", 1000) + "){1000}",
	"(" + strings.Repeat("a", 100) + "){1000}",
	`(((/{10}){10}){10})`,
	`((a{1000}){1000}){1000}`,
}

// An ElastiService whose rules hold regular expressions past the budget
// has them never compiled: indexing it costs what parsing them costs, and
// its other rules, and another namespace's ElastiService, are answered.
func TestOversizedRegexpIsNeverCompiled(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	p := NewStaticIndex(ctx)
	var rules []v1.ProbeResponseRule
	for _, re := range oversizedRegexps {
		rules = append(rules,
			v1.ProbeResponseRule{Path: &v1.PathMatch{Type: v1.MatchRegularExpression, Value: re}, Response: resolvertest.CannedAnswer(200, "path")},
			v1.ProbeResponseRule{Headers: []v1.NameValueMatch{{Name: "User-Agent", Type: v1.MatchRegularExpression, Value: re}}, Response: resolvertest.CannedAnswer(200, "header")})
	}
	rules = append(rules, v1.ProbeResponseRule{Path: &v1.PathMatch{Type: v1.MatchRegularExpression, Value: "/own-health(z)?"}, Response: resolvertest.CannedAnswer(200, "attacker's own")})
	attacker := resolvertest.ElastiService("attacker", "es", "web", 1, rules...)
	victim := resolvertest.ElastiService("victim", "es", "web", 1,
		v1.ProbeResponseRule{Path: &v1.PathMatch{Type: v1.MatchRegularExpression, Value: "^/health(z)?$"}, Response: resolvertest.CannedAnswer(200, "victim ok")})

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	p.Upsert(attacker)
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	// Compiling just one of them allocates over 100 MiB and takes seconds.
	if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 4<<20 || took > time.Second {
		t.Errorf("indexing the oversized rules allocated %d bytes in %s; they were compiled", allocated, took)
	}
	p.Upsert(victim)

	for _, c := range []struct {
		ns, path, ua string
		want         string // "" for no match
	}{
		{"victim", "/healthz", "", "victim ok"},
		{"victim", "/health", "kube-probe/1.36", "victim ok"},
		{"attacker", "/own-healthz", "", "attacker's own"},
		// Each would match one of the oversized rules, were it compiled.
		{"attacker", strings.Repeat("/", 1000), "", ""},
		{"attacker", "/x", strings.Repeat("a", 100*1000), ""},
		{"attacker", "/x", strings.Repeat("/", 1000), ""},
	} {
		req := httptest.NewRequest("GET", c.path, nil)
		if c.ua != "" {
			req.Header.Set("User-Agent", c.ua)
		}
		a, ok := p.MatchProbe(clusterview.ServiceRef{Namespace: c.ns, Name: "web"}, req)
		if got := a.Body; !ok && got != "" || ok != (c.want != "") || got != c.want {
			t.Errorf("%s %.20s (User-Agent %.20q): answered %q (%v), want %q", c.ns, c.path, c.ua, got, ok, c.want)
		}
	}
	p.mu.RLock()
	compiled := p.byName[types.NamespacedName{Namespace: "attacker", Name: "es"}].rules
	p.mu.RUnlock()
	for i, r := range compiled[:len(compiled)-1] {
		if !r.invalid || r.path != nil && r.path.re != nil {
			t.Errorf("rule %d: invalid %v, compiled path %v; want invalid and never compiled", i, r.invalid, r.path != nil && r.path.re != nil)
		}
	}
}

// The budget is per ElastiService: the regular expressions of one share
// it, in order, and another ElastiService has its own whole.
func TestRegexpBudgetIsPerElastiService(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	p := NewStaticIndex(ctx)
	// Each costs over half the budget: the first fits, the second not.
	n := v1.MaxProbeRegexpCost/2 + 1
	rule := func(c, body string) v1.ProbeResponseRule {
		return v1.ProbeResponseRule{Path: &v1.PathMatch{Type: v1.MatchRegularExpression, Value: "/" + c + "{" + strconv.Itoa(n) + "}"}, Response: resolvertest.CannedAnswer(200, body)}
	}
	for _, ns := range []string{"a", "b"} {
		p.Upsert(resolvertest.ElastiService(ns, "es", "web", 1, rule("x", "first"), rule("y", "second")))
	}
	for _, ns := range []string{"a", "b"} {
		if a, _ := p.MatchProbe(clusterview.ServiceRef{Namespace: ns, Name: "web"}, httptest.NewRequest("GET", "/"+strings.Repeat("x", n), nil)); a.Body != "first" {
			t.Errorf("%s: the first rule answered %q, want first", ns, a.Body)
		}
		if a, ok := p.MatchProbe(clusterview.ServiceRef{Namespace: ns, Name: "web"}, httptest.NewRequest("GET", "/"+strings.Repeat("y", n), nil)); ok {
			t.Errorf("%s: the second rule, past the budget, answered %q", ns, a.Body)
		}
	}
}
