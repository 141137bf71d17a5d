package resolver

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/elasti-dev/elasti/pkg/resolver/admission"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
)

// clusterIPEndpoints adds a ClusterIP index to MemoryEndpoints.
type clusterIPEndpoints struct {
	*clusterview.MemoryEndpoints
	ips map[string]clusterview.ServiceRef
}

func (c clusterIPEndpoints) ServiceForClusterIP(ip string) (clusterview.ServiceRef, bool) {
	s, ok := c.ips[ip]
	return s, ok
}

// On the shared proxy port a bare ClusterIP, with or without a port, names
// its Service as well as the Service's DNS name does.
func TestSharedPortAcceptsTheClusterIPAsHost(t *testing.T) {
	e := newEnv(t, testConfig())
	e.r.hosts.ClusterIPs = clusterIPEndpoints{e.eps, map[string]clusterview.ServiceRef{"10.0.0.42": testSvc, "fd00::42": testSvc}}
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

// namedSet is a fixed set of Services an ElastiService names.
type namedSet map[clusterview.ServiceRef]bool

func (n namedSet) Named(svc clusterview.ServiceRef) bool { return n[svc] }

// A request for a Service the resolver is not in front of, and that no
// ElastiService names, is answered 404 at once: nothing is held and the
// operator is never asked.
func TestUnnamedServiceIs404AtOnce(t *testing.T) {
	e := newEnv(t, testConfig())
	e.r.named = namedSet{testSvc: true}
	other := clusterview.ServiceRef{Namespace: "team", Name: "other"}
	e.eps.SetInFront(other, false)
	req := e.request(t, t.Context(), "GET", "/", nil)
	req.Host = "other.team.svc.cluster.local"
	began := time.Now()
	resp, err := newClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode != 404 || !strings.Contains(body, "team/other is not asleep behind elasti") {
		t.Fatalf("got %d %q, want 404", resp.StatusCode, body)
	}
	if took := time.Since(began); took >= clusterview.FrontGrace {
		t.Fatalf("answered after %v; a Service no ElastiService names must not wait for a resolver slice", took)
	}
	if got := e.op.posts.Load(); got != 0 {
		t.Fatalf("the operator was asked %d times", got)
	}
}

// The resolver is no open proxy: while a Service serves (its pods Ready,
// no resolver slice in front of it), a request that reaches the resolver
// by its Host or ClusterIP is answered 404, and never reaches the pods.
// Before, it was forwarded, so any pod could call any other team's pods
// through the resolver, around their NetworkPolicies.
func TestServiceNotInFrontIsNotForwarded(t *testing.T) {
	e := newEnv(t, testConfig())
	e.backend(t, "10.244.0.7:8080", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "pod")
	}))
	e.eps.Set(testSvc, "10.244.0.7:8080")
	e.eps.SetInFront(testSvc, false)

	resp, err := newClient(t).Do(e.request(t, t.Context(), "GET", "/", nil))
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode != 404 {
		t.Fatalf("got %d %q, want 404 for a Service the resolver is not in front of", resp.StatusCode, body)
	}
	if n := e.net.dialCount("10.244.0.7:8080"); n != 0 {
		t.Fatalf("the pod was dialled %d times", n)
	}
	if got := metricValue(t, e.r.metrics.Answer.NotInFront.WithLabelValues(admission.ProtocolHTTP)); got != 1 {
		t.Fatalf("not-in-front count = %v, want 1", got)
	}

	// In front again (the Service went to sleep): forwarded.
	e.eps.SetInFront(testSvc, true)
	resp, err = newClient(t).Do(e.request(t, t.Context(), "GET", "/", nil))
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode != 200 || body != "pod" {
		t.Fatalf("in front: got %d %q, want the pod's 200", resp.StatusCode, body)
	}
}

// A request for a Service an ElastiService names waits up to frontGrace
// for its resolver slice, which kube-proxy may act on before this
// resolver's informer has it; then it is held and forwarded as usual.
// Without the slice it is answered 404 once the grace ends.
func TestNamedServiceWaitsForItsResolverSlice(t *testing.T) {
	e := newEnv(t, testConfig())
	late := clusterview.ServiceRef{Namespace: "team", Name: "late"}
	e.r.named = namedSet{testSvc: true, late: true}
	e.backend(t, "10.244.0.8:8080", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "pod")
	}))
	e.eps.Set(testSvc, "10.244.0.8:8080")
	e.eps.SetInFront(testSvc, false)
	e.eps.SetInFront(late, false)
	time.AfterFunc(300*time.Millisecond, func() { e.eps.SetInFront(testSvc, true) })

	resp, err := newClient(t).Do(e.request(t, t.Context(), "GET", "/", nil))
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode != 200 || body != "pod" {
		t.Fatalf("got %d %q, want the pod's 200 once the slice appeared", resp.StatusCode, body)
	}

	req := e.request(t, t.Context(), "GET", "/", nil)
	req.Host = "late.team.svc.cluster.local"
	began := time.Now()
	resp, err = newClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode != 404 {
		t.Fatalf("no slice: got %d %q, want 404", resp.StatusCode, body)
	}
	if took := time.Since(began); took < clusterview.FrontGrace {
		t.Fatalf("answered after %v, before the grace of %v", took, clusterview.FrontGrace)
	}
}
