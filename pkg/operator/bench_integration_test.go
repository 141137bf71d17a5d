package operator_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/scaleserver"
	"github.com/elasti-dev/elasti/pkg/testenv"
)

// BenchmarkWakeLatency measures, on the local control plane, the time from a
// resolver's POST to (a) the scale write being accepted, which is when the
// operator answers 200, and (b) the ElastiService being back in serve mode,
// which includes the cluster starting a pod. Each b.N runs wakeSamples wakes
// and reports their median and 90th percentile.
func BenchmarkWakeLatency(b *testing.B) {
	const wakeSamples = 20
	e := testenv.New(b)
	e.Opts.ScaleSettleWindow = 200 * time.Millisecond
	op := e.StartOperatorReturning()
	srv := httptest.NewServer(op.ScaleServer.Handler())
	defer srv.Close()
	e.Resolver(1)
	e.Fronted("web", 0)

	var toScaled, toServe []time.Duration
	b.ResetTimer()
	for range b.N {
		for range wakeSamples {
			start := time.Now()
			resp, err := http.Post(srv.URL+scaleserver.Path, "application/json", strings.NewReader(testenv.WakeBody("web", e.NS)))
			if err != nil {
				b.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Fatalf("wake answered %d", resp.StatusCode)
			}
			toScaled = append(toScaled, time.Since(start))
			e.WaitMode("web", elastiv1alpha1.ModeServe)
			toServe = append(toServe, time.Since(start))

			b.StopTimer()
			e.Scale(elastiv1alpha1.KindDeployment, "web", 0)
			e.WaitMode("web", elastiv1alpha1.ModeProxy)
			// Past the server's settle window, so every wake really scales.
			time.Sleep(300 * time.Millisecond)
			b.StartTimer()
		}
	}
	b.StopTimer()
	report := func(name string, d []time.Duration) {
		slices.Sort(d)
		b.ReportMetric(float64(d[len(d)/2].Microseconds())/1000, name+"-p50-ms")
		b.ReportMetric(float64(d[len(d)*9/10].Microseconds())/1000, name+"-p90-ms")
	}
	report("post-to-scaled", toScaled)
	report("post-to-serve", toServe)
	b.ReportMetric(0, "ns/op")
}
