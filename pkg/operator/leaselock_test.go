package operator

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// A Lease request that the apiserver never answers fails after the lock's
// request timeout, so the elector tries again before its renew deadline
// instead of waiting on a stuck connection; and the lock's requests say
// they are the leader election's.
func TestLeaseLockRequestsEndAtTheirTimeout(t *testing.T) {
	release := make(chan struct{})
	agents := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case agents <- r.UserAgent():
		default:
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)

	lock, err := NewLeaseLock(&rest.Config{Host: srv.URL}, "elasti", "elasti-operator-leader", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, _, err = lock.Get(context.Background())
	if took := time.Since(start); err == nil || took > 5*time.Second {
		t.Fatalf("a Lease read the apiserver never answers returned %v after %s; want an error after about 300ms", err, took)
	}
	if ua := <-agents; ua == "" || !strings.Contains(ua, "leader-election") {
		t.Fatalf("the Lease request's User-Agent is %q; want it to name leader-election", ua)
	}
}
