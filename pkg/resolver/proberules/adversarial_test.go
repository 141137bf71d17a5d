package proberules

import (
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"

	v1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/regexbudget"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
	"github.com/elasti-dev/elasti/pkg/resolver/internal/resolvertest"
)

// worstRegexp is the costliest expression the budget allows that we know
// of: every ".*" keeps a thread alive on every byte, 60 times over.
const worstRegexp = `(?s:.*a){60}`

// The attacker owns a sleeping Service's ElastiService and sends its own
// requests: a probe rule's regular expression reads at most
// regexbudget.MaxInput bytes of one condition's values, whatever the
// request carries, in a path, a header, a header repeated, a query
// parameter or the Host. A value that does not fit is not read and does
// not match: the request is held and wakes, as one no rule names.
func TestProbeRegexpReadsAtMostMaxInput(t *testing.T) {
	ctx := klog.NewContext(t.Context(), logr.Discard())
	p := NewStaticIndex(ctx)
	p.Upsert(resolvertest.ElastiService("team", "es", "web", 1,
		v1.ProbeResponseRule{Path: &v1.PathMatch{Type: v1.MatchRegularExpression, Value: "/a*"}, Response: resolvertest.CannedAnswer(200, "path")},
		v1.ProbeResponseRule{Headers: []v1.NameValueMatch{{Name: "X-Probe", Type: v1.MatchRegularExpression, Value: "b*"}}, Response: resolvertest.CannedAnswer(200, "header")},
		v1.ProbeResponseRule{QueryParams: []v1.NameValueMatch{{Name: "q", Type: v1.MatchRegularExpression, Value: "c*"}}, Response: resolvertest.CannedAnswer(200, "query")},
		v1.ProbeResponseRule{Headers: []v1.NameValueMatch{{Name: "Host", Type: v1.MatchRegularExpression, Value: "d*[.]team"}}, Response: resolvertest.CannedAnswer(200, "host")},
	))
	svc := clusterview.ServiceRef{Namespace: "team", Name: "web"}
	const n = regexbudget.MaxInput
	match := func(target string, headers map[string][]string, host string) string {
		req := httptest.NewRequest("GET", target, nil)
		if host != "" {
			req.Host = host
		}
		for k, vs := range headers {
			for _, v := range vs {
				req.Header.Add(k, v)
			}
		}
		a, ok := p.MatchProbe(svc, req)
		if !ok {
			return ""
		}
		return a.Body
	}
	for _, tc := range []struct {
		name    string
		target  string
		headers map[string][]string
		host    string
		want    string
	}{
		{"path at the bound", "/" + strings.Repeat("a", n-1), nil, "", "path"},
		{"path one past", "/" + strings.Repeat("a", n), nil, "", ""},
		// The path is read decoded: %61 is one byte of the value.
		{"percent-encoded path one past", "/" + strings.Repeat("%61", n), nil, "", ""},
		{"percent-encoded path at the bound", "/" + strings.Repeat("%61", n-1), nil, "", "path"},
		{"header at the bound", "/x", map[string][]string{"X-Probe": {strings.Repeat("b", n)}}, "", "header"},
		{"header one past", "/x", map[string][]string{"X-Probe": {strings.Repeat("b", n+1)}}, "", ""},
		{"header name in another case", "/x", map[string][]string{"x-pROBE": {strings.Repeat("b", n)}}, "", "header"},
		// Values of one header share the bound: two of half fit, a
		// third does not get read.
		{"repeated header within the bound", "/x", map[string][]string{"X-Probe": {strings.Repeat("b", n/2) + "z", strings.Repeat("b", n/2-1)}}, "", "header"},
		{"repeated header past the bound", "/x", map[string][]string{"X-Probe": {strings.Repeat("b", n/2) + "z", strings.Repeat("b", n/2)}}, "", ""},
		// A long value is skipped, not the rest: a short value after it
		// that fits is read.
		{"long value then a short one", "/x", map[string][]string{"X-Probe": {strings.Repeat("b", 64<<10), "bb"}}, "", "header"},
		{"query at the bound", "/x?q=" + strings.Repeat("c", n), nil, "", "query"},
		{"query one past", "/x?q=" + strings.Repeat("c", n+1), nil, "", ""},
		{"query percent-encoded one past", "/x?q=" + strings.Repeat("%63", n+1), nil, "", ""},
		{"host at the bound", "/x", nil, strings.Repeat("d", n-len(".team")) + ".team", "host"},
		{"host one past", "/x", nil, strings.Repeat("d", n+1-len(".team")) + ".team", ""},
	} {
		if got := match(tc.target, tc.headers, tc.host); got != tc.want {
			t.Errorf("%s: answered by rule %q, want %q", tc.name, got, tc.want)
		}
	}
}

// However the attacker repeats a header, the worst expression the budget
// allows costs one bounded read per request, not one per value.
func TestWorstRegexpCostIsBoundedPerRequest(t *testing.T) {
	if err := regexbudget.ForElastiService().Charge(worstRegexp); err != nil {
		t.Fatalf("the worst expression does not fit the budget: %v", err)
	}
	ctx := klog.NewContext(t.Context(), logr.Discard())
	p := NewStaticIndex(ctx)
	p.Upsert(resolvertest.ElastiService("team", "es", "web", 1, v1.ProbeResponseRule{
		Headers:  []v1.NameValueMatch{{Name: "X-Probe", Type: v1.MatchRegularExpression, Value: worstRegexp}},
		Response: resolvertest.CannedAnswer(200, "never"),
	}))
	// 128 values of MaxInput bytes ("a" everywhere, so every thread stays
	// alive), the 64 KiB a request's headers may hold.
	req := httptest.NewRequest("GET", "/", nil)
	for range (64 << 10) / regexbudget.MaxInput {
		req.Header.Add("X-Probe", strings.Repeat("a", regexbudget.MaxInput-1)+"b")
	}
	capped := timeMatch(t, func() { p.MatchProbe(clusterview.ServiceRef{Namespace: "team", Name: "web"}, req) })
	one := regexp.MustCompile("^(?:" + worstRegexp + ")$")
	value := strings.Repeat("a", regexbudget.MaxInput-1) + "b"
	single := timeMatch(t, func() { one.MatchString(value) })
	// Reading all 128 values would cost 128 single reads; the bound
	// allows one. 8 leaves room for a loaded machine.
	if capped > 8*single {
		t.Errorf("128 values of one header took %v, one value %v: the bound is per value, not per request", capped, single)
	}
}

// timeMatch returns the fastest of a few runs of f.
func timeMatch(t *testing.T, f func()) time.Duration {
	t.Helper()
	best := time.Duration(1<<63 - 1)
	for range 5 {
		start := time.Now()
		f()
		best = min(best, time.Since(start))
	}
	return best
}

// BenchmarkWorstCaseRegexp measures the costliest expression the budget
// allows on what it may read of a request, regexbudget.MaxInput bytes,
// beside what it cost on the 64 KiB a header may carry before the bound,
// and through the matcher on a request whose 64 KiB of headers are all
// values of the matched header.
func BenchmarkWorstCaseRegexp(b *testing.B) {
	re := regexp.MustCompile("^(?:" + worstRegexp + ")$")
	for _, size := range []struct {
		name string
		n    int
	}{{"uncapped-64KiB", 64 << 10}, {"capped-MaxInput", regexbudget.MaxInput}} {
		in := strings.Repeat("a", size.n-1) + "b"
		b.Run(size.name, func(b *testing.B) {
			for b.Loop() {
				re.MatchString(in)
			}
		})
	}
	// Through the matcher: one read of MaxInput bytes.
	ctx := klog.NewContext(b.Context(), logr.Discard())
	p := NewStaticIndex(ctx)
	p.Upsert(resolvertest.ElastiService("team", "es", "web", 1, v1.ProbeResponseRule{
		Headers:     []v1.NameValueMatch{{Name: "X-Probe", Type: v1.MatchRegularExpression, Value: worstRegexp}},
		QueryParams: []v1.NameValueMatch{{Name: "q", Type: v1.MatchExact, Value: "x"}},
		Response:    resolvertest.CannedAnswer(200, "never"),
	}))
	req := httptest.NewRequest("GET", "/?q="+url.QueryEscape("x"), nil)
	for range (64 << 10) / regexbudget.MaxInput {
		req.Header.Add("X-Probe", strings.Repeat("a", regexbudget.MaxInput-1)+"b")
	}
	b.Run("request-64KiB-of-values", func(b *testing.B) {
		for b.Loop() {
			p.MatchProbe(clusterview.ServiceRef{Namespace: "team", Name: "web"}, req)
		}
	})
}
