package testenv

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/elasti-dev/elasti/test/localcluster/clustertest"
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
	families, err := ScrapeFamilies(metrics)
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

// OperatorQueues is the operator's four work queues (see pkg/controller).
var OperatorQueues = []string{"elastiservice", "scaletarget", "endpointslice", "privateservice"}

// QueuesSettled reports whether an operator has synced everything it was
// given, from its workqueue metrics: every queue is empty and has finished
// as many items as it took in (workqueue_work_duration_seconds counts an
// item when its sync returns; workqueue_adds_total counts every key
// queued that was not already waiting), and the ElastiService queue took in
// at least elastiServices keys. Its informer queues every ElastiService once
// on its first list, so each has then been synced at least once since the
// operator started. A key queued again later, by an event or a requeue,
// unsettles it until that sync is done too. The string says what was seen.
func QueuesSettled(families map[string]*dto.MetricFamily, elastiServices int) (bool, string) {
	value := func(family, queue string) float64 {
		for _, m := range families[family].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" && l.GetValue() == queue {
					return m.GetGauge().GetValue() + m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
				}
			}
		}
		return 0
	}
	settled := true
	var seen []string
	for _, q := range OperatorQueues {
		adds, done, depth := value("workqueue_adds_total", q), value("workqueue_work_duration_seconds", q), value("workqueue_depth", q)
		settled = settled && depth == 0 && done == adds
		seen = append(seen, fmt.Sprintf("%s: %.0f added, %.0f done, %.0f waiting", q, adds, done, depth))
	}
	settled = settled && value("workqueue_adds_total", OperatorQueues[0]) >= float64(elastiServices)
	return settled, strings.Join(seen, "; ")
}

// GatheredFamilies indexes what a registry's Gather returned by name.
func GatheredFamilies(list []*dto.MetricFamily) map[string]*dto.MetricFamily {
	out := make(map[string]*dto.MetricFamily, len(list))
	for _, f := range list {
		out[f.GetName()] = f
	}
	return out
}

// ScrapeFamilies reads a Prometheus text exposition, such as an operator
// process's /metrics.
func ScrapeFamilies(r io.Reader) (map[string]*dto.MetricFamily, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(r)
}
