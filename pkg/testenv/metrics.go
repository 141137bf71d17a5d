package testenv

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/elasti-dev/elasti/pkg/localcluster/clustertest"
)

// WatchCount sums the apiserver's open WATCH requests.
func WatchCount(t testing.TB) int {
	t.Helper()
	raw, err := clustertest.Clientset(t).Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(t.Context())
	if err != nil {
		t.Fatalf("apiserver metrics: %v", err)
	}
	n, err := openWatches(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("apiserver metrics: %v", err)
	}
	return n
}

// openWatches sums apiserver_longrunning_requests{verb="WATCH"} in a
// Prometheus text exposition.
func openWatches(metrics io.Reader) (int, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(metrics)
	if err != nil {
		return 0, fmt.Errorf("parse: %w", err)
	}
	total := 0
	for _, m := range families["apiserver_longrunning_requests"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "verb" && l.GetValue() == "WATCH" {
				// A gauge; untyped if the apiserver left out its TYPE line.
				total += int(m.GetGauge().GetValue() + m.GetUntyped().GetValue())
			}
		}
	}
	return total, nil
}
