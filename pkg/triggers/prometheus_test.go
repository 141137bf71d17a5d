package triggers

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

func TestParsePrometheus(t *testing.T) {
	const server = "http://prometheus.monitoring:9090"
	defaults := Defaults{ServerAddress: "http://default:9090", AuthorizationHeader: "Bearer default-token", UptimeFilter: `job="prom"`}

	tests := []struct {
		name     string
		raw      string
		defaults Defaults
		want     Prometheus
	}{
		{
			name: "KubeElasti example",
			raw:  `{"query":"sum(rate(nginx_ingress_controller_nginx_process_requests_total[1m])) or vector(0)","serverAddress":"` + server + `","threshold":"0.5"}`,
			want: Prometheus{
				Query:         "sum(rate(nginx_ingress_controller_nginx_process_requests_total[1m])) or vector(0)",
				ServerAddress: server, Threshold: 0.5, UptimeFilter: DefaultUptimeFilter,
			},
		},
		{
			name: "every field",
			raw:  `{"query":"up","serverAddress":"https://user:pw@prom.example/prefix/","threshold":"10","uptimeFilter":"job=\"p\"","headers":{"X-Scope-OrgID":"tenant-a","Authorization":"Basic abc"}}`,
			want: Prometheus{
				Query: "up", ServerAddress: "https://user:pw@prom.example/prefix/", Threshold: 10, UptimeFilter: `job="p"`,
				Headers: map[string]string{"X-Scope-OrgID": "tenant-a", "Authorization": "Basic abc"},
			},
		},
		{
			name: "threshold as a JSON number",
			raw:  `{"query":"up","serverAddress":"` + server + `","threshold":2}`,
			want: Prometheus{Query: "up", ServerAddress: server, Threshold: 2, UptimeFilter: DefaultUptimeFilter},
		},
		{
			name: "threshold with spaces and exponent",
			raw:  `{"query":"up","serverAddress":"` + server + `","threshold":" -1.5e3 "}`,
			want: Prometheus{Query: "up", ServerAddress: server, Threshold: -1500, UptimeFilter: DefaultUptimeFilter},
		},
		{
			name: "unknown keys are ignored",
			raw:  `{"query":"up","serverAddress":"` + server + `","threshold":"0","metricName":"x","activationThreshold":"3","nested":{"a":[1]}}`,
			want: Prometheus{Query: "up", ServerAddress: server, Threshold: 0, UptimeFilter: DefaultUptimeFilter},
		},
		{
			name:     "operator defaults fill the gaps",
			raw:      `{"query":"up","threshold":"1"}`,
			defaults: defaults,
			want: Prometheus{
				Query: "up", ServerAddress: "http://default:9090", Threshold: 1, UptimeFilter: `job="prom"`,
				Headers: map[string]string{"Authorization": "Bearer default-token"}, Trusted: true,
			},
		},
		{
			name:     "trigger settings beat the defaults",
			raw:      `{"query":"up","serverAddress":"` + server + `","threshold":"1","uptimeFilter":"job=\"mine\"","headers":{"authorization":"Bearer mine"}}`,
			defaults: defaults,
			want: Prometheus{
				Query: "up", ServerAddress: server, Threshold: 1, UptimeFilter: `job="mine"`,
				Headers: map[string]string{"authorization": "Bearer mine"},
			},
		},
		{
			name:     "default authorization joins other headers",
			raw:      `{"query":"up","threshold":"1","headers":{"X-Scope-OrgID":"t","X-Custom":"c"}}`,
			defaults: Defaults{ServerAddress: server, AuthorizationHeader: "Bearer d", TenantHeaders: TenantHeaders{names: map[string]bool{"X-Scope-Orgid": true}}},
			want: Prometheus{
				Query: "up", ServerAddress: server, Threshold: 1, UptimeFilter: DefaultUptimeFilter,
				Headers: map[string]string{"X-Scope-OrgID": "t", "X-Custom": "c", "Authorization": "Bearer d"}, Trusted: true,
			},
		},
		{
			name:     "another server gets no default credential",
			raw:      `{"query":"up","serverAddress":"` + server + `","threshold":"1","headers":{"X-Scope-OrgID":"t"}}`,
			defaults: defaults,
			want: Prometheus{
				Query: "up", ServerAddress: server, Threshold: 1, UptimeFilter: `job="prom"`,
				Headers: map[string]string{"X-Scope-OrgID": "t"}, DefaultAuthWithheld: true,
			},
		},
		{
			name:     "the default server written out gets it",
			raw:      `{"query":"up","serverAddress":"HTTP://Default:9090/","threshold":"1"}`,
			defaults: defaults,
			want: Prometheus{
				Query: "up", ServerAddress: "HTTP://Default:9090/", Threshold: 1, UptimeFilter: `job="prom"`,
				Headers: map[string]string{"Authorization": "Bearer default-token"}, Trusted: true,
			},
		},
		{
			name:     "blank server address falls back",
			raw:      `{"query":"up","serverAddress":"  ","threshold":"1"}`,
			defaults: Defaults{ServerAddress: server},
			want:     Prometheus{Query: "up", ServerAddress: server, Threshold: 1, UptimeFilter: DefaultUptimeFilter, Trusted: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParsePrometheus(json.RawMessage(tt.raw), tt.defaults)
			if err != nil {
				t.Fatalf("ParsePrometheus: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParsePrometheus\n got %#v\nwant %#v", got, tt.want)
			}
		})
	}
}

func TestParsePrometheusErrors(t *testing.T) {
	const ok = `"query":"up","serverAddress":"http://p:9090"`
	tests := []struct {
		name     string
		raw      string
		defaults Defaults
		want     string
	}{
		{"missing", ``, Defaults{}, "metadata is missing"},
		{"blank", " \n ", Defaults{}, "metadata is missing"},
		{"not JSON", `{query:`, Defaults{}, "not a valid JSON object"},
		{"array", `["up"]`, Defaults{}, "not a valid JSON object"},
		{"string", `"up"`, Defaults{}, "not a valid JSON object"},
		{"trailing garbage", `{"query":"up"} x`, Defaults{}, "not a valid JSON object"},
		{"null", `null`, Defaults{}, "metadata.query is required"},
		{"no query", `{"serverAddress":"http://p","threshold":"1"}`, Defaults{}, "metadata.query is required"},
		{"blank query", `{"query":"  ","serverAddress":"http://p","threshold":"1"}`, Defaults{}, "metadata.query is required"},
		{"query not a string", `{"query":5,"serverAddress":"http://p","threshold":"1"}`, Defaults{}, "not a valid JSON object"},
		{"no server and no default", `{"query":"up","threshold":"1"}`, Defaults{}, "metadata.serverAddress is required when the operator has no default"},
		{"host and port only", `{"query":"up","serverAddress":"prometheus:9090","threshold":"1"}`, Defaults{}, `metadata.serverAddress: "prometheus:9090" is not an absolute http or https URL`},
		{"relative", `{"query":"up","serverAddress":"/prometheus","threshold":"1"}`, Defaults{}, "is not an absolute http or https URL"},
		{"no host", `{"query":"up","serverAddress":"http://","threshold":"1"}`, Defaults{}, "is not an absolute http or https URL"},
		{"ftp", `{"query":"up","serverAddress":"ftp://p","threshold":"1"}`, Defaults{}, "is not an absolute http or https URL"},
		{"unparsable URL", `{"query":"up","serverAddress":"http://[::1","threshold":"1"}`, Defaults{}, "metadata.serverAddress: not a valid URL"},
		{"bad default server", `{"query":"up","threshold":"1"}`, Defaults{ServerAddress: "p:9090"}, "the default server address (PROMETHEUS_TRIGGER_SERVER_ADDRESS): "},
		{"threshold missing", `{` + ok + `}`, Defaults{}, "metadata.threshold: is required"},
		{"threshold null", `{` + ok + `,"threshold":null}`, Defaults{}, "metadata.threshold: is required"},
		{"threshold empty", `{` + ok + `,"threshold":""}`, Defaults{}, `metadata.threshold: "" is not a number`},
		{"threshold garbage", `{` + ok + `,"threshold":"half"}`, Defaults{}, `metadata.threshold: "half" is not a number`},
		{"threshold with unit", `{` + ok + `,"threshold":"5%"}`, Defaults{}, `metadata.threshold: "5%" is not a number`},
		{"threshold NaN", `{` + ok + `,"threshold":"NaN"}`, Defaults{}, `metadata.threshold: "NaN" is not a finite number`},
		{"threshold Inf", `{` + ok + `,"threshold":"+Inf"}`, Defaults{}, `"+Inf" is not a finite number`},
		{"threshold -infinity", `{` + ok + `,"threshold":"-infinity"}`, Defaults{}, `"-infinity" is not a finite number`},
		{"threshold overflows", `{` + ok + `,"threshold":"1e999"}`, Defaults{}, `"1e999" is not a finite number`},
		{"threshold number overflows", `{` + ok + `,"threshold":1e999}`, Defaults{}, `"1e999" is not a finite number`},
		{"threshold bool", `{` + ok + `,"threshold":true}`, Defaults{}, "metadata.threshold: must be a number in a string"},
		{"threshold object", `{` + ok + `,"threshold":{"v":1}}`, Defaults{}, "metadata.threshold: must be a number in a string"},
		{"headers not an object", `{` + ok + `,"threshold":"1","headers":["a"]}`, Defaults{}, "not a valid JSON object"},
		{"header value not a string", `{` + ok + `,"threshold":"1","headers":{"A":1}}`, Defaults{}, "not a valid JSON object"},
		{"header name with space", `{` + ok + `,"threshold":"1","headers":{"X Org":"a"}}`, Defaults{}, `metadata.headers: header name "X Org" is not a valid HTTP token`},
		{"empty header name", `{` + ok + `,"threshold":"1","headers":{"":"a"}}`, Defaults{}, "metadata.headers: empty header name"},
		{"header value with newline", `{` + ok + `,"threshold":"1","headers":{"X-A":"a\r\nEvil: 1"}}`, Defaults{}, `metadata.headers: header "X-A" has a control character in its value`},
		{"bad default authorization", `{` + ok + `,"threshold":"1"}`, Defaults{ServerAddress: "http://p:9090", AuthorizationHeader: "Bearer a\nb"}, "default authorization header (PROMETHEUS_TRIGGER_AUTHORIZATION_HEADER): "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParsePrometheus(json.RawMessage(tt.raw), tt.defaults)
			if err == nil {
				t.Fatalf("ParsePrometheus succeeded with %#v, want error containing %q", got, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
			if r := ReasonOf(err); r != ReasonInvalidMetadata {
				t.Errorf("ReasonOf = %q, want %q", r, ReasonInvalidMetadata)
			}
			if !reflect.DeepEqual(got, Prometheus{}) {
				t.Errorf("failed parse returned %#v, want the zero value", got)
			}
		})
	}
}

// ValidatePrometheus refuses what ParsePrometheus refuses under any
// defaults, and accepts a trigger that leaves serverAddress to the default.
func TestValidatePrometheus(t *testing.T) {
	for raw, want := range map[string]string{
		`{"query":"up","threshold":"1"}`:                                      "",
		`{"query":"up","threshold":"1","serverAddress":"https://p:9090/x"}`:   "",
		`{"query":"up","threshold":"1","serverAddress":"ftp://p"}`:            `metadata.serverAddress: "ftp://p" is not an absolute http or https URL`,
		`{"query":"up","threshold":"1","serverAddress":"prometheus:9090"}`:    "is not an absolute http or https URL",
		`{"query":"up","threshold":"1","serverAddress":"file:///etc/passwd"}`: "is not an absolute http or https URL",
		`{"query":"up"}`:    "metadata.threshold: is required",
		`{"threshold":"1"}`: "metadata.query is required",
		`{"query":"` + strings.Repeat("q", 20000) + `","threshold":"1"}`:            "metadata.query is 20000 bytes, more than the 16384 allowed",
		`{"query":"up","threshold":"1","pad":"` + strings.Repeat("p", 40000) + `"}`: "more than the 32768 allowed",
	} {
		err := ValidatePrometheus(json.RawMessage(raw))
		switch {
		case want == "" && err != nil:
			t.Errorf("ValidatePrometheus(%.60s): %v", raw, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("ValidatePrometheus(%.60s) = %v, want an error containing %q", raw, err, want)
		case err != nil && (len(err.Error()) > 512 || ReasonOf(err) != ReasonInvalidMetadata):
			t.Errorf("ValidatePrometheus(%.60s): %d-byte error with reason %s", raw, len(err.Error()), ReasonOf(err))
		}
	}
}

// The same metadata always gets the same message, however Go orders a map:
// the message becomes a condition, and a changing one would be rewritten
// on every sync.
func TestMetadataErrorsAreDeterministic(t *testing.T) {
	raw := json.RawMessage(`{"query":"up","threshold":"1","headers":{"B x":"1","A x":"1","C x":"1","D x":"1"}}`)
	first := ValidatePrometheus(raw)
	for range 50 {
		if err := ValidatePrometheus(raw); err == nil || err.Error() != first.Error() {
			t.Fatalf("%v, then %v", first, err)
		}
	}
	if !strings.Contains(first.Error(), `"A x"`) {
		t.Errorf("%v, want the first bad header in order", first)
	}
}

func TestParsePrometheusKeepsSecretsOutOfErrors(t *testing.T) {
	for _, raw := range []string{
		`{"query":"up","serverAddress":"ftp://user:s3cret@p","threshold":"1"}`,
		`{"query":"up","serverAddress":"http://user:s3cret@[::1","threshold":"1"}`,
		`{"query":"up","serverAddress":"http://p","threshold":"1","headers":{"Authorization":"Bearer s3cret\n"}}`,
	} {
		_, err := ParsePrometheus(json.RawMessage(raw), Defaults{})
		if err == nil {
			t.Fatalf("ParsePrometheus(%s) succeeded", raw)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("error leaks the secret: %v", err)
		}
	}
	_, err := ParsePrometheus(json.RawMessage(`{"query":"up","threshold":"1"}`),
		Defaults{ServerAddress: "http://p", AuthorizationHeader: "Bearer s3cret\x00"})
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("bad default authorization: err = %v", err)
	}
}

func TestPrometheusStringRedacts(t *testing.T) {
	p := Prometheus{
		Query: "up", ServerAddress: "https://user:s3cret@prom.example", Threshold: 0.5, UptimeFilter: DefaultUptimeFilter,
		Headers: map[string]string{"Authorization": "Bearer s3cret", "X-Scope-OrgID": "s3cret"},
	}
	for _, s := range []string{p.String(), fmt.Sprint(p), fmt.Sprintf("%v", p)} {
		if strings.Contains(s, "s3cret") {
			t.Errorf("String leaks a secret: %s", s)
		}
		if !strings.Contains(s, "Authorization") || !strings.Contains(s, "X-Scope-OrgID") || !strings.Contains(s, `query="up"`) {
			t.Errorf("String lost useful detail: %s", s)
		}
	}
}

func TestReasonOf(t *testing.T) {
	base := &Error{Reason: ReasonEmptyResult, Err: errors.New("no series")}
	tests := []struct {
		name string
		err  error
		want Reason
	}{
		{"nil", nil, ""},
		{"plain error", errors.New("x"), ReasonUnknown},
		{"direct", base, ReasonEmptyResult},
		{"wrapped", fmt.Errorf("triggers[0]: %w", base), ReasonEmptyResult},
		{"wrapped twice", fmt.Errorf("a: %w", fmt.Errorf("b: %w", base)), ReasonEmptyResult},
		{"joined", errors.Join(errors.New("x"), base), ReasonEmptyResult},
		{"empty reason", &Error{Err: errors.New("x")}, ReasonUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ReasonOf(tt.err); got != tt.want {
				t.Errorf("ReasonOf = %q, want %q", got, tt.want)
			}
		})
	}
	if !errors.Is(fmt.Errorf("w: %w", base), base.Err) {
		t.Error("Error does not unwrap to its cause")
	}
	if got := (&Error{Reason: ReasonTimeout}).Error(); got != "Timeout" {
		t.Errorf("Error without cause = %q", got)
	}
}

func FuzzParsePrometheus(f *testing.F) {
	for _, s := range []string{
		`{"query":"up","serverAddress":"http://p:9090","threshold":"0.5"}`,
		`{"query":"up","threshold":2,"headers":{"A":"b"}}`,
		`{"query":"up","serverAddress":"https://u:p@h/x?y#z","threshold":" 1e3 ","uptimeFilter":"a=\"b\""}`,
		`{"query":" ","threshold":"NaN"}`,
		`{"threshold":"0x1p-2","query":"q"}`,
		`null`, `[]`, `{`, ``, `"x"`,
		// These repeated a 5,000-byte header name or URL in full.
		`{"query":"up","threshold":"1","headers":{"` + strings.Repeat("k", 5000) + `":"v\n"}}`,
		`{"query":"up","threshold":"1","serverAddress":"ftp://` + strings.Repeat("h", 5000) + `"}`,
		`{"query":"up","threshold":"` + strings.Repeat(`\u0001`, 5000) + `"}`,
	} {
		f.Add([]byte(s))
	}
	d := Defaults{ServerAddress: "http://default:9090", AuthorizationHeader: "Bearer t"}
	f.Fuzz(func(t *testing.T, raw []byte) {
		p, err := ParsePrometheus(raw, d)
		// With valid defaults only the metadata can be at fault, and spec
		// validation must see exactly what the poller will.
		if verr := ValidatePrometheus(raw); (verr == nil) != (err == nil) {
			t.Fatalf("ValidatePrometheus(%q) = %v but ParsePrometheus = %v", raw, verr, err)
		}
		if err != nil {
			if ReasonOf(err) != ReasonInvalidMetadata {
				t.Fatalf("error %v has reason %q", err, ReasonOf(err))
			}
			// It becomes an event and part of a condition.
			if n := len(err.Error()); n > 1024 {
				t.Fatalf("%d-byte error for %d bytes of metadata", n, len(raw))
			}
			return
		}
		if len(raw) > v1alpha1.MaxTriggerMetadataBytes || len(p.Query) > v1alpha1.MaxTriggerQueryBytes {
			t.Fatalf("accepted %d bytes of metadata with a %d-byte query", len(raw), len(p.Query))
		}
		if strings.TrimSpace(p.Query) == "" {
			t.Fatalf("parsed an empty query from %q", raw)
		}
		if math.IsNaN(p.Threshold) || math.IsInf(p.Threshold, 0) {
			t.Fatalf("parsed threshold %v from %q", p.Threshold, raw)
		}
		if p.UptimeFilter == "" {
			t.Fatalf("parsed an empty uptime filter from %q", raw)
		}
		if _, err := queryURL(p.ServerAddress, p.Query); err != nil {
			t.Fatalf("parsed server address %q cannot be queried: %v", p.ServerAddress, err)
		}
		for name, value := range p.Headers {
			if err := checkHeader(name, value); err != nil {
				t.Fatalf("parsed an invalid header: %v", err)
			}
		}
	})
}
