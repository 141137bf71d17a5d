package resolver

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview/clusterviewtest"
	"github.com/elasti-dev/elasti/pkg/resolver/internal/resolvertest"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
)

// The attacker here is any pod that can reach the resolver: it sends
// requests whose Host names Services that do not exist, or exist but are
// not asleep behind elasti, or are named by an ElastiService but not
// fronted yet, or it holds requests for a sleeping Service and leaves. None
// of it may leave state behind in the resolver's maps.

// randomHost is a Host that names a Service and namespace nobody made.
func randomHost(rng *rand.Rand) string {
	return fmt.Sprintf("s%012x.n%08x.svc.cluster.local", rng.Uint64()>>16, rng.Uint32())
}

// newMapsEnv runs a Resolver over an InformerEndpoints that knows the
// Service team/web (fronted, no Ready endpoint), team/plain (not fronted,
// named by nobody) and team/named (named by an ElastiService, not
// fronted).
func newMapsEnv(t *testing.T) (*Resolver, *clusterview.InformerEndpoints) {
	t.Helper()
	client := fake.NewClientset(
		resolvertest.Service("team", "web", resolvertest.SvcPort("http", 80, intstr.FromInt32(8080))),
		resolvertest.ResolverSlice("team", "web"),
		resolvertest.Service("team", "plain", resolvertest.SvcPort("http", 80, intstr.FromInt32(8080))),
		resolvertest.Service("team", "named", resolvertest.SvcPort("http", 80, intstr.FromInt32(8080))),
	)
	e := clusterviewtest.StartEndpoints(t, client, resolvertest.ElastiServiceFor("team", "web"))
	op := newFakeOperator(t)
	cfg := testConfig()
	cfg.OperatorURL = op.srv.URL
	// 100,000 refusals logged at -v=4 would fill the test's log.
	ctx := klog.NewContext(t.Context(), logr.Discard())
	r, err := New(ctx, cfg, Options{Endpoints: e, Named: namedSet{{Namespace: "team", Name: "named"}: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r, e
}

// 100,000 requests with random Hosts, through the handler, leave no key
// in the broadcaster: a Host that names no fronted Service is answered at
// once and the resolver keeps nothing of it.
func TestRandomHostsLeaveNoState(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	r, e := newMapsEnv(t)
	rng := rand.New(rand.NewPCG(1, 2))
	const requests = 100_000
	// Variants of one unknown name: case, trailing dot, short forms,
	// ports, and a Service that exists but is not behind elasti.
	hosts := []string{"Plain.Team", "plain.team.", "plain.team.svc", "plain.team.svc.cluster.local.:80", "plain.team:8080", "PLAIN.TEAM.SVC.CLUSTER.LOCAL"}
	for i := range requests {
		host := randomHost(rng)
		if i%10 == 0 {
			host = hosts[(i/10)%len(hosts)]
		}
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Host = host
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		if w.Code != http.StatusNotFound {
			t.Fatalf("request %d for %q: %d %q, want 404", i, host, w.Code, w.Body.String())
		}
		if n := e.Watched(); n != 0 {
			t.Fatalf("after request %d (Host %q) the broadcaster holds %d keys, want 0", i, host, n)
		}
	}
	if n := r.fwd.Tracked(); n != 0 {
		t.Errorf("%d round-robin counters after requests that reached no pod", n)
	}
	if slots, sources, _ := r.admit.Usage(); slots != 0 || sources != 0 {
		t.Errorf("admission holds %d slots for %d sources after requests that were never held", slots, sources)
	}
}

// A Service an ElastiService names but the resolver is not in front of is
// watched for the front grace only: once its requests have been answered,
// or their clients left, the key is gone.
func TestFrontGraceWatchEndsWithItsRequests(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	r, e := newMapsEnv(t)
	const waiters = 50
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	codes := make(chan int, waiters)
	for range waiters {
		wg.Go(func() {
			req := httptest.NewRequest(http.MethodGet, "/", nil).WithContext(ctx)
			req.Host = "named.team"
			w := httptest.NewRecorder()
			r.ServeHTTP(w, req)
			codes <- w.Code
		})
	}
	resolvertest.Eventually(t, 5*time.Second, "the waiters to watch", func() bool { return e.Watched() == 1 })
	cancel()
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != http.StatusNotFound {
			t.Errorf("a request that left during the front grace got %d, want 404", c)
		}
	}
	if n := e.Watched(); n != 0 {
		t.Fatalf("the broadcaster holds %d keys after every waiter left, want 0", n)
	}

	// One that waits out the grace leaves nothing either.
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.Host = "named.team"
	w := httptest.NewRecorder()
	r.ServeHTTP(w, req)
	if w.Code != http.StatusNotFound {
		t.Fatalf("after the grace: %d, want 404", w.Code)
	}
	if n := e.Watched(); n != 0 {
		t.Fatalf("the broadcaster holds %d keys after the grace ran out, want 0", n)
	}
}

// Requests held for a sleeping Service that leave before it wakes (the
// client gave up, or the hold timed out) leave no key behind.
func TestHeldRequestsThatLeaveLeaveNoWatch(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	r, e := newMapsEnv(t)
	const held = 20
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for range held {
		wg.Go(func() {
			req := httptest.NewRequest(http.MethodGet, "/", nil).WithContext(ctx)
			req.Host = "web.team"
			req.RemoteAddr = "127.0.0.1:40000"
			r.ServeHTTP(httptest.NewRecorder(), req)
		})
	}
	web := clusterview.ServiceRef{Namespace: "team", Name: "web"}
	resolvertest.Eventually(t, 5*time.Second, "every request held", func() bool { return r.holds.Held(web) == held })
	if n := e.Watched(); n != 1 {
		t.Errorf("%d keys watched while %d requests wait for one Service, want 1", n, held)
	}
	cancel()
	wg.Wait()
	resolvertest.Eventually(t, 5*time.Second, "the wake loop to stop", func() bool { return r.holds.Held(web) == 0 })
	if n := e.Watched(); n != 0 {
		t.Fatalf("the broadcaster holds %d keys after every held request left, want 0", n)
	}
}

// randomHostsRequests is how many requests BenchmarkRandomHosts sends per
// iteration: the figure issue 30 asks to leave the heap flat.
const randomHostsRequests = 100_000

// BenchmarkRandomHosts sends randomHostsRequests requests with random
// Hosts, naming Services nobody made, over one keep-alive connection to a
// resolver over an InformerEndpoints, as one attacking pod would, and
// reports how much the live heap grew (after GC): before the fix each
// request left about 440 bytes behind for good. Run it with
// -benchtime=1x.
func BenchmarkRandomHosts(b *testing.B) {
	client := fake.NewClientset(resolvertest.Service("team", "web", resolvertest.SvcPort("http", 80, intstr.FromInt32(8080))), resolvertest.ResolverSlice("team", "web"))
	e := clusterviewtest.StartEndpoints(b, client, resolvertest.ElastiServiceFor("team", "web"))
	op := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer op.Close()
	cfg := DefaultConfig()
	cfg.OperatorURL = op.URL
	r, err := New(klog.NewContext(b.Context(), logr.Discard()), cfg, Options{Endpoints: e, Named: namedSet{}})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	srv := httptest.NewUnstartedServer(r)
	ConfigureServer(srv.Config)
	srv.Start()
	defer srv.Close()
	tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 1}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	rng := rand.New(rand.NewPCG(3, 4))

	var grown float64
	for b.Loop() {
		before := resolvertest.LiveHeap()
		for range randomHostsRequests {
			req, err := http.NewRequest(http.MethodGet, srv.URL+"/", nil)
			if err != nil {
				b.Fatal(err)
			}
			req.Host = randomHost(rng)
			resp, err := hc.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				b.Fatalf("a random Host got %d, want 404", resp.StatusCode)
			}
		}
		grown = float64(int64(resolvertest.LiveHeap())-int64(before)) / (1 << 20)
	}
	b.ReportMetric(grown, "heap-growth-MiB")
	b.ReportMetric(float64(e.Watched()), "watched-keys")
	if grown >= 16 {
		b.Errorf("the live heap grew %.1f MiB over %d requests with random Hosts, want under 16", grown, randomHostsRequests)
	}
}
