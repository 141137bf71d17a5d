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
	"time"
)

const (
	// DefaultTimeout bounds one query when Client.Timeout is unset; it is
	// KubeElasti's HTTP client timeout.
	DefaultTimeout = 5 * time.Second

	// maxResponseBytes caps what a query reads. An instant query for one
	// series is a few hundred bytes; a larger body means a query that
	// matched far too much, and reading it all would only cost memory.
	maxResponseBytes = 1 << 20

	// maxEchoBytes caps server text quoted in an error, which ends up in
	// logs, events and status conditions.
	maxEchoBytes = 256

	// uptimeQuery is KubeElasti's health check: the lowest value over the
	// window of "is Prometheus up", with a missing series read as 0 (down).
	uptimeQuery = "min_over_time((max(up{%s}) or vector(0))[%ds:])"
)

// Client runs instant queries against the Prometheus HTTP API. The zero
// value is ready to use. A Client holds no per-server state beyond Health
// and is safe for concurrent use.
type Client struct {
	// HTTP sends the requests; nil means http.DefaultClient.
	HTTP *http.Client
	// Timeout bounds each query, connection included; zero or less means
	// DefaultTimeout.
	Timeout time.Duration
	// Health, when set, shares the answers of uptime checks (see
	// HealthMemo); the poller sets a new one for each poll.
	Health *HealthMemo
}

func (c *Client) httpClient() *http.Client {
	if c == nil || c.HTTP == nil {
		return http.DefaultClient
	}
	return c.HTTP
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

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return 0, errorf(ReasonInvalidMetadata, "prometheus server address %s: %w", server, err)
	}
	req.Header.Set("Accept", "application/json")
	for name, value := range p.Headers {
		// net/http ignores a Host entry in Header; the request's Host
		// field is how a virtual host is chosen.
		if http.CanonicalHeaderKey(name) == "Host" {
			req.Host = value
			continue
		}
		req.Header.Set(name, value)
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

	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return 0, transportError(ctx, err, server, timeout)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return 0, errorf(ReasonBadStatus, "prometheus at %s answered %s: %s", server, resp.Status, describeErrorBody(body))
	}
	if len(body) > maxResponseBytes {
		return 0, errorf(ReasonBadResponse, "prometheus at %s sent more than %d bytes; the query must return a single series", server, maxResponseBytes)
	}
	v, err := decodeQueryResponse(body)
	if err != nil {
		return 0, fmt.Errorf("prometheus at %s: %w", server, err)
	}
	return v, nil
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

// transportError classifies a failure to get an answer. A deadline, ours or
// the caller's, is a timeout; a cancelled caller is not Prometheus's fault.
func transportError(ctx context.Context, err error, server string, timeout time.Duration) error {
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

// errorText is Prometheus's "<errorType>: <error>", shortened.
func (r *apiResponse) errorText() string {
	switch {
	case r.ErrorType == "" && r.Error == "":
		return "no error given"
	case r.ErrorType == "":
		return truncate(r.Error, maxEchoBytes)
	case r.Error == "":
		return truncate(r.ErrorType, maxEchoBytes)
	}
	return truncate(r.ErrorType+": "+r.Error, maxEchoBytes)
}

// describeErrorBody summarises the body of a non-2xx answer: Prometheus's
// own errorType and error when it sent them, else the start of the body.
func describeErrorBody(body []byte) string {
	var r apiResponse
	if json.Unmarshal(body, &r) == nil && (r.ErrorType != "" || r.Error != "") {
		return r.errorText()
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return "empty body"
	}
	return strconv.Quote(truncate(string(body), maxEchoBytes))
}

// decodeQueryResponse extracts the single value of an instant query answer:
// a vector with exactly one sample, or a scalar.
func decodeQueryResponse(body []byte) (float64, error) {
	var r apiResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return 0, errorf(ReasonBadResponse, "answer is not Prometheus API JSON: %w", err)
	}
	switch r.Status {
	case "success":
	case "error":
		return 0, errorf(ReasonQueryFailed, "query failed: %s", r.errorText())
	default:
		return 0, errorf(ReasonBadResponse, "answer has status %q, want \"success\"", truncate(r.Status, 32))
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
		return 0, errorf(ReasonBadResponse, "result type %q is not supported; the query must return an instant vector or a scalar", truncate(r.Data.ResultType, 32))
	}
	return decodeSample(sample)
}

// decodeSample reads [<unix time>, "<value>"]. Prometheus writes the value as
// a string so that NaN and ±Inf survive JSON; a bare number is accepted too.
func decodeSample(raw json.RawMessage) (float64, error) {
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
		return 0, errorf(ReasonBadResponse, "sample value %q is not a number", truncate(text, 64))
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, errorf(ReasonNotFinite, "sample value %q is not finite", truncate(text, 64))
	}
	return v, nil
}
