package traffic

import (
	"fmt"
	"slices"
	"testing"
	"time"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/test/localcluster/realnet"
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
		viaIngress := realnet.Request{URL: "http://" + ingressAddr + "/", Host: s.fqdn()}
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

// BenchmarkResolverRouting measures the resolver's two ways of knowing the
// Service, from a client pod straight to a resolver pod while the app is
// awake (so nothing is held and the figure is the resolver's own cost):
//   - resolver-port-p50/p99-µs: on the Service port's own resolver port,
//     with a Host that names nothing;
//   - resolver-host-p50/p99-µs: on the shared port 8012, Host routing;
//   - tcp-wake-p50/max-ms: at zero, a raw TCP client by short name until
//     the new pod's echo (kwok's pod is Ready at once, so this is the TCP
//     path's own cold-start overhead).
func BenchmarkResolverRouting(b *testing.B) {
	for range b.N {
		s := newScenarioWithPorts(b, protocolPorts...)
		startProtocolBackends(b, s.bed)
		s.waitResolverPorts(1 + len(protocolPorts))
		resolverIP := s.resolverPodIP()
		port := s.resolverPortFor(80)
		byPort := realnet.Request{URL: fmt.Sprintf("http://%s:%d/", resolverIP, port), Host: "anything.example", Timeout: quickTimeout, Repeat: latencyRequests}
		report(b, "resolver-port", s.do(byPort))
		byHost := realnet.Request{URL: fmt.Sprintf("http://%s:8012/", resolverIP), Host: s.fqdn(), Timeout: quickTimeout, Repeat: latencyRequests}
		report(b, "resolver-host", s.do(byHost))

		var wakes []time.Duration
		for range wakeCycles {
			s.sleep()
			resp := s.wakeByTCP()
			s.e.WaitMode(app, elastiv1alpha1.ModeServe)
			wakes = append(wakes, resp.Duration)
		}
		slices.Sort(wakes)
		b.ReportMetric(float64(wakes[len(wakes)/2].Microseconds())/1000, "tcp-wake-p50-ms")
		b.ReportMetric(float64(wakes[len(wakes)-1].Microseconds())/1000, "tcp-wake-max-ms")
	}
}
