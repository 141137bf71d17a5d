package triggers

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// request is what a fake Prometheus saw.
type request struct {
	Method, Path, Query, RawQuery, Host string
	Header                              http.Header
}

// fakeProm is a Prometheus HTTP API stand-in on 127.0.0.1. answer maps the
// PromQL of each request to a status code and body.
type fakeProm struct {
	*httptest.Server
	mu       sync.Mutex
	requests []request
}

func newFakeProm(t *testing.T, answer func(promql string) (int, string)) *fakeProm {
	t.Helper()
	f := &fakeProm{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.requests = append(f.requests, request{
			Method: r.Method, Path: r.URL.Path, Query: r.URL.Query().Get("query"),
			RawQuery: r.URL.RawQuery, Host: r.Host, Header: r.Header.Clone(),
		})
		f.mu.Unlock()
		status, body := answer(r.URL.Query().Get("query"))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeProm) seen() []request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]request(nil), f.requests...)
}

func (f *fakeProm) queries() []string {
	var qs []string
	for _, r := range f.seen() {
		qs = append(qs, r.Query)
	}
	return qs
}

// closedServerURL is a loopback address where nothing listens any more.
func closedServerURL(t *testing.T) string {
	t.Helper()
	s := httptest.NewServer(http.NotFoundHandler())
	u := s.URL
	s.Close()
	return u
}

func vector(values ...string) string {
	var series []string
	for i, v := range values {
		series = append(series, fmt.Sprintf(`{"metric":{"pod":"p%d"},"value":[1718461391.781,%s]}`, i, v))
	}
	return `{"status":"success","data":{"resultType":"vector","result":[` + strings.Join(series, ",") + `]}}`
}

func always(status int, body string) func(string) (int, string) {
	return func(string) (int, string) { return status, body }
}

func testClient() *Client {
	return &Client{Timeout: 2 * time.Second}
}

func TestQueryValues(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   float64
	}{
		{"vector", 200, vector(`"0.25"`), 0.25},
		{"vector zero", 200, vector(`"0"`), 0},
		{"vector negative exponent", 200, vector(`"-1.5e-3"`), -0.0015},
		{"vector without labels", 200, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"7"]}]}}`, 7},
		{"scalar", 200, `{"status":"success","data":{"resultType":"scalar","result":[1718461391.781,"42"]}}`, 42},
		{"value as a bare number", 200, vector(`3`), 3},
		{"warnings are fine", 200, `{"status":"success","warnings":["w"],"data":{"resultType":"scalar","result":[1,"1"]}}`, 1},
		{"any 2xx", 203, vector(`"5"`), 5},
		{"tiny value underflows to zero", 200, vector(`"1e-400"`), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeProm(t, always(tt.status, tt.body))
			got, err := testClient().Query(t.Context(), Prometheus{ServerAddress: f.URL}, "q")
			if err != nil {
				t.Fatalf("Query: %v", err)
			}
			if got != tt.want {
				t.Errorf("Query = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestQueryErrors(t *testing.T) {
	tests := []struct {
		name     string
		status   int
		body     string
		reason   Reason
		contains []string
	}{
		{"500 with body", 500, "boom: storage unavailable", ReasonBadStatus, []string{"500 Internal Server Error", "not a Prometheus API error"}},
		{"503 empty", 503, "", ReasonBadStatus, []string{"503", "empty body"}},
		{"400 API error", 400, `{"status":"error","errorType":"bad_data","error":"1:5: parse error: unexpected \")\""}`, ReasonBadStatus, []string{"400 Bad Request", "(bad_data): the query is not valid PromQL"}},
		{"422 API error", 422, `{"status":"error","errorType":"execution","error":"many-to-many matching not allowed"}`, ReasonBadStatus, []string{"422", "(execution): many-to-many matching"}},
		{"404 html", 404, "<html>not found</html>", ReasonBadStatus, []string{"404 Not Found", "not a Prometheus API error"}},
		{"status error", 200, `{"status":"error","errorType":"timeout","error":"query timed out in expression evaluation"}`, ReasonQueryFailed, []string{"(timeout): the query timed out on the server"}},
		{"status error without details", 200, `{"status":"error"}`, ReasonQueryFailed, []string{"no error given"}},
		{"unknown status", 200, `{"status":"partial","data":{"resultType":"scalar","result":[1,"1"]}}`, ReasonBadResponse, []string{`status "partial"`}},
		{"no status", 200, `{}`, ReasonBadResponse, []string{`status ""`}},
		{"garbage", 200, `<html>hello</html>`, ReasonBadResponse, []string{"not Prometheus API JSON"}},
		{"truncated JSON", 200, vector(`"1"`)[:40], ReasonBadResponse, []string{"not Prometheus API JSON"}},
		{"empty body", 200, ``, ReasonBadResponse, []string{"not Prometheus API JSON"}},
		{"no data", 200, `{"status":"success"}`, ReasonBadResponse, []string{"no data"}},
		{"empty result", 200, vector(), ReasonEmptyResult, []string{"no series"}},
		{"null result", 200, `{"status":"success","data":{"resultType":"vector","result":null}}`, ReasonEmptyResult, []string{"no series"}},
		{"two series", 200, vector(`"1"`, `"2"`), ReasonMultipleSeries, []string{"2 series"}},
		{"NaN", 200, vector(`"NaN"`), ReasonNotFinite, []string{`"NaN" is not finite`}},
		{"+Inf", 200, vector(`"+Inf"`), ReasonNotFinite, []string{`"+Inf"`}},
		{"-Inf", 200, vector(`"-Inf"`), ReasonNotFinite, []string{`"-Inf"`}},
		{"overflow", 200, vector(`"1e999"`), ReasonNotFinite, []string{`"1e999"`}},
		{"scalar NaN", 200, `{"status":"success","data":{"resultType":"scalar","result":[1,"NaN"]}}`, ReasonNotFinite, nil},
		{"value not a number", 200, vector(`"lots"`), ReasonBadResponse, []string{`"lots" is not a number`}},
		{"value empty", 200, vector(`""`), ReasonBadResponse, []string{`"" is not a number`}},
		{"value null", 200, vector(`null`), ReasonBadResponse, []string{"not a number"}},
		{"value bool", 200, vector(`true`), ReasonBadResponse, []string{"neither a string nor a number"}},
		{"sample too short", 200, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1]}]}}`, ReasonBadResponse, []string{"[timestamp, value] pair"}},
		{"sample missing", 200, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{}}]}}`, ReasonBadResponse, []string{"[timestamp, value] pair"}},
		{"timestamp not a number", 200, `{"status":"success","data":{"resultType":"scalar","result":["x","1"]}}`, ReasonBadResponse, []string{"timestamp"}},
		{"timestamp null", 200, `{"status":"success","data":{"resultType":"scalar","result":[null,"1"]}}`, ReasonBadResponse, []string{"timestamp"}},
		{"matrix", 200, `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"1"]]}]}}`, ReasonBadResponse, []string{`"matrix" is not supported`}},
		{"string", 200, `{"status":"success","data":{"resultType":"string","result":[1,"x"]}}`, ReasonBadResponse, []string{`"string" is not supported`}},
		{"vector result not a list", 200, `{"status":"success","data":{"resultType":"vector","result":{"a":1}}}`, ReasonBadResponse, []string{"vector result is malformed"}},
		{"too large", 200, `{"status":"success","data":{"resultType":"vector","result":[` + strings.Repeat(" ", maxResponseBytes) + `]}}`, ReasonBadResponse, []string{"more than 1048576 bytes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeProm(t, always(tt.status, tt.body))
			// The default server, or one in the allow-list: its error
			// text is classified, not quoted (TestQueryQuotesNoTextOfOtherServers
			// has the others).
			got, err := testClient().Query(t.Context(), Prometheus{ServerAddress: f.URL, Trusted: true}, "q")
			if err == nil {
				t.Fatalf("Query = %v, want an error with reason %s", got, tt.reason)
			}
			if got != 0 {
				t.Errorf("failed Query returned %v, want 0", got)
			}
			if r := ReasonOf(err); r != tt.reason {
				t.Errorf("ReasonOf(%v) = %q, want %q", err, r, tt.reason)
			}
			for _, s := range tt.contains {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
			if !strings.Contains(err.Error(), f.URL) {
				t.Errorf("error %q does not name the server %s", err, f.URL)
			}
		})
	}
}

func TestQueryDoesNotQuoteLongErrorBodies(t *testing.T) {
	body := "<html>" + strings.Repeat("x", 10000) + "</html>"
	f := newFakeProm(t, always(502, body))
	_, err := testClient().Query(t.Context(), Prometheus{ServerAddress: f.URL, Trusted: true}, "q")
	if ReasonOf(err) != ReasonBadStatus {
		t.Fatalf("err = %v, want BadStatus", err)
	}
	if msg := err.Error(); len(msg) > 512 || !strings.Contains(msg, "502") || strings.Contains(msg, "xxx") {
		t.Errorf("error is not a short summary without the body (%d bytes): %.600s", len(msg), msg)
	}
	longAPIError := `{"status":"error","errorType":"bad_data","error":"` + strings.Repeat("y", 5000) + ` parse error"}`
	f = newFakeProm(t, always(400, longAPIError))
	_, err = testClient().Query(t.Context(), Prometheus{ServerAddress: f.URL, Trusted: true}, "q")
	if msg := err.Error(); len(msg) > 512 || !strings.Contains(msg, "(bad_data)") || strings.Contains(msg, "yyy") {
		t.Errorf("API error is not a short summary without the text (%d bytes): %.600s", len(msg), msg)
	}
}

func TestQueryTransportErrors(t *testing.T) {
	t.Run("closed server", func(t *testing.T) {
		addr := closedServerURL(t)
		got, err := testClient().Query(t.Context(), Prometheus{ServerAddress: addr}, "q")
		if got != 0 || ReasonOf(err) != ReasonUnreachable {
			t.Fatalf("Query = %v, %v; want 0 and an Unreachable error", got, err)
		}
		if !strings.Contains(err.Error(), "unreachable") || !strings.Contains(err.Error(), addr) {
			t.Errorf("error %q does not say which server is unreachable", err)
		}
	})

	// slow answers only after the client has given up; it returns as soon
	// as the client goes away so the server closes promptly.
	slow := func(t *testing.T) *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(2 * time.Second):
			}
			_, _ = w.Write([]byte(vector(`"0"`)))
		}))
		t.Cleanup(s.Close)
		return s
	}

	t.Run("client timeout", func(t *testing.T) {
		s := slow(t)
		start := time.Now()
		got, err := (&Client{Timeout: 50 * time.Millisecond}).Query(t.Context(), Prometheus{ServerAddress: s.URL}, "q")
		if got != 0 || ReasonOf(err) != ReasonTimeout {
			t.Fatalf("Query = %v, %v; want 0 and a Timeout error", got, err)
		}
		if !strings.Contains(err.Error(), "did not answer within 50ms") {
			t.Errorf("error %q does not give the timeout", err)
		}
		if elapsed := time.Since(start); elapsed > time.Second {
			t.Errorf("timed out after %v, want about 50ms", elapsed)
		}
	})

	t.Run("http.Client timeout", func(t *testing.T) {
		s := slow(t)
		c := &Client{HTTP: &http.Client{Timeout: 50 * time.Millisecond}, Timeout: time.Minute}
		if _, err := c.Query(t.Context(), Prometheus{ServerAddress: s.URL}, "q"); ReasonOf(err) != ReasonTimeout {
			t.Fatalf("err = %v, want a Timeout error", err)
		}
	})

	t.Run("caller deadline", func(t *testing.T) {
		s := slow(t)
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		if _, err := (&Client{Timeout: time.Minute}).Query(ctx, Prometheus{ServerAddress: s.URL}, "q"); ReasonOf(err) != ReasonTimeout {
			t.Fatalf("err = %v, want a Timeout error", err)
		}
	})

	t.Run("caller cancels", func(t *testing.T) {
		s := slow(t)
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(50*time.Millisecond, cancel)
		if _, err := testClient().Query(ctx, Prometheus{ServerAddress: s.URL}, "q"); ReasonOf(err) != ReasonCanceled {
			t.Fatalf("err = %v, want a Canceled error", err)
		}
	})

	t.Run("already canceled", func(t *testing.T) {
		f := newFakeProm(t, always(200, vector(`"1"`)))
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := testClient().Query(ctx, Prometheus{ServerAddress: f.URL}, "q"); ReasonOf(err) != ReasonCanceled {
			t.Fatalf("err = %v, want a Canceled error", err)
		}
		if n := len(f.seen()); n != 0 {
			t.Errorf("sent %d requests after cancellation", n)
		}
	})

	for _, addr := range []string{"", "127.0.0.1:9090", "ftp://127.0.0.1", "http://[::1"} {
		t.Run("bad address "+addr, func(t *testing.T) {
			if _, err := testClient().Query(t.Context(), Prometheus{ServerAddress: addr}, "q"); ReasonOf(err) != ReasonInvalidMetadata {
				t.Fatalf("err = %v, want InvalidMetadata", err)
			}
		})
	}
}

func TestQueryRequest(t *testing.T) {
	f := newFakeProm(t, always(200, vector(`"1"`)))
	// Characters that mean something in a URL or in form encoding.
	promql := `sum(rate(http_requests_total{service="a b",code=~"5..|4.."}[1m])) + 1 / on() count(x{y!="&z=1#frag%20?"})`
	p := Prometheus{
		ServerAddress: f.URL + "/prometheus/?tenant=team-a",
		Headers: map[string]string{
			"Authorization": "Bearer t0ken",
			"X-Scope-OrgID": "team-a",
			"Host":          "prometheus.internal",
		},
	}
	if _, err := testClient().Query(t.Context(), p, promql); err != nil {
		t.Fatalf("Query: %v", err)
	}
	reqs := f.seen()
	if len(reqs) != 1 {
		t.Fatalf("got %d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Method != http.MethodGet {
		t.Errorf("method = %s, want GET", r.Method)
	}
	if r.Path != "/prometheus/api/v1/query" {
		t.Errorf("path = %q, want /prometheus/api/v1/query", r.Path)
	}
	if r.Query != promql {
		t.Errorf("query reached the server as\n %q\nwant\n %q", r.Query, promql)
	}
	if !strings.Contains(r.RawQuery, "tenant=team-a") {
		t.Errorf("raw query %q lost the address's own parameter", r.RawQuery)
	}
	for _, c := range []string{"#", `"`, " ", "{"} {
		if strings.Contains(r.RawQuery, c) {
			t.Errorf("raw query %q has an unescaped %q", r.RawQuery, c)
		}
	}
	for name, want := range map[string]string{"Authorization": "Bearer t0ken", "X-Scope-Orgid": "team-a", "Accept": "application/json"} {
		if got := r.Header.Get(name); got != want {
			t.Errorf("header %s = %q, want %q", name, got, want)
		}
	}
	if r.Host != "prometheus.internal" {
		t.Errorf("Host = %q, want prometheus.internal", r.Host)
	}
}

func TestQueryAddressForms(t *testing.T) {
	f := newFakeProm(t, always(200, vector(`"1"`)))
	for _, tt := range []struct{ addr, path string }{
		{f.URL, "/api/v1/query"},
		{f.URL + "/", "/api/v1/query"},
		{f.URL + "/prom", "/prom/api/v1/query"},
		{f.URL + "/prom//", "/prom/api/v1/query"},
		{f.URL + "#fragment", "/api/v1/query"},
	} {
		if _, err := testClient().Query(t.Context(), Prometheus{ServerAddress: tt.addr}, "up"); err != nil {
			t.Fatalf("Query(%s): %v", tt.addr, err)
		}
		reqs := f.seen()
		if got := reqs[len(reqs)-1].Path; got != tt.path {
			t.Errorf("address %s: path = %q, want %q", tt.addr, got, tt.path)
		}
	}
}

func TestZeroClient(t *testing.T) {
	f := newFakeProm(t, always(200, vector(`"4"`)))
	var zero Client
	if v, err := zero.Query(t.Context(), Prometheus{ServerAddress: f.URL}, "q"); err != nil || v != 4 {
		t.Errorf("zero Client: Query = %v, %v", v, err)
	}
	var nilClient *Client
	if v, err := nilClient.Query(t.Context(), Prometheus{ServerAddress: f.URL}, "q"); err != nil || v != 4 {
		t.Errorf("nil Client: Query = %v, %v", v, err)
	}
}

func TestUptimeQuery(t *testing.T) {
	tests := []struct {
		filter string
		window time.Duration
		want   string
	}{
		{"", 15 * time.Minute, `min_over_time((max(up{container="prometheus"}) or vector(0))[900s:])`},
		{DefaultUptimeFilter, 900 * time.Second, `min_over_time((max(up{container="prometheus"}) or vector(0))[900s:])`},
		{`job="prometheus",namespace="monitoring"`, 90 * time.Second, `min_over_time((max(up{job="prometheus",namespace="monitoring"}) or vector(0))[90s:])`},
		{"", 0, `min_over_time((max(up{container="prometheus"}) or vector(0))[1s:])`},
		{"", -time.Hour, `min_over_time((max(up{container="prometheus"}) or vector(0))[1s:])`},
		{"", 1500 * time.Millisecond, `min_over_time((max(up{container="prometheus"}) or vector(0))[2s:])`},
		{"", 7 * 24 * time.Hour, `min_over_time((max(up{container="prometheus"}) or vector(0))[604800s:])`},
	}
	for _, tt := range tests {
		if got := UptimeQuery(tt.filter, tt.window); got != tt.want {
			t.Errorf("UptimeQuery(%q, %v)\n got %s\nwant %s", tt.filter, tt.window, got, tt.want)
		}
	}
}

func TestHealthy(t *testing.T) {
	tests := []struct {
		name   string
		filter string
		body   string
		want   bool
		query  string
	}{
		{"up", "", vector(`"1"`), true, `min_over_time((max(up{container="prometheus"}) or vector(0))[900s:])`},
		{"down", "", vector(`"0"`), false, `min_over_time((max(up{container="prometheus"}) or vector(0))[900s:])`},
		{"flapping", "", vector(`"0.5"`), false, ""},
		{"custom filter", `job="prom"`, vector(`"1"`), true, `min_over_time((max(up{job="prom"}) or vector(0))[900s:])`},
		{"scalar", "", `{"status":"success","data":{"resultType":"scalar","result":[1,"1"]}}`, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeProm(t, always(200, tt.body))
			got, err := testClient().Healthy(t.Context(), Prometheus{ServerAddress: f.URL, UptimeFilter: tt.filter}, 15*time.Minute)
			if err != nil {
				t.Fatalf("Healthy: %v", err)
			}
			if got != tt.want {
				t.Errorf("Healthy = %v, want %v", got, tt.want)
			}
			if q := f.queries(); tt.query != "" && (len(q) != 1 || q[0] != tt.query) {
				t.Errorf("queries = %q, want [%q]", q, tt.query)
			}
		})
	}

	t.Run("errors pass through", func(t *testing.T) {
		got, err := testClient().Healthy(t.Context(), Prometheus{ServerAddress: closedServerURL(t)}, time.Minute)
		if got || ReasonOf(err) != ReasonUnreachable {
			t.Errorf("Healthy = %v, %v; want false and an Unreachable error", got, err)
		}
		f := newFakeProm(t, always(200, vector()))
		got, err = testClient().Healthy(t.Context(), Prometheus{ServerAddress: f.URL}, time.Minute)
		if got || ReasonOf(err) != ReasonEmptyResult {
			t.Errorf("Healthy = %v, %v; want false and an EmptyResult error", got, err)
		}
	})
}

func FuzzDecodeQueryResponse(f *testing.F) {
	for _, s := range []string{
		vector(`"1"`), vector(), vector(`"1"`, `"2"`), vector(`"NaN"`), vector(`"+Inf"`), vector(`2`), vector(`null`),
		`{"status":"success","data":{"resultType":"scalar","result":[1,"42"]}}`,
		`{"status":"success","data":{"resultType":"scalar","result":null}}`,
		`{"status":"success","data":{"resultType":"matrix","result":[]}}`,
		`{"status":"success","data":null}`,
		`{"status":"error","errorType":"bad_data","error":"x"}`,
		`{}`, `[]`, `null`, ``, `{"status":"success","data":{"resultType":"vector","result":[{"value":[1]}]}}`,
	} {
		f.Add([]byte(s))
	}
	known := map[Reason]bool{
		ReasonBadResponse: true, ReasonQueryFailed: true, ReasonEmptyResult: true,
		ReasonMultipleSeries: true, ReasonNotFinite: true,
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		v, err := decodeQueryResponse(body, true)
		if err != nil {
			if v != 0 {
				t.Fatalf("error %v came with value %v", err, v)
			}
			if !known[ReasonOf(err)] {
				t.Fatalf("error %v has reason %q", err, ReasonOf(err))
			}
		} else if math.IsNaN(v) || math.IsInf(v, 0) {
			t.Fatalf("decoded non-finite value %v from %q", v, body)
		}
		// Another server's answer decodes alike, and its error is one of
		// a few fixed texts: no room for anything the body said.
		uv, uerr := decodeQueryResponse(body, false)
		if (err == nil) != (uerr == nil) || ReasonOf(err) != ReasonOf(uerr) || v != uv && !math.IsNaN(v) {
			t.Fatalf("untrusted decode = %v, %v; trusted = %v, %v", uv, uerr, v, err)
		}
		if uerr != nil && len(uerr.Error()) > 200 {
			t.Fatalf("untrusted error is %d bytes: %v", len(uerr.Error()), uerr)
		}
	})
}
