package resolver

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
	"github.com/elasti-dev/elasti/pkg/resolver/internal/resolvertest"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2/ktesting"
)

// The resolver's endpoints come from the Service's EndpointSlices,
// which lag the pods: a deleted pod stays listed as Ready until the
// EndpointSlice controller and the informer have caught up, and in that
// window it no longer accepts connections. With two of three listed
// endpoints gone, every request must still reach the one that is left; no
// request may be answered 502 while a listed endpoint accepts.
func TestGoneEndpointsStillListedCostNoRequest(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	e := newEnv(t, testConfig())
	e.backend(t, "10.244.0.3:8080", named("survivor"))
	// 10.244.0.1 and .2 have no route in fakeNet: connecting fails, as to
	// a deleted pod that is still listed.
	e.eps.Set(testSvc, "10.244.0.1:8080", "10.244.0.2:8080", "10.244.0.3:8080")
	client := newClient(t)
	// Three rounds of the round robin: every endpoint comes first, and
	// every pair of gone endpoints comes first and second, at least once.
	for i := range 9 {
		resp, err := client.Do(e.request(t, context.Background(), http.MethodGet, fmt.Sprint("/", i), nil))
		if err != nil {
			t.Fatal(err)
		}
		if body := readAll(t, resp); resp.StatusCode != http.StatusOK || body != fmt.Sprint("survivor /", i) {
			t.Fatalf("request %d: %d %q; want the survivor's answer", i, resp.StatusCode, body)
		}
	}
	if e.net.dialCount("10.244.0.1:8080") == 0 || e.net.dialCount("10.244.0.2:8080") == 0 {
		t.Error("a gone endpoint was never tried; the test proves nothing")
	}
}

// After a failed connect the resolver reads its endpoints again: the one
// that failed has usually just left the list, and a pod that became Ready
// meanwhile is used, instead of a fallback picked from the stale list.
func TestRetryAfterAFailedConnectUsesTheCurrentEndpoints(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	_, ctx := ktesting.NewTestContext(t)
	eps := clusterview.NewMemoryEndpoints()
	fn := newFakeNet()
	op := newFakeOperator(t)
	newPod := httptest.NewServer(named("new pod"))
	t.Cleanup(func() { newPod.CloseClientConnections(); newPod.Close() })
	fn.route("10.244.0.4:8080", newPod.Listener.Addr().String())
	// Both listed endpoints are gone; while the first is tried, the list
	// catches up: they leave it and a new pod joins.
	eps.Set(testSvc, "10.244.0.1:8080", "10.244.0.2:8080")
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr != "10.244.0.4:8080" {
			eps.Set(testSvc, "10.244.0.4:8080")
		}
		return fn.dial(ctx, network, addr)
	}
	cfg := testConfig()
	cfg.OperatorURL = op.srv.URL
	r, err := New(ctx, cfg, Options{Endpoints: eps, Registerer: prometheus.NewRegistry(), Dial: dial})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(r)
	ConfigureServer(srv.Config)
	srv.Start()
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close(); r.Close() })

	req, err := http.NewRequest(http.MethodGet, srv.URL+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = testHost
	resp, err := newClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(body), "new pod") {
		t.Fatalf("%d %q; want the new pod's answer", resp.StatusCode, body)
	}
	if n := fn.dialCount("10.244.0.1:8080") + fn.dialCount("10.244.0.2:8080"); n == 0 {
		t.Error("no gone endpoint was tried; the test proves nothing")
	}
}
