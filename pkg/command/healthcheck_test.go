package command

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// freezingProxy forwards TCP connections to backend until freeze, then
// drops every byte both ways and keeps the connections open: a connection
// half dead, as behind a NAT entry or load balancer that went away.
type freezingProxy struct {
	ln      net.Listener
	backend string
	frozen  atomic.Bool
	wg      sync.WaitGroup
}

func newFreezingProxy(t *testing.T, backend string) *freezingProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezingProxy{ln: ln, backend: backend}
	var conns []net.Conn
	var mu sync.Mutex
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		p.wg.Wait()
	})
	p.wg.Go(func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", backend)
			if err != nil {
				_ = in.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, in, out)
			mu.Unlock()
			p.wg.Go(func() { p.pipe(out, in) })
			p.wg.Go(func() { p.pipe(in, out) })
		}
	})
	return p
}

func (p *freezingProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.frozen.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// A client-go watch on a connection that went half dead ends within the
// health check's timeouts once CheckAPIServerConnections set them, so
// informers reconnect and relist in seconds, not after client-go's
// default 45 s (issue 39, item 5). The server here answers the watch and
// then sends nothing, as an apiserver does while nothing changes.
func TestAWatchOnADeadConnectionEndsWithinTheHealthCheck(t *testing.T) {
	for _, env := range []string{envHTTP2ReadIdleTimeout, envHTTP2PingTimeout} {
		t.Setenv(env, "") // restored after the test
		_ = os.Unsetenv(env)
	}
	CheckAPIServerConnections()
	if got := os.Getenv(envHTTP2ReadIdleTimeout); got != "5" {
		t.Fatalf("%s = %q, want 5", envHTTP2ReadIdleTimeout, got)
	}

	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	proxy := newFreezingProxy(t, srv.Listener.Addr().String())

	kube, err := kubernetes.NewForConfig(&rest.Config{
		Host: "https://" + proxy.ln.Addr().String(),
		// A server name of its own: client-go caches transports by TLS
		// settings, and this one must be made after the timeouts were set.
		TLSClientConfig: rest.TLSClientConfig{Insecure: true, ServerName: t.Name()},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	w, err := kube.CoreV1().Pods("team").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	proxy.frozen.Store(true)
	frozen := time.Now()
	select {
	case _, open := <-w.ResultChan():
		for open {
			_, open = <-w.ResultChan()
		}
	case <-time.After(APIServerReadIdleTimeout + APIServerPingTimeout + 10*time.Second):
		t.Fatalf("the watch on a dead connection still waits %v after it died; the health check allows %v",
			time.Since(frozen).Round(time.Second), APIServerReadIdleTimeout+APIServerPingTimeout)
	}
	t.Logf("the watch ended %v after its connection died", time.Since(frozen).Round(100*time.Millisecond))
}
