package operator

import (
	"encoding/json"
	"strings"
	"testing"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/triggers"
)

// An ElastiService's trigger metadata is cached with only what the trigger
// parser reads (issue 30, item 5): an unknown key of a megabyte costs the
// cache nothing, and metadata past the operator's bound is kept as a
// marker the parser refuses as it refused the original.
func TestTrimElastiServiceTriggerMetadata(t *testing.T) {
	const known = `"query":"sum(rate(x[1m]))","threshold":"0.5","serverAddress":"http://prom:9090","headers":{"X-A":"1"}`
	fill := func(total int) string {
		head := `{` + known + `,"note":"`
		return head + strings.Repeat("n", total-len(head)-len(`"}`)) + `"}`
	}
	atBound, pastBound := fill(elastiv1alpha1.MaxTriggerMetadataBytes), fill(elastiv1alpha1.MaxTriggerMetadataBytes+1)
	huge := fill(1400 << 10)
	es := &elastiv1alpha1.ElastiService{ObjectMeta: fullMeta("es"), Spec: elastiv1alpha1.ElastiServiceSpec{Triggers: []elastiv1alpha1.ScaleTrigger{
		{Type: "prometheus", Metadata: json.RawMessage(atBound)},
		{Type: "prometheus", Metadata: json.RawMessage(pastBound)},
		{Type: "prometheus", Metadata: json.RawMessage(huge)},
	}}}
	originals := make([]json.RawMessage, len(es.Spec.Triggers))
	for i, tr := range es.Spec.Triggers {
		originals[i] = append(json.RawMessage(nil), tr.Metadata...)
	}
	got := trimmed(t, es)
	for i, tr := range got.Spec.Triggers {
		if len(tr.Metadata) > 256 {
			t.Errorf("trigger %d: %d bytes of metadata cached, want at most 256", i, len(tr.Metadata))
		}
		want, wantErr := triggers.ParsePrometheus(originals[i], triggers.Defaults{})
		p, err := triggers.ParsePrometheus(tr.Metadata, triggers.Defaults{})
		if p.String() != want.String() || (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
			t.Errorf("trigger %d: cached metadata parses to %v, %v; the original to %v, %v", i, p, err, want, wantErr)
		}
	}
	if _, err := triggers.ParsePrometheus(got.Spec.Triggers[0].Metadata, triggers.Defaults{}); err != nil {
		t.Errorf("metadata at the bound is refused after trimming: %v", err)
	}
	for _, i := range []int{1, 2} {
		if _, err := triggers.ParsePrometheus(got.Spec.Triggers[i].Metadata, triggers.Defaults{}); triggers.ReasonOf(err) != triggers.ReasonInvalidMetadata ||
			!strings.Contains(err.Error(), "more than the 32768 allowed") {
			t.Errorf("trigger %d past the bound: cached metadata gives %v, want the size refused", i, err)
		}
	}
}
