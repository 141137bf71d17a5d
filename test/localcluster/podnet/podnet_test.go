package podnet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// These tests build real namespaces, links and routes: they need root and
// iproute2 and fail (never skip) without them. The only addresses they
// contact are pod IPs inside the namespace the test itself created, while
// that namespace's host route is in place.

// setupTimeout covers waiting for the machine-wide pod-network lock, which
// the e2e packages of the same `make test` hold for minutes, then the setup.
const setupTimeout = DefaultLockTimeout + time.Minute

// newNetwork sets up a pod network that is closed, and checked to be gone,
// when the test ends.
func newNetwork(t *testing.T) *Network {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("podnet tests need root to create network namespaces (euid %d)", os.Geteuid())
	}
	ctx, cancel := context.WithTimeout(t.Context(), setupTimeout)
	defer cancel()
	n, err := Setup(ctx, Options{Logf: t.Logf})
	if err != nil {
		t.Fatalf("Setup (needs root and a working `ip netns add`): %v", err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		assertGone(t, n)
	})
	return n
}

func ipOut(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := runIP(ctx, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func hasNamespace(t *testing.T, name string) bool {
	t.Helper()
	for _, line := range strings.Split(ipOut(t, "netns", "list"), "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == name {
			return true
		}
	}
	return false
}

func hasLink(t *testing.T, name string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := runIP(ctx, "link", "show", "dev", name)
	if err != nil && !isGone(err) {
		t.Fatal(err)
	}
	return err == nil
}

func podRoute(t *testing.T) string {
	t.Helper()
	return strings.TrimSpace(ipOut(t, "route", "show", "exact", PodCIDR))
}

// assertGone checks that nothing of n is left. Another process may own the
// pod network by now, so the route check looks for n's own link only.
func assertGone(t *testing.T, n *Network) {
	t.Helper()
	if hasNamespace(t, n.Name()) {
		t.Errorf("namespace %s still exists", n.Name())
	}
	for _, l := range []string{n.hostLink, n.nsLink} {
		if hasLink(t, l) {
			t.Errorf("link %s still exists", l)
		}
	}
	if r := podRoute(t); strings.Contains(r, n.hostLink) {
		t.Errorf("route still there: %s", r)
	}
}

// podClient talks only to the given pod addresses: no proxy from the
// environment, 500ms to connect.
func podClient() *http.Client {
	return &http.Client{
		Timeout: 3 * time.Second,
		Transport: &http.Transport{
			Proxy:             nil,
			DialContext:       (&net.Dialer{Timeout: 500 * time.Millisecond}).DialContext,
			DisableKeepAlives: true,
		},
	}
}

func get(n *Network, ip string, port int) (string, error) {
	if _, err := ParsePodIP(ip); err != nil {
		return "", err
	}
	// Hold the network open during the request, like Reachable does.
	n.mu.RLock()
	defer n.mu.RUnlock()
	if n.closed {
		return "", ErrClosed
	}
	resp, err := podClient().Get(fmt.Sprintf("http://%s:%d/", ip, port))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// serve runs a tiny HTTP server inside the namespace.
func serve(t *testing.T, n *Network, addr string) {
	t.Helper()
	ln, err := n.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// The local address is the pod IP the client dialled.
			fmt.Fprintf(w, "hello from %s", r.Context().Value(http.LocalAddrContextKey))
		}),
		ReadHeaderTimeout: 5 * time.Second,
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
}

func TestSetupCloseLeavesNothing(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatalf("podnet tests need root (euid %d)", os.Geteuid())
	}
	ctx, cancel := context.WithTimeout(t.Context(), setupTimeout)
	defer cancel()
	n, err := Setup(ctx, Options{Logf: t.Logf})
	if err != nil {
		t.Fatalf("Setup: %v", err)
	}
	t.Cleanup(func() { _ = n.Close() })

	if !hasNamespace(t, n.Name()) {
		t.Errorf("namespace %s missing after Setup", n.Name())
	}
	if len(n.hostLink) > 15 || len(n.nsLink) > 15 {
		t.Errorf("link names too long: %s %s", n.hostLink, n.nsLink)
	}
	if !hasLink(t, n.hostLink) {
		t.Errorf("host link %s missing", n.hostLink)
	}
	if r := podRoute(t); !strings.Contains(r, "via "+NamespaceIP) || !strings.Contains(r, n.hostLink) {
		t.Errorf("host route = %q, want via %s dev %s", r, NamespaceIP, n.hostLink)
	}
	inside := ipOut(t, "-n", n.Name(), "route", "show", "exact", PodCIDR)
	if !strings.Contains(inside, "blackhole") {
		t.Errorf("namespace route = %q, want blackhole", inside)
	}
	// The namespace is also the node kube-proxy programs: ClusterIPs are
	// local there, and nothing else of 10/8 leaves it.
	if r := ipOut(t, "-n", n.Name(), "route", "show", "table", "local", "exact", ServiceCIDR); !strings.Contains(r, "local") {
		t.Errorf("service CIDR route = %q, want local", r)
	}
	if r := ipOut(t, "-n", n.Name(), "route", "show", "exact", "10.0.0.0/8"); !strings.Contains(r, "unreachable") {
		t.Errorf("10/8 route = %q, want unreachable", r)
	}
	if lo := ipOut(t, "-n", n.Name(), "link", "show", "lo"); !strings.Contains(lo, "UP") {
		t.Errorf("lo not up in namespace: %s", lo)
	}

	if err := n.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	assertGone(t, n)
	if err := n.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := n.AddIP("10.244.1.1"); !errors.Is(err, ErrClosed) {
		t.Errorf("AddIP after Close = %v, want ErrClosed", err)
	}
	if err := n.Reachable(ctx, "10.244.1.1", 80); !errors.Is(err, ErrClosed) {
		t.Errorf("Reachable after Close = %v, want ErrClosed", err)
	}
	if _, err := n.Listen("tcp", "0.0.0.0:0"); !errors.Is(err, ErrClosed) {
		t.Errorf("Listen after Close = %v, want ErrClosed", err)
	}
}

func TestServeOnPodIP(t *testing.T) {
	n := newNetwork(t)
	const ip, port = "10.244.200.7", 18080
	for range 2 { // idempotent
		if err := n.AddIP(ip); err != nil {
			t.Fatalf("AddIP: %v", err)
		}
	}
	if ips, err := n.IPs(); err != nil || !slices.Equal(ips, []string{ip}) {
		t.Fatalf("IPs = %v, %v; want [%s]", ips, err, ip)
	}
	serve(t, n, fmt.Sprintf("0.0.0.0:%d", port))

	body, err := get(n, ip, port)
	if err != nil {
		t.Fatalf("GET from host: %v", err)
	}
	if want := "hello from " + ip; !strings.HasPrefix(body, want) {
		t.Errorf("body = %q, want prefix %q", body, want)
	}
	if err := n.Reachable(t.Context(), ip, port); err != nil {
		t.Errorf("Reachable: %v", err)
	}
	// An IP that was never added does not answer.
	if _, err := get(n, "10.244.200.8", port); err == nil {
		t.Errorf("GET on an IP that was never added succeeded")
	}

	for range 2 { // idempotent
		if err := n.RemoveIP(ip); err != nil {
			t.Fatalf("RemoveIP: %v", err)
		}
	}
	start := time.Now()
	if _, err := get(n, ip, port); err == nil {
		t.Fatalf("GET after RemoveIP succeeded")
	} else {
		t.Logf("after RemoveIP: %v (%s)", err, time.Since(start).Round(time.Millisecond))
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("failing dial took %s", d)
	}
	if err := n.Reachable(t.Context(), ip, port); err == nil {
		t.Errorf("Reachable after RemoveIP succeeded")
	}
	if ips, err := n.IPs(); err != nil || len(ips) != 0 {
		t.Errorf("IPs after RemoveIP = %v, %v", ips, err)
	}

	// And back.
	if err := n.AddIP(ip); err != nil {
		t.Fatal(err)
	}
	if err := n.Reachable(t.Context(), ip, port); err != nil {
		t.Errorf("Reachable after re-adding: %v", err)
	}
}

func TestRefusesNonPodIPs(t *testing.T) {
	n := newNetwork(t)
	for _, ip := range []string{"10.1.2.3", "127.0.0.1", "10.245.0.2", "10.243.255.255", "10.245.0.0",
		"0.0.0.0", "::1", "::ffff:10.244.1.1", "10.244.1.1/32", "", "pod"} {
		if err := n.AddIP(ip); err == nil {
			t.Errorf("AddIP(%q) accepted", ip)
		}
		if err := n.RemoveIP(ip); err == nil {
			t.Errorf("RemoveIP(%q) accepted", ip)
		}
		if err := n.Reachable(t.Context(), ip, 80); err == nil {
			t.Errorf("Reachable(%q) accepted", ip)
		}
	}
	if ips, err := n.IPs(); err != nil || len(ips) != 0 {
		t.Errorf("IPs = %v, %v; want none", ips, err)
	}
	for _, ip := range []string{"10.244.0.1", "10.244.255.254"} {
		if _, err := ParsePodIP(ip); err != nil {
			t.Errorf("ParsePodIP(%q): %v", ip, err)
		}
	}
	if _, err := n.Listen("tcp", "localhost:0"); err == nil {
		t.Errorf("Listen on a host name accepted")
	}
	if _, err := n.Listen("udp", "0.0.0.0:0"); err == nil {
		t.Errorf("Listen udp accepted")
	}
}

func TestSetupSerialises(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatalf("podnet tests need root (euid %d)", os.Geteuid())
	}
	var (
		active, maxActive atomic.Int32
		waited            atomic.Bool
		wg                sync.WaitGroup
	)
	logf := func(format string, args ...any) {
		if strings.Contains(format, "waiting for") {
			waited.Store(true)
		}
		t.Logf(format, args...)
	}
	for i := range 2 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), setupTimeout)
			defer cancel()
			n, err := Setup(ctx, Options{Logf: logf})
			if err != nil {
				t.Errorf("Setup %d: %v", i, err)
				return
			}
			defer func() {
				active.Add(-1)
				if err := n.Close(); err != nil {
					t.Errorf("Close %d: %v", i, err)
				}
			}()
			a := active.Add(1)
			for {
				m := maxActive.Load()
				if a <= m || maxActive.CompareAndSwap(m, a) {
					break
				}
			}
			time.Sleep(300 * time.Millisecond)
		})
	}
	wg.Wait()
	if m := maxActive.Load(); m != 1 {
		t.Errorf("%d networks were up at once, want 1", m)
	}
	if !waited.Load() {
		t.Errorf("no Setup logged that it waited for the lock")
	}
}

func TestLockTimeout(t *testing.T) {
	n := newNetwork(t)
	_ = n
	start := time.Now()
	_, err := Setup(t.Context(), Options{Logf: t.Logf, LockTimeout: 200 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "gave up") {
		t.Fatalf("second Setup while the first is open = %v, want a timeout", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("timeout took %s", d)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Setup(ctx, Options{Logf: t.Logf}); !errors.Is(err, context.Canceled) {
		t.Errorf("Setup with a cancelled ctx = %v, want context.Canceled", err)
	}
}

func TestSetupRemovesStale(t *testing.T) {
	old := newNetwork(t)
	if err := old.AddIP("10.244.9.9"); err != nil {
		t.Fatal(err)
	}
	// Crash: the lock goes, everything else stays.
	old.mu.Lock()
	if err := old.lock.Close(); err != nil {
		t.Fatal(err)
	}
	old.lock = nil
	old.mu.Unlock()

	// A stale pair that never made it into a namespace, and an empty
	// namespace.
	suffix, err := randomHex(4)
	if err != nil {
		t.Fatal(err)
	}
	staleNS := NamespacePrefix + "stale-" + suffix
	staleH, staleN := LinkPrefix+suffix+"x", LinkPrefix+suffix+"y"
	ipOut(t, "netns", "add", staleNS)
	ipOut(t, "link", "add", staleH, "type", "veth", "peer", "name", staleN)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = runIP(ctx, "netns", "del", staleNS)
		_, _ = runIP(ctx, "link", "del", staleH)
	})

	n := newNetwork(t)
	for _, ns := range []string{old.Name(), staleNS} {
		if hasNamespace(t, ns) {
			t.Errorf("stale namespace %s survived Setup", ns)
		}
	}
	for _, l := range []string{old.hostLink, staleH, staleN} {
		if hasLink(t, l) {
			t.Errorf("stale link %s survived Setup", l)
		}
	}
	if r := podRoute(t); !strings.Contains(r, n.hostLink) {
		t.Errorf("route = %q, want the new network's", r)
	}
	// The crashed network's Close must not touch the new one.
	if err := old.Close(); err != nil {
		t.Errorf("Close of the crashed network: %v", err)
	}
	if r := podRoute(t); !strings.Contains(r, n.hostLink) {
		t.Errorf("route after closing the crashed network = %q", r)
	}
}

// The thread that entered the namespace must come back to the host's.
func TestListenLeavesThreadsOnHost(t *testing.T) {
	n := newNetwork(t)
	host, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(n.NamespacePath())
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("net:[%d]", st.Sys().(*syscall.Stat_t).Ino)
	var inside string
	if err := inNetns(n.NamespacePath(), func() error {
		var err error
		inside, err = os.Readlink("/proc/thread-self/ns/net")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if inside != want || inside == host {
		t.Fatalf("inNetns ran in %s, want %s (host is %s)", inside, want, host)
	}
	for i := range 20 {
		if _, err := n.Listen("tcp", fmt.Sprintf("0.0.0.0:%d", 19000+i)); err != nil {
			t.Fatal(err)
		}
	}
	// Every thread the runtime hands out must be in the host namespace.
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			got, err := os.Readlink("/proc/thread-self/ns/net")
			if err != nil {
				t.Error(err)
				return
			}
			if got != host {
				t.Errorf("thread in namespace %s, want host %s", got, host)
			}
		})
	}
	wg.Wait()
}
