package resolver

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/klog/v2"

	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
	"github.com/elasti-dev/elasti/pkg/resolver/internal/resolvertest"
)

// heldMemoryCounts are the held requests BenchmarkHeldMemory measures at:
// up to the default --global-queue.
var heldMemoryCounts = []int{250, 500, 1000, 2000}

// BenchmarkHeldMemory is the resolver's memory against the requests it
// holds (issue 41's picture, docs/benchmarks.md): for each count, a
// resolver holds that many plain GET requests, each on its own
// connection, for one Service whose pods never come, and reports its heap
// and stacks after a collection, first once every request is held and
// again after they stayed held for heldMemoryStay: holding costs the same
// per request at any count, and holding longer costs nothing more.
// FilledBounds is the same resolver with every bound full (large headers,
// bodies, spliced connections).
func BenchmarkHeldMemory(b *testing.B) {
	for _, n := range heldMemoryCounts {
		b.Run(fmt.Sprintf("held=%d", n), func(b *testing.B) { benchmarkHeldMemory(b, n) })
	}
}

// heldMemoryStay is how long the requests stay held between the two
// readings.
const heldMemoryStay = 5 * time.Second

func benchmarkHeldMemory(b *testing.B, held int) {
	ctx := klog.NewContext(context.Background(), logr.Discard())
	op := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer op.Close()
	cfg := DefaultConfig()
	cfg.OperatorURL = op.URL
	cfg.RequestTimeout = 10 * time.Minute
	cfg.GlobalQueue = held
	cfg.PerServiceQueue = held
	cfg.PerSourceQueue = held // every client here is 127.0.0.1
	cfg.MaxConnectionsPerSource = held
	cfg.NamespaceShare = 100
	r, err := New(ctx, cfg, Options{Endpoints: clusterview.NewMemoryEndpoints()})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	proxy := serveProxy(b, r)

	var open []net.Conn
	defer func() {
		for _, c := range open {
			_ = c.Close()
		}
	}()
	base := resolvertest.MemNow()
	for i := range held {
		c, err := net.DialTimeout("tcp", proxy, 5*time.Second)
		if err != nil {
			b.Fatalf("connection %d: %v", i+1, err)
		}
		open = append(open, c)
		_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(c, "GET /held HTTP/1.1\r\nHost: web.bench\r\nUser-Agent: bench\r\n\r\n"); err != nil {
			b.Fatalf("connection %d: %v", i+1, err)
		}
	}
	for deadline := time.Now().Add(time.Minute); testutil.ToFloat64(r.metrics.Hold.Queued) != float64(held); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("%v of %d requests held after a minute", testutil.ToFloat64(r.metrics.Hold.Queued), held)
		}
	}
	allHeld := resolvertest.MemNow()
	time.Sleep(heldMemoryStay)
	later := resolvertest.MemNow()
	if q := testutil.ToFloat64(r.metrics.Hold.Queued); q != float64(held) {
		b.Fatalf("%v of %d requests still held after %s: the measure is not of %d held", q, held, heldMemoryStay, held)
	}
	for range b.N {
		// The fill above is the measure; b.N only repeats the report.
	}
	mib := func(v uint64) float64 { return float64(v) / (1 << 20) }
	b.ReportMetric(mib(allHeld.GoMem-base.GoMem), "MiB-heap+stacks")
	b.ReportMetric(float64(allHeld.GoMem-base.GoMem)/float64(held)/1024, "KiB/held-request")
	b.ReportMetric(mib(later.GoMem)-mib(allHeld.GoMem), "MiB-growth-while-held")
	b.ReportMetric(mib(allHeld.RSS), "MiB-rss-process")
}
