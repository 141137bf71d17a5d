package triggers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"k8s.io/klog/v2"
)

const (
	// DefaultTimeout bounds one query when Client.Timeout is unset; it is
	// KubeElasti's HTTP client timeout.
	DefaultTimeout = 5 * time.Second

	// maxResponseBytes caps what a query reads. An instant query for one
	// series is a few hundred bytes; a larger body means a query that
	// matched far too much, and reading it all would only cost memory.
	maxResponseBytes = 1 << 20

	// uptimeQuery is KubeElasti's health check: the lowest value over the
	// window of "is Prometheus up", with a missing series read as 0 (down).
	uptimeQuery = "min_over_time((max(up{%s}) or vector(0))[%ds:])"
)

// Client runs instant queries against the Prometheus HTTP API. The zero
// value is ready to use. A Client holds no per-server state beyond Health
// and is safe for concurrent use. It never follows a redirect: a trigger's
// server is chosen by whoever wrote the ElastiService, and a redirect would
// let that server send the operator, its headers included, anywhere.
type Client struct {
	// HTTP sends the requests; nil means http.DefaultClient. Its
	// CheckRedirect is replaced: redirects are never followed.
	HTTP *http.Client
	// Timeout bounds each query, connection included; zero or less means
	// DefaultTimeout.
	Timeout time.Duration
	// Health, when set, shares the answers of uptime checks (see
	// HealthMemo); the poller sets a new one for each poll.
	Health *HealthMemo
}

// httpClient is c.HTTP, or http.DefaultClient, with redirects off. The
// copy is shallow: the Transport, and so its connection pool, is shared.
func (c *Client) httpClient() *http.Client {
	hc := *http.DefaultClient
	if c != nil && c.HTTP != nil {
		hc = *c.HTTP
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &hc
}

func (c *Client) timeout() time.Duration {
	if c == nil || c.Timeout <= 0 {
		return DefaultTimeout
	}
	return c.Timeout
}

// Query runs promql as an instant query on p's server with p's headers and
// returns its single finite value. Every failure is an *Error with a
// Reason, never a value that could pass for a measurement.
func (c *Client) Query(ctx context.Context, p Prometheus, promql string) (float64, error) {
	server := redactURL(p.ServerAddress)
	target, err := queryURL(p.ServerAddress, promql)
	if err != nil {
		return 0, errorf(ReasonInvalidMetadata, "prometheus server address %s: %w", server, err)
	}

	timeout := c.timeout()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	req, err := newQueryRequest(ctx, target, p.Headers)
	if err != nil {
		return 0, errorf(ReasonInvalidMetadata, "prometheus server address %s: %w", server, err)
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return 0, transportError(ctx, err, server, timeout)
	}
	defer func() {
		// Drain a little so the connection can be reused, without letting
		// a huge body hold up the caller.
		_, _ = io.CopyN(io.Discard, resp.Body, 4096)
		_ = resp.Body.Close()
	}()

	// Neither the Location of a redirect nor the server's reason phrase
	// is quoted: both are the server's free text.
	if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
		return 0, errorf(ReasonRedirected, "prometheus at %s answered %s, a redirect, which is not followed; set the final address as serverAddress",
			server, statusText(resp.StatusCode))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return 0, transportError(ctx, err, server, timeout)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		hint := ""
		if p.DefaultAuthWithheld && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) {
			// KubeElasti sent its default to every server; a trigger that
			// relied on that needs to be told why it no longer works.
			hint = "; the operator's default Authorization (PROMETHEUS_TRIGGER_AUTHORIZATION_HEADER) goes only to its default server " +
				"(--prometheus-server-address): leave serverAddress out, write it as the default is written, or set headers.Authorization"
		}
		logServerText(ctx, p, server, resp.StatusCode, body)
		return 0, errorf(ReasonBadStatus, "prometheus at %s answered %s%s%s", server, statusText(resp.StatusCode), describeErrorBody(body), hint)
	}
	if len(body) > maxResponseBytes {
		return 0, errorf(ReasonBadResponse, "prometheus at %s sent more than %d bytes; the query must return a single series", server, maxResponseBytes)
	}
	v, err := decodeQueryResponse(body, p.Trusted)
	if err != nil {
		if ReasonOf(err) == ReasonQueryFailed {
			logServerText(ctx, p, server, resp.StatusCode, body)
		}
		return 0, fmt.Errorf("prometheus at %s: %w", server, err)
	}
	return v, nil
}

// logServerText logs what a trusted server answered to a failed query, for
// the operator's administrator: its messages leave events and conditions
// (see errorText), and this is where they can still be read. Another
// server's text is not logged either: it could be anything its author
// wants to put in the operator's log.
func logServerText(ctx context.Context, p Prometheus, server string, status int, body []byte) {
	if !p.Trusted {
		return
	}
	klog.FromContext(ctx).V(4).Info("Prometheus answered a query with an error",
		"server", server, "status", status, "body", truncate(string(body), maxLoggedBytes))
}

// newQueryRequest is the request Query sends to target with headers. It is
// the one place the request is built, so that the server checks (serverOf,
// checkHostHeader) can be tested against what net/http dials for it.
func newQueryRequest(ctx context.Context, target string, headers map[string]string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	for name, value := range headers {
		// net/http ignores a Host entry in Header; the request's Host
		// field is how a virtual host is chosen. ParsePrometheus refuses
		// one naming another server than the URL.
		if http.CanonicalHeaderKey(name) == "Host" {
			req.Host = value
			continue
		}
		req.Header.Set(name, value)
	}
	return req, nil
}

// Healthy reports whether p's Prometheus has been up for the whole window
// before now. Evaluate requires it because a Prometheus that restarted
// within the cooldown has gaps that rate() and friends read as no traffic.
// The window is rounded up to whole seconds, at least one.
func (c *Client) Healthy(ctx context.Context, p Prometheus, window time.Duration) (bool, error) {
	query := UptimeQuery(p.UptimeFilter, window)
	check := func() (bool, error) {
		v, err := c.Query(ctx, p, query)
		if err != nil {
			return false, err
		}
		return v == 1, nil
	}
	if c == nil || c.Health == nil {
		return check()
	}
	return c.Health.healthy(ctx, healthKey(p, query), redactURL(p.ServerAddress), check)
}

// UptimeQuery is the PromQL Healthy runs: KubeElasti's exact text, so the
// same recording rules and dashboards keep working.
func UptimeQuery(filter string, window time.Duration) string {
	if filter == "" {
		filter = DefaultUptimeFilter
	}
	seconds := max(int64(math.Ceil(window.Seconds())), 1)
	return fmt.Sprintf(uptimeQuery, filter, seconds)
}

// queryURL is <server>/api/v1/query?query=<promql>. JoinPath keeps a path
// prefix such as a reverse proxy's /prometheus, and query parameters already
// in the address, such as a tenant, are kept.
func queryURL(server, promql string) (string, error) {
	u, err := url.Parse(server)
	if err != nil {
		return "", errors.New("not a valid URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return "", errors.New("not an absolute http or https URL")
	}
	u = u.JoinPath("api", "v1", "query")
	q := u.Query()
	q.Set("query", promql)
	u.RawQuery = q.Encode()
	u.Fragment, u.RawFragment = "", ""
	return u.String(), nil
}

// statusText is "HTTP 500 Internal Server Error": the code with Go's own
// name for it, never the reason phrase the server sent.
func statusText(code int) string {
	if text := http.StatusText(code); text != "" {
		return fmt.Sprintf("HTTP %d %s", code, text)
	}
	return fmt.Sprintf("HTTP %d", code)
}

// transportError classifies a failure to get an answer. A deadline, ours or
// the caller's, is a timeout; a cancelled caller is not Prometheus's fault.
// The *url.Error net/http wraps it in is dropped: it repeats the request
// URL, whose query holds the PromQL and any parameters of serverAddress,
// and server already says where the request went.
func transportError(ctx context.Context, err error, server string, timeout time.Duration) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err
	}
	var netErr net.Error
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) ||
		errors.As(err, &netErr) && netErr.Timeout():
		return &Error{Reason: ReasonTimeout, Err: fmt.Errorf("prometheus at %s did not answer within %s: %w", server, timeout, err)}
	case errors.Is(err, context.Canceled):
		return &Error{Reason: ReasonCanceled, Err: fmt.Errorf("query to prometheus at %s canceled: %w", server, err)}
	default:
		return &Error{Reason: ReasonUnreachable, Err: fmt.Errorf("prometheus at %s is unreachable: %w", server, err)}
	}
}

// apiResponse is the envelope of every Prometheus HTTP API answer.
type apiResponse struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      *struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	} `json:"data"`
}

// knownErrorTypes are the errorType values of the Prometheus HTTP API. Only
// these are quoted from any server: they are a fixed vocabulary, while any
// other value could be text an arbitrary server chose.
var knownErrorTypes = map[string]bool{
	"bad_data": true, "timeout": true, "canceled": true, "execution": true,
	"unavailable": true, "not_found": true, "internal": true,
}

// errorText is " (<errorType>): <class>" for Prometheus's error: the
// errorType when it is a known one, and the class of its error text in the
// operator's own words (errorClass). The text itself is never repeated,
// from any server: it ends up in events and conditions, which the
// namespace reads, and Prometheus's messages can carry the label sets of
// other namespaces' series (a many-to-many match names the series on both
// sides). Query logs a trusted server's text at verbosity 4.
func (r *apiResponse) errorText() string {
	var b strings.Builder
	if knownErrorTypes[r.ErrorType] {
		b.WriteString(" (" + r.ErrorType + ")")
	}
	switch {
	case r.Error == "" && r.ErrorType == "":
		b.WriteString(", no error given")
	case r.Error == "":
	default:
		if class := errorClass(r.Error); class != "" {
			b.WriteString(": " + class)
		}
		b.WriteString(notQuotedText)
	}
	return b.String()
}

// notQuotedText says why a server's text is missing from a message.
const notQuotedText = "; the server's own text is not repeated, since it may name other namespaces' series " +
	"(the operator logs it at -v=4 for its default server and --prometheus-allowed-servers)"

// errorClasses are phrases of Prometheus's own error messages, each with
// what a message says instead: a fixed, label-free description of the
// class of error. The first phrase found wins.
var errorClasses = []struct{ phrase, class string }{
	{"many-to-many matching not allowed", "many-to-many matching: a binary operation matched several series to one; aggregate a side, or use on(), ignoring() or group_left()"},
	{"found duplicate series for the match group", "duplicate series for a match group: a binary operation matched several series to one; aggregate a side or use on()"},
	{"same labelset", "the result has several series with the same labels"},
	{"parse error", "the query is not valid PromQL"},
	{"unknown function", "the query calls an unknown function"},
	{"query timed out", "the query timed out on the server"},
	{"too many samples", "the query would load too many samples"},
	{"too many series", "the query would touch too many series"},
	{"context canceled", "the server canceled the query"},
}

// errorClass is the class of Prometheus's error text, or "" when it is
// none of errorClasses.
func errorClass(text string) string {
	text = strings.ToLower(truncate(text, maxClassifiedBytes))
	for _, c := range errorClasses {
		if strings.Contains(text, c.phrase) {
			return c.class
		}
	}
	return ""
}

// maxClassifiedBytes bounds the text errorClass searches.
const maxClassifiedBytes = 4096

// maxLoggedBytes bounds a server's text in the operator's log.
const maxLoggedBytes = 4096

// describeErrorBody summarises the body of a non-2xx answer, to follow the
// status: Prometheus's errorType and the class of its error when it sent
// them (errorText), else what kind of body it was. Nothing the server
// wrote is repeated.
func describeErrorBody(body []byte) string {
	var r apiResponse
	if json.Unmarshal(body, &r) == nil && (r.ErrorType != "" || r.Error != "") {
		return r.errorText()
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return " with an empty body"
	}
	return " with a body that is not a Prometheus API error" + notQuotedText
}

// quoteIf is s quoted and shortened to n bytes for a trusted server, and
// nothing for another: a message may say what was wrong, but only a
// trusted server's own words are repeated.
func quoteIf(trusted bool, s string, n int) string {
	if !trusted {
		return ""
	}
	return " " + strconv.Quote(truncate(s, n))
}

// decodeQueryResponse extracts the single value of an instant query answer:
// a vector with exactly one sample, or a scalar.
// Only a trusted server's own text is quoted (see quoteIf).
func decodeQueryResponse(body []byte, trusted bool) (float64, error) {
	var r apiResponse
	if err := json.Unmarshal(body, &r); err != nil {
		// A syntax error quotes the character it choked on.
		if !trusted {
			return 0, errorf(ReasonBadResponse, "answer is not Prometheus API JSON")
		}
		return 0, errorf(ReasonBadResponse, "answer is not Prometheus API JSON: %w", err)
	}
	switch r.Status {
	case "success":
	case "error":
		return 0, errorf(ReasonQueryFailed, "query failed%s", r.errorText())
	default:
		return 0, errorf(ReasonBadResponse, "answer's status%s is neither \"success\" nor \"error\"", quoteIf(trusted, r.Status, 32))
	}
	if r.Data == nil {
		return 0, errorf(ReasonBadResponse, "answer has no data")
	}

	var sample json.RawMessage
	switch r.Data.ResultType {
	case "vector":
		var series []struct {
			Value json.RawMessage `json:"value"`
		}
		if err := json.Unmarshal(r.Data.Result, &series); err != nil {
			if !trusted {
				return 0, errorf(ReasonBadResponse, "vector result is malformed")
			}
			return 0, errorf(ReasonBadResponse, "vector result is malformed: %w", err)
		}
		switch len(series) {
		case 0:
			return 0, errorf(ReasonEmptyResult, "query returned no series; the metric may be missing or its labels wrong")
		case 1:
			sample = series[0].Value
		default:
			return 0, errorf(ReasonMultipleSeries, "query returned %d series, want one; aggregate it, for example with sum()", len(series))
		}
	case "scalar":
		sample = r.Data.Result
	default:
		// Prometheus's other result types are a fixed vocabulary.
		known := r.Data.ResultType == "matrix" || r.Data.ResultType == "string"
		return 0, errorf(ReasonBadResponse, "result type%s is not supported; the query must return an instant vector or a scalar",
			quoteIf(trusted || known, r.Data.ResultType, 32))
	}
	return decodeSample(sample, trusted)
}

// decodeSample reads [<unix time>, "<value>"]. Prometheus writes the value as
// a string so that NaN and ±Inf survive JSON; a bare number is accepted too.
func decodeSample(raw json.RawMessage, trusted bool) (float64, error) {
	var pair []json.RawMessage
	if err := json.Unmarshal(raw, &pair); err != nil || len(pair) != 2 {
		return 0, errorf(ReasonBadResponse, "sample is not a [timestamp, value] pair")
	}
	// Unmarshal leaves a float64 alone for null, so check for it first.
	var ts float64
	if string(pair[0]) == "null" || json.Unmarshal(pair[0], &ts) != nil {
		return 0, errorf(ReasonBadResponse, "sample timestamp is not a number")
	}
	var text string
	if err := json.Unmarshal(pair[1], &text); err != nil {
		var n json.Number
		if json.Unmarshal(pair[1], &n) != nil {
			return 0, errorf(ReasonBadResponse, "sample value is neither a string nor a number")
		}
		text = n.String()
	}
	v, err := strconv.ParseFloat(text, 64)
	if err != nil && !isRangeError(err) {
		return 0, errorf(ReasonBadResponse, "sample value%s is not a number", quoteIf(trusted, text, 64))
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		// NaN, +Inf or -Inf, as Go writes them, is no text of the server's.
		if !trusted {
			text = formatFloat(v)
		}
		return 0, errorf(ReasonNotFinite, "sample value %q is not finite", truncate(text, 64))
	}
	return v, nil
}
