package resolver

import (
	"io"
	"net/http"
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
	e.r.eps = clusterIPEndpoints{e.eps, map[string]ServiceRef{"10.0.0.42": testSvc}}
	e.eps.Set(testSvc, "10.244.0.5:8080")
	e.backend(t, "10.244.0.5:8080", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "pod")
	}))
	client := newClient(t)
	for host, want := range map[string]int{
		"10.0.0.42": 200, "10.0.0.42:80": 200, testHost: 200,
		"10.0.0.43": 400, "10.0.0.42:0": 400, "10.0.0.42:99999": 400,
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
