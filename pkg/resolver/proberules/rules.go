package proberules

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"k8s.io/klog/v2"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/regexbudget"
)

// compiledRule is a ProbeResponseRule with its regular expressions
// compiled. An invalid rule never matches.
type compiledRule struct {
	invalid bool
	method  string
	path    *stringMatcher
	headers []nameMatcher
	query   []nameMatcher
	answer  Answer
}

type stringMatcher struct {
	kind  string // Exact, PathPrefix or RegularExpression
	value string
	re    *regexp.Regexp
}

type nameMatcher struct {
	name string
	stringMatcher
}

// compileRules compiles an ElastiService's rules. Their regular
// expressions share one budget (pkg/regexbudget), measured before each is
// compiled: a rule whose expression does not fit is never compiled and never
// matches, and the rules before and after it, and other ElastiServices', are
// served as usual. The operator refuses such a spec (InvalidSpec), but an
// older CRD lets it reach the resolver anyway.
func compileRules(logger klog.Logger, rules []elastiv1alpha1.ProbeResponseRule) []compiledRule {
	out := make([]compiledRule, len(rules))
	budget := regexbudget.ForElastiService()
	for i, r := range rules {
		c, err := compileRule(r, budget)
		if err != nil {
			// Logged once per generation: rules are only compiled when the
			// generation changes (see Upsert).
			logger.Error(err, "probeResponse rule is invalid and will never match", "rule", i)
			c = compiledRule{invalid: true}
		}
		out[i] = c
	}
	return out
}

func compileRule(r elastiv1alpha1.ProbeResponseRule, budget *regexbudget.Budget) (compiledRule, error) {
	c := compiledRule{method: strings.TrimSpace(r.Method)}
	status := int(r.Response.Status)
	if status == 0 {
		status = http.StatusOK
	}
	if status < elastiv1alpha1.MinProbeStatus || status > elastiv1alpha1.MaxProbeStatus {
		return c, fmt.Errorf("response status %d is not in %d-%d", r.Response.Status, elastiv1alpha1.MinProbeStatus, elastiv1alpha1.MaxProbeStatus)
	}
	c.answer = Answer{Status: status, Body: r.Response.Body}
	if r.Path != nil {
		kind := r.Path.Type
		if kind == "" {
			kind = elastiv1alpha1.MatchPathPrefix
		}
		m, err := newStringMatcher(kind, r.Path.Value, true, budget)
		if err != nil {
			return c, fmt.Errorf("path: %w", err)
		}
		c.path = &m
	}
	for _, h := range r.Headers {
		m, err := newStringMatcher(h.Type, h.Value, false, budget)
		if err != nil {
			return c, fmt.Errorf("header %q: %w", h.Name, err)
		}
		c.headers = append(c.headers, nameMatcher{name: http.CanonicalHeaderKey(h.Name), stringMatcher: m})
	}
	for _, q := range r.QueryParams {
		m, err := newStringMatcher(q.Type, q.Value, false, budget)
		if err != nil {
			return c, fmt.Errorf("query parameter %q: %w", q.Name, err)
		}
		c.query = append(c.query, nameMatcher{name: q.Name, stringMatcher: m})
	}
	return c, nil
}

// newStringMatcher compiles one match. A regular expression must match the
// whole value, as in the Gateway API, and is charged to budget first. An
// empty type means Exact.
func newStringMatcher(kind, value string, isPath bool, budget *regexbudget.Budget) (stringMatcher, error) {
	if kind == "" {
		kind = elastiv1alpha1.MatchExact
	}
	m := stringMatcher{kind: kind, value: value}
	switch kind {
	case elastiv1alpha1.MatchExact:
	case elastiv1alpha1.MatchPathPrefix:
		if !isPath {
			return m, fmt.Errorf("match type %s is only valid for paths", kind)
		}
		m.value = strings.TrimRight(value, "/")
	case elastiv1alpha1.MatchRegularExpression:
		// Charge parses the value on its own, before anything is
		// compiled: a value too large for what is left of the budget is
		// never compiled, and an unbalanced value such as
		// "/healthz)|(?:.*", which would close the anchoring group and
		// match everything, does not parse. A value that parses alone has
		// balanced groups, so the wrapped form anchors all of it. The
		// error never repeats the value: it may be a kilobyte.
		if err := budget.Charge(value); err != nil {
			return m, fmt.Errorf("regular expression: %w", err)
		}
		re, err := regexp.Compile("^(?:" + value + ")$")
		if err != nil {
			return m, fmt.Errorf("regular expression: %w", err)
		}
		m.re = re
	default:
		return m, fmt.Errorf("unknown match type %q", kind)
	}
	return m, nil
}

func (m *stringMatcher) match(s string) bool {
	switch m.kind {
	case elastiv1alpha1.MatchExact:
		return s == m.value
	case elastiv1alpha1.MatchPathPrefix:
		// Element-wise, as in the Gateway API: /api matches /api and
		// /api/x, not /apix. A value of "/" matches every path.
		if !strings.HasPrefix(s, m.value) {
			return false
		}
		rest := s[len(m.value):]
		return rest == "" || rest[0] == '/' || m.value == ""
	case elastiv1alpha1.MatchRegularExpression:
		// A longer value is not read (see regexbudget.MaxInput); callers
		// with several values share the bound (anyMatches).
		return len(s) <= regexbudget.MaxInput && m.re.MatchString(s)
	}
	return false
}

func (r *compiledRule) matches(req *http.Request, query map[string][]string) bool {
	if r.method != "" && !strings.EqualFold(r.method, req.Method) {
		return false
	}
	if r.path != nil {
		path := req.URL.Path
		if path == "" {
			path = "/"
		}
		if !r.path.match(path) {
			return false
		}
	}
	for i := range r.headers {
		values := req.Header.Values(r.headers[i].name)
		if r.headers[i].name == "Host" {
			values = []string{req.Host}
		}
		if !anyMatches(&r.headers[i].stringMatcher, values) {
			return false
		}
	}
	for i := range r.query {
		if !anyMatches(&r.query[i].stringMatcher, query[r.query[i].name]) {
			return false
		}
	}
	return true
}

// anyMatches: a header or parameter given several times matches if one of
// its values does; an absent one never matches. A regular expression reads
// at most regexbudget.MaxInput bytes over all the values, so a header
// repeated many times costs no more than one long value: a value that does
// not fit in what is left is not read, and does not match.
func anyMatches(m *stringMatcher, values []string) bool {
	left := regexbudget.MaxInput
	for _, v := range values {
		if m.re != nil {
			if len(v) > left {
				continue
			}
			left -= len(v)
		}
		if m.match(v) {
			return true
		}
	}
	return false
}
