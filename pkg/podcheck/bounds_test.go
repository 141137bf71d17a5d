package podcheck

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Tenant safety (issue 38, hole 1): a pod's readiness answer is the
// tenant's to shape, and the resolver that checks it serves every
// namespace. Whatever the answer, one check holds at most
// MaxCheckHeaderBytes of headers and lasts at most MaxCheckTimeout.

// rawServe answers every connection to ip with respond, after reading the
// request's head (HTTP/1), until the test ends; it returns the port.
func rawServe(t *testing.T, ip string, respond func(c net.Conn)) int32 {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = l.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				respond(c)
			})
		}
	})
	return int32(l.Addr().(*net.TCPAddr).Port)
}

// readHead reads an HTTP/1 request's head from c.
func readHead(c net.Conn) {
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		if err != nil || line == "\r\n" {
			return
		}
	}
}

// allocatedBy is how many bytes f allocated, by the runtime's count: the
// other goroutines of the test binary allocate little meanwhile.
func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// httpAnswering is a pod whose HTTP readiness probe (timeoutSeconds 3600,
// which the check caps) is answered by respond.
func httpAnswering(t *testing.T, ip string, respond func(c net.Conn)) (*corev1.Pod, int32) {
	port := rawServe(t, ip, func(c net.Conn) { readHead(c); respond(c) })
	probe := httpProbe("/ready", intstr.FromInt32(port))
	probe.TimeoutSeconds = 3600
	return probePod(ip, port, probe, nil), port
}

func TestCheckHeadersAreBounded(t *testing.T) {
	// The answer is made before the check, so that only the check's own
	// allocations are counted.
	headers := func(n int, line string) func(c net.Conn) {
		var b bytes.Buffer
		b.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n")
		for range n {
			b.WriteString(line)
		}
		b.WriteString("\r\n")
		answer := b.Bytes()
		return func(c net.Conn) { _, _ = c.Write(answer) }
	}
	const mib = 1 << 20
	for _, tc := range []struct {
		name    string
		respond func(c net.Conn)
		pass    bool
	}{
		{"one 9 MiB header", headers(1, "X-Big: "+strings.Repeat("a", 9*mib)+"\r\n"), false},
		{"10,000 small headers", headers(10000, "X-Small: 0123456789\r\n"), false},
		{"one past the bound", headers(1, "X-Big: "+strings.Repeat("a", MaxCheckHeaderBytes+4096)+"\r\n"), false},
		{"within the bound", headers(1, "X-Big: "+strings.Repeat("a", MaxCheckHeaderBytes-4096)+"\r\n"), true},
		{"a plain 200", headers(0, ""), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod, port := httpAnswering(t, "127.0.0.6", tc.respond)
			var passed bool
			allocated := allocatedBy(func() { passed = checkOnce(t, pod, port) })
			if passed != tc.pass {
				t.Errorf("check passed = %v, want %v", passed, tc.pass)
			}
			if allocated > 2*mib {
				t.Errorf("one check allocated %d KiB; its headers are bounded by %d KiB", allocated>>10, MaxCheckHeaderBytes>>10)
			}
		})
	}
}

// A header dripped a byte at a time ends with the capped timeout, not the
// probe's hour.
func TestCheckTimeoutIsCapped(t *testing.T) {
	pod, port := httpAnswering(t, "127.0.0.6", func(c net.Conn) {
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Drip: ")
		for range 100 {
			if _, err := c.Write([]byte("a")); err != nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	began := time.Now()
	if checkOnce(t, pod, port) {
		t.Error("a check whose answer never ended passed")
	}
	if took := time.Since(began); took < MaxCheckTimeout-100*time.Millisecond || took > MaxCheckTimeout+time.Second {
		t.Errorf("the check took %v; want the capped timeout, %v", took, MaxCheckTimeout)
	}
}

// The check asks for no compression and inflates none, as the kubelet's.
func TestCheckAsksForNoCompression(t *testing.T) {
	got := make(chan string, 1)
	_, port := serveAt(t, "127.0.0.6", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Accept-Encoding")
	}))
	if !checkOnce(t, probePod("127.0.0.6", port, httpProbe("/", intstr.FromInt32(port)), nil), port) {
		t.Fatal("check failed")
	}
	if ae := <-got; ae != "" {
		t.Errorf("the check sent Accept-Encoding %q", ae)
	}
}

// grpcAnswering is a pod whose gRPC probe is answered, over h2c, by a
// server that ignores the client's limits: HEADERS with headerBytes of
// extra fields, a SERVING message, and trailers with trailerBytes of
// extra fields before grpc-status 0, each header block cut into
// CONTINUATION frames. The answer is made before the check (for stream
// 1, the client's first), so that only the check's own allocations are
// counted.
func grpcAnswering(t *testing.T, ip string, headerBytes, trailerBytes int) (*corev1.Pod, int32) {
	var answer bytes.Buffer
	fr := http2.NewFramer(&answer, nil)
	const stream = 1
	block := func(fields ...hpack.HeaderField) []byte {
		var buf bytes.Buffer
		enc := hpack.NewEncoder(&buf)
		for _, f := range fields {
			_ = enc.WriteField(f)
		}
		return buf.Bytes()
	}
	padding := func(n int) []hpack.HeaderField {
		var out []hpack.HeaderField
		for i := 0; n > 0; i++ {
			size := min(n, 4096)
			out = append(out, hpack.HeaderField{Name: fmt.Sprintf("x-pad-%d", i), Value: strings.Repeat("p", size)})
			n -= size
		}
		return out
	}
	writeBlock := func(b []byte, end bool) {
		const chunk = 16 << 10
		first := b[:min(len(b), chunk)]
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: stream, BlockFragment: first, EndStream: end, EndHeaders: len(b) <= chunk})
		for b = b[len(first):]; len(b) > 0; {
			next := b[:min(len(b), chunk)]
			b = b[len(next):]
			_ = fr.WriteContinuation(stream, len(b) == 0, next)
		}
	}
	_ = fr.WriteSettings()
	writeBlock(block(append([]hpack.HeaderField{{Name: ":status", Value: "200"}, {Name: "content-type", Value: "application/grpc"}}, padding(headerBytes)...)...), false)
	_ = fr.WriteData(stream, false, []byte{0, 0, 0, 0, 2, 0x08, grpcServing})
	writeBlock(block(append(padding(trailerBytes), hpack.HeaderField{Name: "grpc-status", Value: "0"})...), true)

	port := rawServe(t, ip, func(c net.Conn) {
		preface := make([]byte, len(http2.ClientPreface))
		if _, err := io.ReadFull(c, preface); err != nil {
			return
		}
		in := http2.NewFramer(nil, c)
		for {
			f, err := in.ReadFrame()
			if err != nil {
				return
			}
			if _, ok := f.(*http2.HeadersFrame); ok {
				break
			}
		}
		_, _ = c.Write(answer.Bytes())
		// Let the client read before the connection closes.
		_, _ = io.Copy(io.Discard, c)
	})
	probe := &corev1.Probe{TimeoutSeconds: 3600, ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: port}}}
	return probePod(ip, port, probe, nil), port
}

func TestCheckGRPCHeaderListsAreBounded(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name             string
		header, trailers int
		pass             bool
	}{
		{"a 9 MiB trailer", 0, 9 * mib, false},
		{"a 9 MiB header", 9 * mib, 0, false},
		{"a trailer one past the bound", 0, MaxCheckHeaderBytes + 4096, false},
		{"a small answer", 0, 1024, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod, port := grpcAnswering(t, "127.0.0.7", tc.header, tc.trailers)
			var passed bool
			allocated := allocatedBy(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				plan, err := PlanFor(pod, endpointOf(pod, port))
				if err != nil {
					t.Fatal(err)
				}
				passed = NewChecker().CheckPod(ctx, plan, plan.NewState())
			})
			if passed != tc.pass {
				t.Errorf("check passed = %v, want %v", passed, tc.pass)
			}
			if allocated > 2*mib {
				t.Errorf("one check allocated %d KiB; its header list is bounded by %d KiB", allocated>>10, MaxCheckHeaderBytes>>10)
			}
		})
	}
}
