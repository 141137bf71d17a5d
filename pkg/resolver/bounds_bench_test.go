package resolver

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"k8s.io/klog/v2"

	v1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/resolver/admission"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
	"github.com/elasti-dev/elasti/pkg/resolver/forward"
	"github.com/elasti-dev/elasti/pkg/resolver/identify"
	"github.com/elasti-dev/elasti/pkg/resolver/internal/resolvertest"
)

// filledBoundsShare divides every default bound BenchmarkFilledBounds
// fills. At 1 it fills the defaults in full, which takes about 10,000
// file descriptors in one process (both ends of every connection, and of
// every splice). Raise it where that is too many: every cost grows
// linearly with its bound, so the full figure is the measured one times
// filledBoundsShare, which MiB-extrapolated reports.
const filledBoundsShare = 1

// BenchmarkFilledBounds fills the resolver's bounds and reports its
// memory: "held" fills the queue, the held bytes, the buffered bodies and
// every connection; "h2-stalled-large" and "h2-stalled-small" open
// HTTP/2 connections with every stream they may open, each a request
// that is not held but forwarded to a pod that never answers, with 60 KB
// of HPACK-amplified headers or with none, until the request budget is
// full and the rest are refused. Each reports the peak of heap and stacks
// during its fill.
func BenchmarkFilledBounds(b *testing.B) {
	b.Run("held", benchmarkFilledHeld)
	b.Run("h2-stalled-large", func(b *testing.B) { benchmarkFilledStreams(b, 15, false) })
	b.Run("h2-stalled-small", func(b *testing.B) { benchmarkFilledStreams(b, 0, false) })
	// Before the request budget: no charge and Go's 250 streams per
	// connection, on 8 connections, not 64, to keep the run's memory
	// within the machine; multiply by 8 for the same load.
	b.Run("h2-stalled-large-unbudgeted", func(b *testing.B) { benchmarkFilledStreams(b, 15, true) })
}

func benchmarkFilledHeld(b *testing.B) {
	d := DefaultConfig()
	held := d.GlobalQueue / filledBoundsShare
	bodies := int(d.MaxBufferedBodies / d.MaxBufferedBody / filledBoundsShare)
	conns := d.MaxConnections / filledBoundsShare
	spliced := (conns - held) / 2
	idle := conns - held - spliced
	headerBudget := d.MaxHeldBytes / filledBoundsShare
	const services = 10 // held requests spread so no Service's queue is full
	perHeader := int(headerBudget/int64(held)) - 64

	ctx := klog.NewContext(context.Background(), logr.Discard())
	op := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer op.Close()
	cfg := d
	cfg.OperatorURL = op.URL
	cfg.RequestTimeout = 10 * time.Minute
	cfg.GlobalQueue = held
	cfg.PerServiceQueue = held / services
	cfg.PerSourceQueue = held // every client here is 127.0.0.1
	cfg.MaxConnectionsPerSource = conns
	// Every held request here is for a Service of namespace "bench"; the
	// memory is the same whichever namespaces share the pools.
	cfg.NamespaceShare = 100
	cfg.MaxHeldBytes = headerBudget
	cfg.MaxBufferedBodies = int64(bodies) * d.MaxBufferedBody
	cfg.MaxConnections = conns
	eps := clusterview.NewMemoryEndpoints()
	r, err := New(ctx, cfg, Options{Endpoints: eps})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()

	// The proxy port, and one resolver port whose Service is up.
	proxy := serveProxy(b, r)
	pod := parkingTCP(b)
	up := clusterview.ServiceRef{Namespace: testSvc.Namespace, Name: "up"} // resolvertest.ESWithPorts's namespace
	eps.Set(up, pod)
	routes := identify.NewRouteTable(ctx, resolvertest.AnyPort)
	pl := r.NewPortListeners(routes, identify.PortListenersOptions{Host: "127.0.0.1"})
	port := freePorts(b, 1)[0]
	routes.Upsert(resolvertest.ESWithPorts("up", v1.ResolverPort{Service: up.Name, Port: 80, ResolverPort: port}))
	runCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go pl.Run(runCtx)
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), time.Second)
		defer scancel()
		_ = pl.Shutdown(sctx)
	}()
	for len(pl.Listening()) < 1 {
		time.Sleep(time.Millisecond)
	}
	resolverPort := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port)))

	var open []net.Conn
	defer func() {
		for _, c := range open {
			_ = c.Close()
		}
	}()
	dial := func(addr, send string) {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			b.Fatalf("connection %d: %v", len(open)+1, err)
		}
		open = append(open, c)
		if send != "" {
			_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.WriteString(c, send); err != nil {
				b.Fatalf("connection %d: %v", len(open), err)
			}
		}
	}
	waitFor := func(what string, cond func() bool) {
		for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatalf("timed out waiting for %s", what)
			}
		}
	}

	base := resolvertest.MemNow()
	began := time.Now()
	fill := strings.Repeat("f", perHeader)
	body := strings.Repeat("b", int(d.MaxBufferedBody))
	for i := range held {
		head := fmt.Sprintf("GET / HTTP/1.1\r\nHost: s%d.bench\r\nX-Fill: %s\r\n\r\n", i%services, fill)
		if i < bodies {
			head = fmt.Sprintf("POST / HTTP/1.1\r\nHost: s%d.bench\r\nX-Fill: %s\r\nContent-Length: %d\r\n\r\n%s", i%services, fill, len(body), body)
		}
		dial(proxy, head)
	}
	waitFor("held requests", func() bool { return testutil.ToFloat64(r.metrics.Hold.Queued) == float64(held) })
	waitFor("buffered bodies", func() bool { return r.buffered.Load() == cfg.MaxBufferedBodies })
	afterHeld := resolvertest.MemNow()
	for range spliced {
		dial(resolverPort, "x") // not HTTP: spliced at once
	}
	waitFor("spliced connections", func() bool {
		return testutil.ToFloat64(r.metrics.Forward.Spliced.WithLabelValues(forward.SplicedSuccess)) == float64(spliced)
	})
	afterSpliced := resolvertest.MemNow()
	for range idle {
		dial(proxy, "")
	}
	waitFor("every connection open", func() bool { return testutil.ToFloat64(r.metrics.Admission.Connections) == float64(conns) })
	filled := resolvertest.MemNow()
	took := time.Since(began)

	_, _, heldBytes := r.admit.Usage()
	if refused := testutil.ToFloat64(r.metrics.Admission.ConnectionsRefused); refused != 0 || heldBytes < headerBudget*95/100 {
		b.Fatalf("%v connections refused, %d of %d header bytes charged: the bounds were not filled as planned", refused, heldBytes, headerBudget)
	}
	for range b.N {
		// The fill above is the measure; b.N only repeats the report.
	}
	used := float64(filled.GoMem-base.GoMem) / (1 << 20)
	b.ReportMetric(used, "MiB-heap+stacks")
	b.ReportMetric(used*filledBoundsShare, "MiB-extrapolated")
	b.ReportMetric(float64(filled.RSS)/(1<<20), "MiB-rss-process")
	charged := heldBytes + cfg.MaxBufferedBodies
	b.ReportMetric(float64(int64(afterHeld.GoMem-base.GoMem)-charged)/float64(held)/1024, "KiB/held-request")
	b.ReportMetric(float64(charged)/(1<<20), "MiB-charged")
	b.ReportMetric(float64(afterSpliced.GoMem-afterHeld.GoMem)/float64(spliced)/1024, "KiB/spliced-conn")
	b.ReportMetric(float64(filled.GoMem-afterSpliced.GoMem)/float64(idle)/1024, "KiB/idle-conn")
	b.ReportMetric(took.Seconds(), "s-to-fill")
}

// benchmarkFilledStreams fills the request budget with HTTP/2 streams
// forwarded to a pod that never answers: h2Conns connections, each with
// every stream the server allows, each stream carrying amplify copies of
// a 4000-byte header that HPACK's dynamic table sends once per
// connection.
//
// unbudgeted turns the request budget off, as before it was charged, on
// an eighth of the connections.
func benchmarkFilledStreams(b *testing.B, amplify int, unbudgeted bool) {
	h2Conns := 64
	d := DefaultConfig()
	ctx := klog.NewContext(context.Background(), logr.Discard())
	op := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer op.Close()
	cfg := d
	cfg.OperatorURL = op.URL
	if unbudgeted {
		h2Conns /= 8
		cfg.MaxRequestBytes = 1 << 40
	}
	eps := clusterview.NewMemoryEndpoints()
	r, err := New(ctx, cfg, Options{Endpoints: eps})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	proxy := serveProxy(b, r)
	// Every namespace's share of the budget together is the whole budget:
	// the streams go to Services of several namespaces.
	namespaces := 100 / cfg.NamespaceShare
	pod := parkingTCP(b)
	for ns := range namespaces {
		eps.Set(clusterview.ServiceRef{Namespace: fmt.Sprintf("ns%d", ns), Name: "web"}, pod)
	}
	streams := maxConcurrentStreams(cfg)

	peak := resolvertest.NewPeakSampler()
	defer peak.Stop()
	base := resolvertest.MemNow()
	began := time.Now()
	var answered, resets atomic.Int64
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	var block bytes.Buffer
	for i := range h2Conns {
		c, err := net.DialTimeout("tcp", proxy, 5*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		conns = append(conns, c)
		_, _ = c.Write([]byte(http2.ClientPreface))
		fr := http2.NewFramer(c, c)
		_ = fr.WriteSettings()
		// The answers (503 past the budget) are read and counted. The
		// server's SETTINGS stay unacknowledged, so a stream past its
		// cap would be refused, not an error.
		go func() {
			rf := http2.NewFramer(io.Discard, c)
			for {
				f, err := rf.ReadFrame()
				if err != nil {
					return
				}
				switch f.(type) {
				case *http2.HeadersFrame:
					answered.Add(1)
				case *http2.RSTStreamFrame:
					resets.Add(1)
				}
			}
		}()
		enc := hpack.NewEncoder(&block)
		host := fmt.Sprintf("web.ns%d.svc.cluster.local", i%namespaces)
		for s := range streams {
			block.Reset()
			for _, f := range []hpack.HeaderField{{Name: ":method", Value: "GET"}, {Name: ":scheme", Value: "http"},
				{Name: ":authority", Value: host}, {Name: ":path", Value: "/"}} {
				_ = enc.WriteField(f)
			}
			for range amplify {
				_ = enc.WriteField(hpack.HeaderField{Name: "x-amp", Value: strings.Repeat("a", 4000)})
			}
			_ = c.SetWriteDeadline(time.Now().Add(30 * time.Second))
			if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*s + 1), BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
				b.Fatalf("connection %d stream %d: %v", i, s, err)
			}
		}
	}
	attempts := int64(h2Conns) * int64(streams)
	// Filled when the charge and the answers stop moving.
	var last int64 = -1
	for deadline, still := time.Now().Add(2*time.Minute), 0; still < 5; time.Sleep(200 * time.Millisecond) {
		charged, _ := r.admit.RequestUsage()
		if now := charged + answered.Load()<<32; now == last {
			still++
		} else {
			last, still = now, 0
		}
		if time.Now().After(deadline) {
			b.Fatal("timed out waiting for the streams to settle")
		}
	}
	filled := resolvertest.MemNow()
	took := time.Since(began)
	charged, _ := r.admit.RequestUsage()
	refused := testutil.ToFloat64(r.metrics.Admission.Overflow.WithLabelValues(admission.ScopeRequests)) + testutil.ToFloat64(r.metrics.Admission.Overflow.WithLabelValues(admission.ScopeNamespace))
	stalled := attempts - answered.Load() - resets.Load()
	if !unbudgeted && charged < cfg.MaxRequestBytes*9/10 || stalled <= 0 {
		b.Fatalf("%d of %d bytes charged, %d streams stalled: the budget was not filled as planned", charged, cfg.MaxRequestBytes, stalled)
	}
	for range b.N {
		// The fill above is the measure; b.N only repeats the report.
	}
	b.ReportMetric(float64(peak.Stop()-base.GoMem)/(1<<20), "MiB-peak-heap+stacks")
	b.ReportMetric(float64(filled.GoMem-base.GoMem)/(1<<20), "MiB-heap+stacks")
	b.ReportMetric(float64(filled.RSS)/(1<<20), "MiB-rss-process")
	if !unbudgeted {
		b.ReportMetric(float64(charged)/(1<<20), "MiB-charged")
		b.ReportMetric(float64(charged)/float64(stalled)/1024, "KiB-charged/stalled-stream")
	}
	b.ReportMetric(float64(stalled), "stalled-streams")
	b.ReportMetric(refused, "refused-streams")
	b.ReportMetric(float64(int64(filled.GoMem-base.GoMem))/float64(stalled)/1024, "KiB/stalled-stream")
	b.ReportMetric(took.Seconds(), "s-to-fill")
}
