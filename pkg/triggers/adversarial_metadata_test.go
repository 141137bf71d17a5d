package triggers

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

// metadataWith is valid metadata with extra keys and the given fields.
func metadataWith(t *testing.T, fields map[string]any) json.RawMessage {
	t.Helper()
	m := map[string]any{"query": "q", "threshold": "1"}
	for k, v := range fields {
		m[k] = v
	}
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func headersOf(n, valueLen int) map[string]string {
	h := map[string]string{}
	for i := range n {
		h[fmt.Sprintf("X-H%d", i)] = strings.Repeat("v", valueLen)
	}
	return h
}

// Each bound on trigger metadata (issue 30, item 5): at the bound accepted,
// one past it refused with InvalidMetadata, by ParsePrometheus and by
// ValidatePrometheus (pkg/validation) alike. Lengths count characters, as
// the CRD schema's maxLength does.
func TestMetadataBounds(t *testing.T) {
	extraKeys := func(n int) map[string]any {
		m := map[string]any{}
		for i := range n {
			m[fmt.Sprintf("k%d", i)] = i
		}
		return m
	}
	pad := func(n int) string { return strings.Repeat("é", n) } // two bytes, one character
	for _, tt := range []struct {
		name     string
		at, past map[string]any
	}{
		{"keys", extraKeys(v1alpha1.MaxTriggerMetadataKeys - 2), extraKeys(v1alpha1.MaxTriggerMetadataKeys - 1)},
		{"headers", map[string]any{"headers": headersOf(v1alpha1.MaxTriggerHeaders, 1)}, map[string]any{"headers": headersOf(v1alpha1.MaxTriggerHeaders+1, 1)}},
		{"header value", map[string]any{"headers": map[string]string{"X-Token": pad(v1alpha1.MaxTriggerHeaderValueLength)}},
			map[string]any{"headers": map[string]string{"X-Token": pad(v1alpha1.MaxTriggerHeaderValueLength + 1)}}},
		{"serverAddress", map[string]any{"serverAddress": "http://p/" + pad(v1alpha1.MaxTriggerServerAddressLength-len("http://p/"))},
			map[string]any{"serverAddress": "http://p/" + pad(v1alpha1.MaxTriggerServerAddressLength-len("http://p/")+1)}},
		{"uptimeFilter", map[string]any{"uptimeFilter": pad(v1alpha1.MaxTriggerUptimeFilterLength)}, map[string]any{"uptimeFilter": pad(v1alpha1.MaxTriggerUptimeFilterLength + 1)}},
	} {
		at, past := metadataWith(t, tt.at), metadataWith(t, tt.past)
		if _, err := ParsePrometheus(at, Defaults{ServerAddress: "http://p"}); err != nil {
			t.Errorf("%s at the bound: %v", tt.name, err)
		}
		if err := ValidatePrometheus(at); err != nil {
			t.Errorf("%s at the bound: ValidatePrometheus: %v", tt.name, err)
		}
		if _, err := ParsePrometheus(past, Defaults{ServerAddress: "http://p"}); ReasonOf(err) != ReasonInvalidMetadata || !strings.Contains(err.Error(), "more than the") {
			t.Errorf("%s one past the bound: %v, want InvalidMetadata", tt.name, err)
		}
		if err := ValidatePrometheus(past); err == nil {
			t.Errorf("%s one past the bound: ValidatePrometheus accepted it", tt.name)
		}
	}
}

// The cache keeps of metadata what the parser reads, and the parser says
// the same of the trimmed metadata as of the original: the same trigger,
// or the same error.
func TestTrimMetadata(t *testing.T) {
	big := strings.Repeat("x", 1400<<10)
	for _, tt := range []struct {
		name    string
		raw     string
		maxSize int
	}{
		{"unknown keys dropped", `{"query":"up","threshold":"1","note":"` + strings.Repeat("n", 20000) + `","extra":{"a":[1,2,3]}}`, 200},
		{"megabyte unknown key", `{"query":"up","threshold":"1","blob":"` + big + `"}`, 64},
		{"one past the byte bound", `{"query":"up","threshold":"1","pad":"` + strings.Repeat("p", v1alpha1.MaxTriggerMetadataBytes-len(`{"query":"up","threshold":"1","pad":""}`)+1) + `"}`, 64},
		{"at the byte bound", `{"query":"up","threshold":"1","pad":"` + strings.Repeat("p", v1alpha1.MaxTriggerMetadataBytes-len(`{"query":"up","threshold":"1","pad":""}`)) + `"}`, 200},
		{"case-folded keys", `{"Query":"a","query":"b","THRESHOLD":2,"Headers":{"X-A":"1"}}`, 200},
		{"not an object", `[1,2,3]`, 16},
		{"a string", `"x"`, 16},
		{"wrong types", `{"query":1,"threshold":"1","pad":"` + strings.Repeat("p", 1000) + `"}`, 2000},
		{"too many keys", `{"query":"q","threshold":"1","a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15}`, 200},
		{"headers", `{"query":"q","threshold":"1","serverAddress":"http://p:1","uptimeFilter":"job=\"x\"","headers":{"X-Scope-OrgID":"a","Host":"p:1"},"z":"` + strings.Repeat("z", 3000) + `"}`, 200},
		{"a forged marker", `{"elasti.dev/trimmed-bytes":40000}`, 64},
	} {
		raw := json.RawMessage(tt.raw)
		got := TrimMetadata(raw)
		if len(got) > tt.maxSize {
			t.Errorf("%s: trimmed to %d bytes, want at most %d: %.200s", tt.name, len(got), tt.maxSize, got)
		}
		for _, d := range []Defaults{{}, {ServerAddress: "http://p:1"}} {
			want, wantErr := ParsePrometheus(raw, d)
			p, err := ParsePrometheus(got, d)
			if fmt.Sprint(err) != fmt.Sprint(wantErr) || !reflect.DeepEqual(p, want) {
				t.Errorf("%s: trimmed metadata parses to %+v, %v; the original to %+v, %v", tt.name, p, err, want, wantErr)
			}
			if (ValidatePrometheus(got) == nil) != (ValidatePrometheus(raw) == nil) {
				t.Errorf("%s: ValidatePrometheus differs after trimming", tt.name)
			}
		}
	}
}

// FuzzTrimMetadataKeepsTheVerdict: for any metadata, the trimmed form is no
// larger (but for the fixed marker) and parses to the same trigger or error.
func FuzzTrimMetadataKeepsTheVerdict(f *testing.F) {
	for _, seed := range []string{
		`{"query":"up","threshold":"1"}`,
		`{"query":"up","threshold":1.5,"serverAddress":"http://p:1","headers":{"A":"b"},"x":null}`,
		`{"QUERY":"a","Query":"b"}`,
		`{"query":"up","threshold":"1","headers":{"a":"1","A":"2"}}`,
		`{"elasti.dev/trimmed-bytes":99999999}`,
		`null`, `{}`, `[]`, `{"query":"\u00e9"}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got := TrimMetadata(json.RawMessage(raw))
		if len(got) > len(raw) && len(got) > 64 {
			t.Fatalf("trimmed %d bytes to %d", len(raw), len(got))
		}
		for _, d := range []Defaults{{}, {ServerAddress: "http://p:1", AuthorizationHeader: "Bearer x"}} {
			want, wantErr := ParsePrometheus(json.RawMessage(raw), d)
			p, err := ParsePrometheus(got, d)
			if fmt.Sprint(err) != fmt.Sprint(wantErr) || !reflect.DeepEqual(p, want) {
				t.Fatalf("%q trimmed to %q parses to %+v, %v; the original to %+v, %v", raw, got, p, err, want, wantErr)
			}
		}
	})
}
