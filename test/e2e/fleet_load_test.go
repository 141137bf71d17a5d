package e2e

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/elasti-dev/elasti/test/localcluster/clustertest"
	"github.com/elasti-dev/elasti/test/testenv"
)

// loadSampleEvery is how often a fleet phase prints what the operator and
// the apiserver were doing.
const loadSampleEvery = 10 * time.Second

// loadSample is one scrape of the two processes whose pace decides how
// fast a fleet is fronted: the operator (its queue and its requests) and
// the apiserver (every client's requests, by resource and verb).
type loadSample struct {
	at       time.Time
	operator map[string]*dto.MetricFamily
	api      map[string]*dto.MetricFamily
}

// sampleFleetLoad prints, every loadSampleEvery until the returned stop
// is called, one line of the phase's load: the operator's ElastiService
// queue (waiting, synced a second), its mean apiserver latency by verb,
// the apiserver's busiest resource/verb pairs a second, and its mean
// latency for writes. A phase that fronts slowly then shows whether the
// operator waited on its queue or on the apiserver, and who else was
// asking the apiserver at that time.
func sampleFleetLoad(b testing.TB, op fleetOperator, phase string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	api := clustertest.Clientset(b).Discovery().RESTClient()
	scrape := func() (loadSample, error) {
		s := loadSample{at: time.Now()}
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(op.metrics)
		if err != nil {
			return s, err
		}
		s.operator, err = testenv.ScrapeFamilies(resp.Body)
		resp.Body.Close()
		if err != nil {
			return s, err
		}
		raw, err := api.Get().AbsPath("/metrics").DoRaw(ctx)
		if err != nil {
			return s, err
		}
		s.api, err = testenv.ScrapeFamilies(strings.NewReader(string(raw)))
		return s, err
	}
	go func() {
		defer close(done)
		prev, err := scrape()
		tick := time.NewTicker(loadSampleEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			cur, scrapeErr := scrape()
			switch {
			case scrapeErr != nil:
				fmt.Fprintf(os.Stderr, "  load %s: scrape: %v\n", phase, scrapeErr)
				continue
			case err == nil:
				fmt.Fprintf(os.Stderr, "  load %s %s: %s\n", phase, cur.at.Format("15:04:05"), describeLoad(prev, cur))
			}
			prev, err = cur, nil
		}
	}()
	return func() { cancel(); <-done }
}

// describeLoad is one line of what changed between two samples.
func describeLoad(prev, cur loadSample) string {
	secs := cur.at.Sub(prev.at).Seconds()
	queue := func(l map[string]string) bool { return l["name"] == "elastiservice" }
	work := "workqueue_work_duration_seconds"
	synced := (metricCount(cur.operator[work], queue) - metricCount(prev.operator[work], queue)) / secs
	waiting := make([]string, 0, len(testenv.OperatorQueues))
	for _, name := range testenv.OperatorQueues {
		depth := metricSum(cur.operator["workqueue_depth"], func(l map[string]string) bool { return l["name"] == name })
		waiting = append(waiting, fmt.Sprintf("%s %.0f", name, depth))
	}
	parts := []string{fmt.Sprintf("operator waiting: %s; elastiservice synced %.0f/s", strings.Join(waiting, ", "), synced)}
	var verbs []string
	for _, verb := range []string{"POST", "PUT", "PATCH", "DELETE", "GET"} {
		only := func(l map[string]string) bool { return l["verb"] == verb }
		n := metricCount(cur.operator["rest_client_request_duration_seconds"], only) - metricCount(prev.operator["rest_client_request_duration_seconds"], only)
		if n == 0 {
			continue
		}
		sum := metricSum(cur.operator["rest_client_request_duration_seconds"], only) - metricSum(prev.operator["rest_client_request_duration_seconds"], only)
		verbs = append(verbs, fmt.Sprintf("%s %.0f/s %.0f ms (%s)", verb, n/secs, 1000*sum/n, byResource(prev.operator, cur.operator, verb, secs)))
	}
	parts = append(parts, "operator requests: "+cmp.Or(strings.Join(verbs, ", "), "none"))
	parts = append(parts, "apiserver: "+busiest(prev.api, cur.api, secs))
	return strings.Join(parts, "; ")
}

// byResource names the operator's three busiest resources for one verb
// between two scrapes, with their rates.
func byResource(prev, cur map[string]*dto.MetricFamily, verb string, secs float64) string {
	family := "rest_client_request_duration_seconds"
	rates := map[string]float64{}
	for _, m := range cur[family].GetMetric() {
		if l := labels(m); l["verb"] == verb {
			rates[l["resource"]] += float64(m.GetHistogram().GetSampleCount())
		}
	}
	for _, m := range prev[family].GetMetric() {
		if l := labels(m); l["verb"] == verb {
			rates[l["resource"]] -= float64(m.GetHistogram().GetSampleCount())
		}
	}
	names := slices.Collect(maps.Keys(rates))
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(rates[b], rates[a]), cmp.Compare(a, b)) })
	var top []string
	for _, name := range names[:min(3, len(names))] {
		if rates[name] > 0 {
			top = append(top, fmt.Sprintf("%s %.0f/s", name, rates[name]/secs))
		}
	}
	return strings.Join(top, ", ")
}

// busiest names the apiserver's five busiest resource/verb pairs between
// two scrapes, and its mean latency for writes.
func busiest(prev, cur map[string]*dto.MetricFamily, secs float64) string {
	counts := func(f *dto.MetricFamily) map[string]float64 {
		out := map[string]float64{}
		for _, m := range f.GetMetric() {
			l := labels(m)
			if l["verb"] == "WATCH" || l["verb"] == "CONNECT" {
				continue
			}
			out[l["resource"]+" "+l["verb"]] += m.GetCounter().GetValue()
		}
		return out
	}
	before, after := counts(prev["apiserver_request_total"]), counts(cur["apiserver_request_total"])
	type pair struct {
		name string
		rate float64
	}
	var pairs []pair
	for name, v := range after {
		if r := (v - before[name]) / secs; r >= 0.5 {
			pairs = append(pairs, pair{name, r})
		}
	}
	slices.SortFunc(pairs, func(a, b pair) int { return cmp.Compare(b.rate, a.rate) })
	var out []string
	for _, p := range pairs[:min(len(pairs), 5)] {
		out = append(out, fmt.Sprintf("%s %.0f/s", p.name, p.rate))
	}
	writes := func(l map[string]string) bool {
		return l["verb"] == "POST" || l["verb"] == "PUT" || l["verb"] == "PATCH" || l["verb"] == "DELETE"
	}
	family := "apiserver_request_duration_seconds"
	if n := metricCount(cur[family], writes) - metricCount(prev[family], writes); n > 0 {
		out = append(out, fmt.Sprintf("writes %.0f ms mean", 1000*(metricSum(cur[family], writes)-metricSum(prev[family], writes))/n))
	}
	return cmp.Or(strings.Join(out, ", "), "idle")
}

func labels(m *dto.Metric) map[string]string {
	out := make(map[string]string, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// metricSum adds up the value (a histogram's sum) of f's series that keep
// says to.
func metricSum(f *dto.MetricFamily, keep func(map[string]string) bool) float64 {
	total := 0.0
	for _, m := range f.GetMetric() {
		if keep(labels(m)) {
			total += m.GetGauge().GetValue() + m.GetCounter().GetValue() + m.GetUntyped().GetValue() + m.GetHistogram().GetSampleSum()
		}
	}
	return total
}

// metricCount adds up the sample counts of f's histograms that keep says
// to (a counter's value for others).
func metricCount(f *dto.MetricFamily, keep func(map[string]string) bool) float64 {
	total := 0.0
	for _, m := range f.GetMetric() {
		if keep(labels(m)) {
			total += float64(m.GetHistogram().GetSampleCount()) + m.GetCounter().GetValue()
		}
	}
	return total
}
