package e2e

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/test/testenv"
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
	s := newStack(b)
	s.FrontedAfterProxy("web", 1)
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
// resolver in serve mode: throughputRequests requests from 8 keep-alive
// clients per b.N.
func BenchmarkResolverThroughput(b *testing.B) {
	const throughputRequests, clients = 20000, 8
	s := newStack(b)
	s.FrontedAfterProxy("web", 2)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	via := s.ResolverURL + "/echo"
	host := s.host("web", 80)
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if err := testenv.Parallel(throughputRequests, clients, func(int) error {
			req, _ := http.NewRequest(http.MethodGet, via, nil)
			req.Host = host
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("status %d", resp.StatusCode)
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*throughputRequests)/time.Since(start).Seconds(), "req/s")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkResolverColdStartOverhead measures how much later than the pod
// itself a held request is answered: from the pod becoming Ready (as the
// cluster reports it) to the response reaching the client. The pods of a
// previous wake are gone before each sample, so only a new pod counts.
func BenchmarkResolverColdStartOverhead(b *testing.B) {
	s := newStack(b)
	s.Fronted("web", 0)
	client := &http.Client{Timeout: time.Minute}
	const samples = 10
	var total, podStart, overhead []time.Duration
	for range b.N {
		for range samples {
			// The cluster's own signal: the first pod's Ready condition.
			w, err := s.Kube.CoreV1().Pods(s.NS).Watch(s.Ctx(), metav1.ListOptions{LabelSelector: "app=web"})
			if err != nil {
				b.Fatal(err)
			}
			readyAt := make(chan time.Time, 1)
			go func() {
				for ev := range w.ResultChan() {
					if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type != watch.Deleted && p.DeletionTimestamp == nil && testenv.PodReady(p) {
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
			s.Eventually("the old pods gone", func() (bool, string) {
				pods, err := s.Kube.CoreV1().Pods(s.NS).List(s.Ctx(), metav1.ListOptions{LabelSelector: "app=web"})
				return err == nil && len(pods.Items) == 0, fmt.Sprintf("%v", err)
			})
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
