package e2e

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

func percentile(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

func get(b *testing.B, client *http.Client, url, host string) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		b.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
}

// BenchmarkResolverServeLatency compares a request through the resolver
// with the same request straight to the pod, in serve mode.
func BenchmarkResolverServeLatency(b *testing.B) {
	s := newStackTB(b, nil)
	s.App("web", 1)
	s.ElastiService("web", "web", elastiv1alpha1.KindDeployment, "web")
	s.WaitMode("web", elastiv1alpha1.ModeServe)
	pod := s.ReadyPodIPs("web")[0]
	client := &http.Client{Timeout: 10 * time.Second}
	direct := fmt.Sprintf("http://%s:%d/echo", pod, httpPort)
	via := s.ResolverURL + "/echo"
	host := s.host("web", 80)
	const samples = 500
	for range 50 { // warm both paths' connections
		get(b, client, direct, "")
		get(b, client, via, host)
	}
	b.ResetTimer()
	var d, v []time.Duration
	for range b.N {
		for range samples {
			start := time.Now()
			get(b, client, direct, "")
			d = append(d, time.Since(start))
			start = time.Now()
			get(b, client, via, host)
			v = append(v, time.Since(start))
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(percentile(d, 50).Microseconds()), "direct-p50-µs")
	b.ReportMetric(float64(percentile(v, 50).Microseconds()), "resolver-p50-µs")
	b.ReportMetric(float64((percentile(v, 50) - percentile(d, 50)).Microseconds()), "added-p50-µs")
	b.ReportMetric(float64((percentile(v, 99) - percentile(d, 99)).Microseconds()), "added-p99-µs")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkResolverThroughput measures requests per second through the
// resolver in serve mode, with parallel keep-alive clients.
func BenchmarkResolverThroughput(b *testing.B) {
	s := newStackTB(b, nil)
	s.App("web", 2)
	s.ElastiService("web", "web", elastiv1alpha1.KindDeployment, "web")
	s.WaitMode("web", elastiv1alpha1.ModeServe)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	via := s.ResolverURL + "/echo"
	host := s.host("web", 80)
	b.SetParallelism(8)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			get(b, client, via, host)
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
}

// BenchmarkResolverColdStartOverhead measures how much later than the pod
// itself a held request is answered: from the pod becoming Ready (as the
// cluster reports it) to the response reaching the client.
func BenchmarkResolverColdStartOverhead(b *testing.B) {
	s := newStackTB(b, nil)
	s.App("web", 0)
	s.ElastiService("web", "web", elastiv1alpha1.KindDeployment, "web")
	s.WaitMode("web", elastiv1alpha1.ModeProxy)
	client := &http.Client{Timeout: time.Minute}
	const samples = 10
	var total, podStart, overhead []time.Duration
	for range b.N {
		for range samples {
			w, err := s.Kube.AppsV1().Deployments(s.NS).Watch(s.Ctx(), metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", "web").String()})
			if err != nil {
				b.Fatal(err)
			}
			readyAt := make(chan time.Time, 1)
			go func() {
				for ev := range w.ResultChan() {
					if d, ok := ev.Object.(*appsv1.Deployment); ok && ev.Type != watch.Deleted && d.Status.ReadyReplicas > 0 {
						readyAt <- time.Now()
						return
					}
				}
			}()
			start := time.Now()
			get(b, client, s.ResolverURL+"/echo", s.host("web", 80))
			done := time.Now()
			ready := <-readyAt
			w.Stop()
			total = append(total, done.Sub(start))
			podStart = append(podStart, ready.Sub(start))
			overhead = append(overhead, done.Sub(ready))

			b.StopTimer()
			s.Scale(elastiv1alpha1.KindDeployment, "web", 0)
			s.WaitMode("web", elastiv1alpha1.ModeProxy)
			time.Sleep(300 * time.Millisecond) // past the operator's settle window for a fresh wake
			b.StartTimer()
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(percentile(total, 50).Milliseconds()), "request-p50-ms")
	b.ReportMetric(float64(percentile(podStart, 50).Milliseconds()), "pod-ready-p50-ms")
	b.ReportMetric(float64(percentile(overhead, 50).Milliseconds()), "beyond-pod-p50-ms")
	b.ReportMetric(0, "ns/op")
}
