package operator_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/endpointready"
	"github.com/elasti-dev/elasti/pkg/wakeserver"
	"github.com/elasti-dev/elasti/test/testenv"
)

// BenchmarkWakeLatency measures, on the local control plane, the time from a
// resolver's POST to (a) the scale write being accepted, which is when the
// operator answers 200, and (b) the ElastiService being back in serve mode,
// which includes the cluster starting a pod. Each b.N runs wakeSamples wakes
// and reports their median and 90th percentile.
//
// Between wakes the test scales the target to zero by hand, as a user or
// another autoscaler would: no make-before-break is possible then, so it
// also reports (c) the time from that write until the resolver slice is
// written with a ready resolver endpoint, the bound on how long such a
// Service can be dark.
func BenchmarkWakeLatency(b *testing.B) {
	const wakeSamples = 20
	e := testenv.New(b)
	e.Opts.WakeSettleWindow = 200 * time.Millisecond
	op := e.StartOperatorReturning()
	srv := httptest.NewServer(op.WakeServer.Handler())
	defer srv.Close()
	e.Resolver(1)
	e.Fronted("web", 0)

	var toScaled, toServe, handToFront []time.Duration
	b.ResetTimer()
	for range b.N {
		for range wakeSamples {
			start := time.Now()
			resp, err := http.Post(srv.URL+wakeserver.Path, "application/json", strings.NewReader(testenv.WakeBody("web", e.NS)))
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
			handToFront = append(handToFront, scaleToZeroByHand(b, e, "web"))
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
	report("hand-scale-to-front", handToFront)
	b.ReportMetric(float64(slices.Max(handToFront).Microseconds())/1000, "hand-scale-to-front-max-ms")
	b.ReportMetric(0, "ns/op")
}

// scaleToZeroByHand scales the Deployment behind service to zero and
// returns how long after the write the resolver slice had a ready
// endpoint. It polls every 2 ms, so that is the figure's resolution.
func scaleToZeroByHand(b *testing.B, e *testenv.Env, service string) time.Duration {
	b.Helper()
	start := time.Now()
	e.Scale(elastiv1alpha1.KindDeployment, service, 0)
	deadline := start.Add(testenv.WaitTimeout)
	for time.Now().Before(deadline) {
		if slice, err := e.ResolverSlice(service); err == nil && slices.ContainsFunc(slice.Endpoints, endpointready.Serving) {
			return time.Since(start)
		}
		time.Sleep(2 * time.Millisecond)
	}
	b.Fatalf("no ready resolver endpoint in front of %s %s after it was scaled to zero by hand", testenv.WaitTimeout, service)
	return 0
}
