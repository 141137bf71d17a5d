package command_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/elasti-dev/elasti/pkg/command"
	"github.com/elasti-dev/elasti/pkg/command/commandtest"
)

// A client-go watch on a connection that went half dead ends within the
// health check's timeouts once CheckAPIServerConnections set them, so
// informers reconnect and relist in seconds, not after client-go's
// default 45 s (issue 39, item 5). The server here answers the watch and
// then sends nothing, as an apiserver does while nothing changes.
func TestAWatchOnADeadConnectionEndsWithinTheHealthCheck(t *testing.T) {
	for _, env := range []string{"HTTP2_READ_IDLE_TIMEOUT_SECONDS", "HTTP2_PING_TIMEOUT_SECONDS"} {
		t.Setenv(env, "") // restored after the test
		_ = os.Unsetenv(env)
	}
	command.CheckAPIServerConnections()
	if got := os.Getenv("HTTP2_READ_IDLE_TIMEOUT_SECONDS"); got != "5" {
		t.Fatalf("HTTP2_READ_IDLE_TIMEOUT_SECONDS = %q, want 5", got)
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
	proxy := commandtest.NewFreezingProxy(t, srv.Listener.Addr().String())

	kube, err := kubernetes.NewForConfig(&rest.Config{
		Host: "https://" + proxy.Addr(),
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
	proxy.Freeze()
	frozen := time.Now()
	select {
	case _, open := <-w.ResultChan():
		for open {
			_, open = <-w.ResultChan()
		}
	case <-time.After(command.APIServerReadIdleTimeout + command.APIServerPingTimeout + 10*time.Second):
		t.Fatalf("the watch on a dead connection still waits %v after it died; the health check allows %v",
			time.Since(frozen).Round(time.Second), command.APIServerReadIdleTimeout+command.APIServerPingTimeout)
	}
	t.Logf("the watch ended %v after its connection died", time.Since(frozen).Round(100*time.Millisecond))
}
