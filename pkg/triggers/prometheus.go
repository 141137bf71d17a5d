// Package triggers decides whether an ElastiService is idle by running its
// Prometheus triggers, the same metadata KubeElasti reads, and comparing each
// value with its threshold.
//
// Any doubt counts as not idle: an unreachable Prometheus, an empty result or
// a NaN is an error, never a zero that would scale a busy service down.
package triggers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

// DefaultUptimeFilter selects the Prometheus server's own up series for the
// health check, as KubeElasti does.
const DefaultUptimeFilter = `container="prometheus"`

// Defaults are the operator-wide settings every trigger is read with.
type Defaults struct {
	// ServerAddress is used when a trigger has no serverAddress
	// (PROMETHEUS_TRIGGER_SERVER_ADDRESS).
	ServerAddress string
	// AuthorizationHeader is sent as Authorization when a trigger sets no
	// Authorization header of its own and queries the default server, at
	// or below ServerAddress (PROMETHEUS_TRIGGER_AUTHORIZATION_HEADER). It
	// is the operator's credential: a trigger naming any other server is
	// sent none, or whoever wrote the trigger could collect it.
	AuthorizationHeader string
	// UptimeFilter replaces DefaultUptimeFilter when a trigger has none.
	UptimeFilter string
	// AllowedServers, when not empty, are the only servers besides the
	// default one that triggers may query (--prometheus-allowed-servers);
	// Evaluate refuses any other before sending anything. Empty allows
	// every server, as KubeElasti does.
	AllowedServers []ServerPrefix
	// TenantHeaders are the headers that select a tenant or an identity
	// (see identityHeaders) that a trigger may nonetheless send to the
	// default server (--prometheus-tenant-headers-allowed). The default
	// server is shared by every namespace and queried with the operator's
	// own credential and network position, so by default a trigger may
	// choose neither whose data it reads nor as whom.
	TenantHeaders TenantHeaders
}

// TenantHeaders is a set of header names, or every name.
type TenantHeaders struct {
	all   bool
	names map[string]bool
}

// allows reports whether the canonical header name is in h.
func (h TenantHeaders) allows(name string) bool {
	return h.all || h.names[name]
}

// ParseTenantHeaders reads --prometheus-tenant-headers-allowed: header
// names separated by commas, blanks around them ignored, in any case; "*"
// allows every header, as KubeElasti sent a trigger's headers to any
// server. Empty allows none of identityHeaders.
func ParseTenantHeaders(list string) (TenantHeaders, error) {
	var h TenantHeaders
	for name := range strings.SplitSeq(list, ",") {
		name = strings.TrimSpace(name)
		switch {
		case name == "":
			continue
		case name == "*":
			h.all = true
			continue
		}
		if err := checkHeader(name, ""); err != nil {
			return TenantHeaders{}, err
		}
		if h.names == nil {
			h.names = map[string]bool{}
		}
		h.names[http.CanonicalHeaderKey(name)] = true
	}
	return h, nil
}

// identityHeaders choose whose data a request reads or as whom it is made,
// on a Prometheus, a Mimir, Cortex or Thanos in front of one, or an
// authenticating proxy. A trigger sends none of them to the default server
// unless Defaults.TenantHeaders allows it. Keys are canonical.
var identityHeaders = map[string]string{
	// The credential itself: the operator sends its own; a trigger's
	// would make the operator query as someone else from its own address.
	"Authorization": "a credential",
	// A forward proxy's credential, the same for a proxy on the way.
	"Proxy-Authorization": "a proxy credential",
	// A session, as a browser-facing auth proxy reads one.
	"Cookie": "a session cookie",
	// Cortex, Mimir and Loki: the tenant whose series a query reads.
	"X-Scope-Orgid": "a Cortex or Mimir tenant",
	// Thanos receive and query-frontend's tenant header.
	"Thanos-Tenant": "a Thanos tenant",
	// Grafana's organisation, honoured by Grafana's data source proxy.
	"X-Grafana-Org-Id": "a Grafana organisation",
	// Auth proxies (oauth2-proxy, Pomerium, Apache, Grafana's auth.proxy)
	// pass the signed-in user in these and the servers behind trust them.
	"X-Forwarded-User":      "a user an auth proxy vouches for",
	"X-Forwarded-Email":     "a user an auth proxy vouches for",
	"X-Forwarded-Groups":    "groups an auth proxy vouches for",
	"X-Auth-Request-User":   "a user an auth proxy vouches for",
	"X-Auth-Request-Email":  "a user an auth proxy vouches for",
	"X-Auth-Request-Groups": "groups an auth proxy vouches for",
	"X-Remote-User":         "a user an auth proxy vouches for",
	"X-Remote-Group":        "groups an auth proxy vouches for",
	"X-Webauth-User":        "a user an auth proxy vouches for",
	// The client address, which servers and proxies allow by.
	"X-Forwarded-For": "the client's address",
	"X-Real-Ip":       "the client's address",
	"Forwarded":       "the client's address",
}

// Prometheus is a parsed prometheus trigger with the defaults applied.
type Prometheus struct {
	Query         string
	ServerAddress string
	// Threshold is finite; the service is idle while the query's value is
	// strictly below it.
	Threshold    float64
	UptimeFilter string
	// Headers are sent on every query, including the default Authorization
	// when the trigger set none and queries the default server. Values may
	// be secrets; String redacts them.
	Headers map[string]string
	// Trusted is true for the operator's default server and the servers in
	// Defaults.AllowedServers: servers the operator's administrator chose.
	// Only their error text is quoted in messages; any other server could
	// be an internal service whose answers the trigger's author wants to
	// read through the ElastiService's events.
	Trusted bool
	// DefaultAuthWithheld is true when the operator has a default
	// Authorization that this trigger would have had from KubeElasti but
	// does not get, its server being another than the default one; a 401
	// or 403 then says so.
	DefaultAuthWithheld bool
}

// String describes the trigger without header values or URL passwords, so
// that logging it cannot leak credentials.
func (p Prometheus) String() string {
	names := slices.Sorted(maps.Keys(p.Headers))
	return fmt.Sprintf("prometheus{server=%s query=%q threshold=%g uptimeFilter=%q headers=%v}",
		redactURL(p.ServerAddress), p.Query, p.Threshold, p.UptimeFilter, names)
}

// metadata is the JSON in spec.triggers[].metadata. Threshold stays raw
// because KubeElasti writes it as a string but a number is an easy mistake.
type metadata struct {
	Query         string            `json:"query"`
	ServerAddress string            `json:"serverAddress"`
	Threshold     json.RawMessage   `json:"threshold"`
	UptimeFilter  string            `json:"uptimeFilter"`
	Headers       map[string]string `json:"headers"`
}

// ParsePrometheus parses a prometheus trigger's metadata and applies d.
// Unknown keys are ignored, as KubeElasti ignores them. Every error has
// ReasonInvalidMetadata.
func ParsePrometheus(raw json.RawMessage, d Defaults) (Prometheus, error) {
	m, threshold, err := parseMetadata(raw)
	if err != nil {
		return Prometheus{}, err
	}

	addr, from := strings.TrimSpace(m.ServerAddress), "metadata.serverAddress"
	if addr == "" {
		addr, from = strings.TrimSpace(d.ServerAddress), "the default server address (PROMETHEUS_TRIGGER_SERVER_ADDRESS)"
	}
	if addr == "" {
		return Prometheus{}, errorf(ReasonInvalidMetadata, "metadata.serverAddress is required when the operator has no default server address (PROMETHEUS_TRIGGER_SERVER_ADDRESS)")
	}
	if err := checkServerAddress(addr); err != nil {
		return Prometheus{}, errorf(ReasonInvalidMetadata, "%s: %w", from, err)
	}
	if err := checkHostHeader(addr, m.Headers); err != nil {
		return Prometheus{}, errorf(ReasonInvalidMetadata, "metadata.headers: %w", err)
	}
	isDefault := isDefaultServer(addr, d.ServerAddress)
	if isDefault {
		for _, name := range slices.Sorted(maps.Keys(m.Headers)) {
			key := http.CanonicalHeaderKey(name)
			if what, ok := identityHeaders[key]; ok && !d.TenantHeaders.allows(key) {
				return Prometheus{}, errorf(ReasonInvalidMetadata,
					"metadata.headers: %q chooses %s, which a trigger may not do on the operator's default server (--prometheus-tenant-headers-allowed); "+
						"the operator queries it for every namespace with its own credential", truncate(name, 64), what)
			}
		}
	}

	filter := m.UptimeFilter
	if filter == "" {
		filter = d.UptimeFilter
	}
	if filter == "" {
		filter = DefaultUptimeFilter
	}

	headers := make(map[string]string, len(m.Headers)+1)
	hasAuth := false
	for name, value := range m.Headers {
		if http.CanonicalHeaderKey(name) == "Authorization" {
			hasAuth = true
		}
		headers[name] = value
	}
	if !hasAuth && d.AuthorizationHeader != "" && isDefault {
		if err := checkHeader("Authorization", d.AuthorizationHeader); err != nil {
			return Prometheus{}, errorf(ReasonInvalidMetadata, "default authorization header (PROMETHEUS_TRIGGER_AUTHORIZATION_HEADER): %w", err)
		}
		headers["Authorization"] = d.AuthorizationHeader
	}
	if len(headers) == 0 {
		headers = nil
	}

	return Prometheus{
		Query:               m.Query,
		ServerAddress:       addr,
		Threshold:           threshold,
		UptimeFilter:        filter,
		Headers:             headers,
		Trusted:             isDefault || isListed(addr, d.AllowedServers),
		DefaultAuthWithheld: !hasAuth && d.AuthorizationHeader != "" && !isDefault,
	}, nil
}

// allowed reports whether d lets triggers query p's server.
func (d Defaults) allowed(p Prometheus) bool {
	return len(d.AllowedServers) == 0 || p.Trusted
}

// ValidatePrometheus checks a prometheus trigger's own metadata as
// ParsePrometheus does, without the operator's defaults: metadata it
// refuses, ParsePrometheus refuses whatever the defaults. A missing
// serverAddress is no error here, since a default may supply it.
func ValidatePrometheus(raw json.RawMessage) error {
	_, _, err := parseMetadata(raw)
	return err
}

// parseMetadata decodes and checks everything in raw that does not depend
// on the defaults. The size is checked before decoding, so a huge metadata
// costs nothing to refuse, and no message repeats the query.
func parseMetadata(raw json.RawMessage) (metadata, float64, error) {
	var m metadata
	if len(bytes.TrimSpace(raw)) == 0 {
		return m, 0, errorf(ReasonInvalidMetadata, "metadata is missing")
	}
	if len(raw) > v1alpha1.MaxTriggerMetadataBytes {
		return m, 0, errorf(ReasonInvalidMetadata, "metadata is %d bytes of JSON, more than the %d allowed", len(raw), v1alpha1.MaxTriggerMetadataBytes)
	}
	if n, ok := trimmedBytes(raw); ok {
		return m, 0, errorf(ReasonInvalidMetadata, "metadata is %d bytes of JSON, more than the %d allowed", n, v1alpha1.MaxTriggerMetadataBytes)
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil {
		return m, 0, errorf(ReasonInvalidMetadata, "metadata is not a valid JSON object: %w", err)
	}
	if len(keys) > v1alpha1.MaxTriggerMetadataKeys {
		return m, 0, errorf(ReasonInvalidMetadata, "metadata has %d keys, more than the %d allowed", len(keys), v1alpha1.MaxTriggerMetadataKeys)
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return m, 0, errorf(ReasonInvalidMetadata, "metadata is not a valid JSON object: %w", err)
	}
	for _, f := range []struct {
		name  string
		value string
		max   int
	}{
		{"serverAddress", m.ServerAddress, v1alpha1.MaxTriggerServerAddressLength},
		{"uptimeFilter", m.UptimeFilter, v1alpha1.MaxTriggerUptimeFilterLength},
	} {
		if n := utf8.RuneCountInString(f.value); n > f.max {
			return m, 0, errorf(ReasonInvalidMetadata, "metadata.%s is %d characters, more than the %d allowed", f.name, n, f.max)
		}
	}
	if len(m.Headers) > v1alpha1.MaxTriggerHeaders {
		return m, 0, errorf(ReasonInvalidMetadata, "metadata.headers has %d headers, more than the %d allowed", len(m.Headers), v1alpha1.MaxTriggerHeaders)
	}
	if strings.TrimSpace(m.Query) == "" {
		return m, 0, errorf(ReasonInvalidMetadata, "metadata.query is required")
	}
	if len(m.Query) > v1alpha1.MaxTriggerQueryBytes {
		return m, 0, errorf(ReasonInvalidMetadata, "metadata.query is %d bytes, more than the %d allowed", len(m.Query), v1alpha1.MaxTriggerQueryBytes)
	}
	if addr := strings.TrimSpace(m.ServerAddress); addr != "" {
		if err := checkServerAddress(addr); err != nil {
			return m, 0, errorf(ReasonInvalidMetadata, "metadata.serverAddress: %w", err)
		}
		// Without serverAddress the default's is the URL, which only
		// ParsePrometheus knows.
		if err := checkHostHeader(addr, m.Headers); err != nil {
			return m, 0, errorf(ReasonInvalidMetadata, "metadata.headers: %w", err)
		}
	}
	threshold, err := parseThreshold(m.Threshold)
	if err != nil {
		return m, 0, errorf(ReasonInvalidMetadata, "metadata.threshold: %w", err)
	}
	// In order, so that the same metadata always gets the same message: it
	// ends up in a condition, and a changing one would be rewritten forever.
	for _, name := range slices.Sorted(maps.Keys(m.Headers)) {
		if err := checkHeader(name, m.Headers[name]); err != nil {
			return m, 0, errorf(ReasonInvalidMetadata, "metadata.headers: %w", err)
		}
		if n := utf8.RuneCountInString(m.Headers[name]); n > v1alpha1.MaxTriggerHeaderValueLength {
			return m, 0, errorf(ReasonInvalidMetadata, "metadata.headers: header %q is %d characters, more than the %d allowed",
				truncate(name, 64), n, v1alpha1.MaxTriggerHeaderValueLength)
		}
	}
	return m, threshold, nil
}

// parseThreshold reads a threshold written as a string, as KubeElasti's CRD
// documents it, or as a JSON number.
func parseThreshold(raw json.RawMessage) (float64, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return 0, fmt.Errorf("is required, as a number in a string such as \"0.5\"")
	}
	var text string
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &text); err != nil {
			return 0, fmt.Errorf("is not a string: %w", err)
		}
	} else {
		var n json.Number
		if err := json.Unmarshal(raw, &n); err != nil {
			return 0, fmt.Errorf("must be a number in a string such as \"0.5\"")
		}
		text = n.String()
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
	if err != nil && !isRangeError(err) {
		return 0, fmt.Errorf("%q is not a number", truncate(text, 64))
	}
	// A range error comes back as ±Inf, so this also rejects 1e999.
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q is not a finite number", truncate(text, 64))
	}
	return v, nil
}

func isRangeError(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// checkServerAddress requires an absolute http or https URL. A bare host
// name would otherwise parse as a relative path and fail only at query time,
// with a much less helpful message.
func checkServerAddress(addr string) error {
	u, err := url.Parse(addr)
	if err != nil {
		// The parse error repeats the address, which may hold a password.
		return fmt.Errorf("not a valid URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("%q is not an absolute http or https URL", truncate(redactURL(addr), 128))
	}
	return nil
}

// checkHeader rejects what net/http would refuse at send time, so the
// mistake surfaces as invalid metadata instead of an unreachable Prometheus.
// Values are never quoted: they are often credentials.
func checkHeader(name, value string) error {
	if name == "" {
		return fmt.Errorf("empty header name")
	}
	for i := 0; i < len(name); i++ {
		if !isTokenChar(name[i]) {
			return fmt.Errorf("header name %q is not a valid HTTP token", truncate(name, 64))
		}
	}
	for i := 0; i < len(value); i++ {
		if c := value[i]; c < ' ' && c != '\t' || c == 0x7f {
			return fmt.Errorf("header %q has a control character in its value", truncate(name, 64))
		}
	}
	return nil
}

// isTokenChar reports whether c may appear in an HTTP token (RFC 9110).
func isTokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// redactURL is addr for messages and logs: scheme, host and path only. User
// information and the query may hold credentials (a password, a token
// given as user name, an api_key parameter), and the default server's
// address is the operator's, not the namespace's to read in its events.
func redactURL(addr string) string {
	u, err := url.Parse(addr)
	if err != nil {
		return "<invalid URL>"
	}
	u.User = nil
	u.RawQuery, u.ForceQuery = "", false
	u.Fragment, u.RawFragment = "", ""
	return u.String()
}

// truncate cuts s to at most n bytes without splitting a UTF-8 sequence, so
// that echoing user or server text keeps messages short.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "..."
}

// trimmedKey marks metadata TrimMetadata replaced for being too large; its
// value is the size it had.
const trimmedKey = "elasti.dev/trimmed-bytes"

// TrimMetadata is raw as a cache keeps it: only what ParsePrometheus reads,
// so that what it decides is the same for raw and for the result. Unknown
// keys, which KubeElasti and ParsePrometheus ignore, are dropped; metadata
// past MaxTriggerMetadataBytes becomes a small marker that ParsePrometheus
// refuses with the same message as the original. Metadata that is not an
// object is kept as it is, and is within that bound.
func TrimMetadata(raw json.RawMessage) json.RawMessage {
	if len(raw) > v1alpha1.MaxTriggerMetadataBytes {
		return json.RawMessage(fmt.Sprintf(`{%q:%d}`, trimmedKey, len(raw)))
	}
	if _, ok := trimmedBytes(raw); ok {
		return raw
	}
	var keys map[string]json.RawMessage
	var m metadata
	if json.Unmarshal(raw, &keys) != nil || json.Unmarshal(raw, &m) != nil || len(keys) > v1alpha1.MaxTriggerMetadataKeys {
		// Refused by parseMetadata as it is; kept so the message is the same.
		return raw
	}
	out, err := json.Marshal(m)
	if err != nil || len(out) >= len(raw) {
		return raw
	}
	return out
}

// trimmedBytes reads TrimMetadata's marker: the size the metadata had.
func trimmedBytes(raw json.RawMessage) (int, bool) {
	if !bytes.HasPrefix(raw, []byte(`{"`+trimmedKey+`":`)) {
		return 0, false
	}
	var marker map[string]int
	if json.Unmarshal(raw, &marker) != nil || len(marker) != 1 || marker[trimmedKey] <= v1alpha1.MaxTriggerMetadataBytes {
		return 0, false
	}
	return marker[trimmedKey], true
}
