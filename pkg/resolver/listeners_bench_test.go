package resolver

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"

	v1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
	"github.com/elasti-dev/elasti/pkg/resolver/identify"
	"github.com/elasti-dev/elasti/pkg/resolver/internal/resolvertest"
)

// benchPorts is the number of resolver ports BenchmarkPortListeners opens.
const benchPorts = 1000

// BenchmarkPortListeners assigns 1,000 resolver ports at once and reports
// the time until every one listens (ports-listening-ms) and the heap and
// goroutines each listener costs (heap-bytes/listener, goroutines/listener).
// It listens on loopback only.
func BenchmarkPortListeners(b *testing.B) {
	ports := freePorts(b, benchPorts)
	for range b.N {
		ctx := klog.NewContext(context.Background(), logr.Discard())
		r, err := New(ctx, Config{OperatorURL: "http://127.0.0.1:1"}, Options{Endpoints: clusterview.NewMemoryEndpoints()})
		if err != nil {
			b.Fatal(err)
		}
		routes := identify.NewRouteTable(ctx, resolvertest.AnyPort)
		pl := r.NewPortListeners(routes, identify.PortListenersOptions{Host: "127.0.0.1"})
		runCtx, cancel := context.WithCancel(context.Background())
		go pl.Run(runCtx)

		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		goroutines := runtime.NumGoroutine()
		began := time.Now()
		for i, p := range ports {
			es := resolvertest.ESWithPorts(fmt.Sprintf("svc-%d", i), v1.ResolverPort{Service: fmt.Sprintf("svc-%d", i), Port: 80, ResolverPort: p})
			routes.Upsert(es)
		}
		for len(pl.Listening()) < benchPorts {
			if time.Since(began) > time.Minute {
				b.Fatalf("only %d of %d ports listen after a minute", len(pl.Listening()), benchPorts)
			}
			time.Sleep(time.Millisecond)
		}
		took := time.Since(began)
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(took.Microseconds())/1000, "ports-listening-ms")
		b.ReportMetric(float64(int64(after.HeapInuse)-int64(before.HeapInuse))/benchPorts, "heap-bytes/listener")
		b.ReportMetric(float64(runtime.NumGoroutine()-goroutines)/benchPorts, "goroutines/listener")

		cancel()
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = pl.Shutdown(sctx)
		scancel()
		r.Close()
	}
}

// freePorts finds n loopback ports that are free now, outside Linux's
// ephemeral range so outgoing connections do not take them meanwhile.
func freePorts(b *testing.B, n int) []int32 {
	b.Helper()
	var out []int32
	for p := 20000; p < 30000 && len(out) < n; p++ {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		_ = ln.Close()
		out = append(out, int32(p))
	}
	if len(out) < n {
		b.Fatalf("found %d free ports, want %d", len(out), n)
	}
	return out
}
