package resolver

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// clusterIPEndpoints adds a ClusterIP index to MemoryEndpoints.
type clusterIPEndpoints struct {
	*MemoryEndpoints
	ips map[string]ServiceRef
}

func (c clusterIPEndpoints) ServiceForClusterIP(ip string) (ServiceRef, bool) {
	s, ok := c.ips[ip]
	return s, ok
}

// On the shared proxy port a bare ClusterIP, with or without a port, names
// its Service as well as the Service's DNS name does.
func TestSharedPortAcceptsTheClusterIPAsHost(t *testing.T) {
	e := newEnv(t, testConfig())
	e.r.eps = clusterIPEndpoints{e.eps, map[string]ServiceRef{"10.0.0.42": testSvc, "fd00::42": testSvc}}
	e.eps.Set(testSvc, "10.244.0.5:8080")
	e.backend(t, "10.244.0.5:8080", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "pod")
	}))
	client := newClient(t)
	for host, want := range map[string]int{
		"10.0.0.42": 200, "10.0.0.42:80": 200, testHost: 200,
		"10.0.0.43": 400, "10.0.0.42:0": 400, "10.0.0.42:99999": 400,
		// One port has one spelling, as in a Service DNS name.
		"10.0.0.42:080": 400, "10.0.0.42:+80": 400,
		// IPv6 as clients write it: bracketed, with or without a port.
		"[fd00::42]": 200, "[fd00::42]:80": 200, "[FD00:0::42]": 200, "[fd00::43]": 400,
	} {
		req := e.request(t, t.Context(), "GET", "/", nil)
		req.Host = host
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(t, resp)
		if resp.StatusCode != want {
			t.Errorf("Host %q: %d %q, want %d", host, resp.StatusCode, body, want)
		}
	}
}

// fronted is a fixed set of Services under an ElastiService.
type fronted map[ServiceRef]bool

func (f fronted) Fronted(svc ServiceRef) bool { return f[svc] }

// A request for a Service no ElastiService names is answered 404 at once:
// nothing is held and the operator is never asked.
func TestUnfrontedServiceIs404AtOnce(t *testing.T) {
	e := newEnv(t, testConfig())
	e.r.fronted = fronted{testSvc: true}
	req := e.request(t, t.Context(), "GET", "/", nil)
	req.Host = "other.team.svc.cluster.local"
	resp, err := newClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode != 404 || !strings.Contains(body, "team/other is not managed by elasti") {
		t.Fatalf("got %d %q, want 404", resp.StatusCode, body)
	}
	if got := e.op.posts.Load(); got != 0 {
		t.Fatalf("the operator was asked %d times", got)
	}
}
