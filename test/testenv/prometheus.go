package testenv

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

// Answers a FakePrometheus can give instead of a well-formed one.
const (
	PrometheusHealthy    = ""
	PrometheusGarbage    = "garbage"
	PrometheusTwoSeries  = "two-series"
	PrometheusServerDown = "error-500"
)

// FakePrometheus speaks enough of /api/v1/query for the triggers, on
// loopback: the uptime query (min_over_time) gets Up, every other query
// gets Value.
type FakePrometheus struct {
	*httptest.Server
	mu    sync.Mutex
	value string
	up    string
	mode  string
}

// NewFakePrometheus starts one, idle (value 0) and up, until the test ends.
func NewFakePrometheus(t testing.TB) *FakePrometheus {
	p := &FakePrometheus{value: "0", up: "1"}
	p.Server = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.Close)
	return p
}

// Set changes what every following query is answered.
func (p *FakePrometheus) Set(value, up, mode string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.value, p.up, p.mode = value, up, mode
}

func (p *FakePrometheus) serve(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	value, up, mode := p.value, p.up, p.mode
	p.mu.Unlock()
	if r.URL.Path != "/api/v1/query" {
		http.NotFound(w, r)
		return
	}
	if strings.HasPrefix(r.URL.Query().Get("query"), "min_over_time(") {
		value = up
	}
	switch mode {
	case PrometheusGarbage:
		fmt.Fprint(w, `{"status":"success","data":{"resultType":"vector","result":[{"value":[1, "not json`)
		return
	case PrometheusServerDown:
		http.Error(w, "storage unavailable", http.StatusInternalServerError)
		return
	case PrometheusTwoSeries:
		fmt.Fprintf(w, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":"1"},"value":[1,"%s"]},{"metric":{"a":"2"},"value":[1,"%s"]}]}}`, value, value)
		return
	}
	fmt.Fprintf(w, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"%s"]}]}}`, value)
}

// IdleTrigger is one Prometheus trigger whose query a FakePrometheus
// answers with its Value: idle while Value is below threshold.
func IdleTrigger(threshold string) []elastiv1alpha1.ScaleTrigger {
	return []elastiv1alpha1.ScaleTrigger{{Type: "prometheus",
		Metadata: []byte(`{"query":"sum(rate(http_requests_total[1m]))","threshold":"` + threshold + `"}`)}}
}
