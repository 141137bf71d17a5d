package directprobe

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/elasti-dev/elasti/pkg/resolver/internal/resolvertest"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2/ktesting"

	"github.com/elasti-dev/elasti/pkg/podcheck/podchecktest"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
)

// probeAnswersFor is how long BenchmarkProbeAnswersCannotFillTheHeap
// keeps its pods answering.
var probeAnswersFor = flag.Duration("probe-answers-for", time.Minute, "how long the probe-answers benchmark runs")

// BenchmarkProbeAnswersCannotFillTheHeap (issue 38, hole 1): maxProbedPods
// pods, four Services in each of four namespaces (each namespace's share),
// answer every direct readiness check with a 9 MiB header, for
// -probe-answers-for (a minute). Each check reads at most
// podcheck.MaxCheckHeaderBytes of it, so the heap stays flat. It reports
// the peak of heap and stacks over the run above the start, and the
// checks made.
func BenchmarkProbeAnswersCannotFillTheHeap(b *testing.B) {
	for range b.N {
		var header bytes.Buffer
		header.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Big: ")
		header.Write(bytes.Repeat([]byte("a"), 9<<20))
		header.WriteString("\r\n\r\n")
		answer := header.Bytes()

		var pods []*corev1.Pod
		var targets []clusterview.UnreadyEndpoint
		var checks int64
		counted := make(chan struct{}, 1<<16)
		for i := range maxProbedPods {
			ip := fmt.Sprintf("127.0.%d.%d", 10+i/200, 1+i%200)
			ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					select {
					case counted <- struct{}{}:
					default:
					}
					go func() {
						defer c.Close()
						_ = c.SetDeadline(time.Now().Add(5 * time.Second))
						buf := make([]byte, 4096)
						_, _ = c.Read(buf) // the request's head
						_, _ = c.Write(answer)
					}()
				}
			}()
			port := int32(ln.Addr().(*net.TCPAddr).Port)
			ns := "ns" + strconv.Itoa(i/maxProbedPodsPerNamespace)
			name := "pod-" + strconv.Itoa(i)
			pod := podchecktest.Pod(ip, port, podchecktest.HTTPProbe("/ready", intstr.FromInt32(port)), nil)
			pod.Namespace, pod.Name, pod.UID = ns, name, types.UID(ns+"/"+name)
			pods = append(pods, pod)
			targets = append(targets, clusterview.UnreadyEndpoint{IP: ip, Port: port, Pod: name, UID: pod.UID})
		}
		_, ctx := ktesting.NewTestContext(b)
		ctx, cancel := context.WithCancel(ctx)
		p := NewProber(ctx, clusterview.NewMemoryEndpoints(), nil, resolvertest.NewFakePods(pods...), Report{FellBack: func(string) {}, Lead: func(time.Duration) {}}, ktesting.NewLogger(b, ktesting.NewConfig()))
		base := resolvertest.MemNow()
		peak := resolvertest.NewPeakSampler()
		for s := 0; s < len(targets); s += maxProbedPodsPerService {
			svc := clusterview.ServiceRef{Namespace: pods[s].Namespace, Name: "svc" + strconv.Itoa(s)}
			defer p.Join(svc)()
			p.Passed(svc, targets[s:s+maxProbedPodsPerService])
		}
		if got := p.Probing(); got != maxProbedPods {
			b.Fatalf("%d pods probed, want %d", got, maxProbedPods)
		}
		deadline := time.After(*probeAnswersFor)
	count:
		for {
			select {
			case <-counted:
				checks++
			case <-deadline:
				break count
			}
		}
		used := peak.Stop()
		after := resolvertest.MemNow()
		cancel()
		p.Close()
		b.ReportMetric(float64(int64(used)-int64(base.GoMem))/(1<<20), "MiB-peak-heap+stacks-growth")
		b.ReportMetric(float64(int64(after.GoMem)-int64(base.GoMem))/(1<<20), "MiB-heap+stacks-growth-after")
		b.ReportMetric(float64(checks), "checks")
		b.ReportMetric(0, "ns/op")
	}
}
