package traffic

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/elasti-dev/elasti/pkg/localcluster/realnet"
)

const (
	// latencyRequests is how many requests each latency figure is made of.
	latencyRequests = 300
	// wakeCycles is how many sleep/wake rounds the cold-start figure is made of.
	wakeCycles = 5
)

// BenchmarkTrafficPath measures what a client pod sees through kube-proxy,
// CoreDNS and the ingress controller, with elasti installed from
// manifests/:
//   - serve-name-p50/p99-µs: a request by full DNS name, straight to the pod;
//   - serve-ingress-p50/p99-µs: the same through the ingress controller;
//   - wake-p50/max-ms: at zero, from the client's request to the new pod's
//     answer, by DNS name (the resolver holds it, the operator scales, kwok's
//     pod is Ready at once, so this is elasti's own cold-start overhead).
//
// Run it with `make bench` (one iteration is the whole measurement).
func BenchmarkTrafficPath(b *testing.B) {
	for range b.N {
		s := newScenario(b)
		byName := realnet.Request{URL: "http://" + s.fqdn() + "/", Timeout: quickTimeout, Repeat: latencyRequests}
		report(b, "serve-name", s.do(byName))

		s.ingress("bench", s.fqdn())
		viaIngress := realnet.Request{URL: fmt.Sprintf("http://%s.%s/", realnet.IngressService, realnet.IngressNamespace), Host: s.fqdn()}
		s.waitIngressRoutes(viaIngress)
		viaIngress.Timeout, viaIngress.Repeat = quickTimeout, latencyRequests
		report(b, "serve-ingress", s.do(viaIngress))

		var wakes []time.Duration
		for range wakeCycles {
			s.sleep()
			s.waitIngressFollows() // keeps the bench's own ingress from dialling a gone pod
			resp := s.do(realnet.Request{URL: "http://" + s.fqdn() + "/", Timeout: wakeTimeout})
			s.expectWoken(resp)
			wakes = append(wakes, resp.Duration)
		}
		slices.Sort(wakes)
		b.ReportMetric(float64(wakes[len(wakes)/2].Microseconds())/1000, "wake-p50-ms")
		b.ReportMetric(float64(wakes[len(wakes)-1].Microseconds())/1000, "wake-max-ms")
	}
}

func report(b *testing.B, name string, resp realnet.Response) {
	b.Helper()
	if resp.Err != "" || len(resp.Repeats) != latencyRequests {
		b.Fatalf("%s: %d of %d requests: %s", name, len(resp.Repeats), latencyRequests, resp)
	}
	d := slices.Clone(resp.Repeats)
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Microseconds()), name+"-p50-µs")
	b.ReportMetric(float64(d[len(d)*99/100].Microseconds()), name+"-p99-µs")
}
