package resolver

import (
	"io"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
)

// queueLimits bounds the queues per Service and in all, and nothing else.
func queueLimits(perService, global int) admissionLimits {
	return admissionLimits{perService: perService, global: global, perSource: global, heldBytes: 1 << 40, requestBytes: 1 << 40, namespaceShare: 100}
}

func TestAdmissionBoundsPerServiceThenGlobally(t *testing.T) {
	queued := prometheus.NewGauge(prometheus.GaugeOpts{Name: "queued"})
	a := newAdmission(queueLimits(2, 3), nil, queued)
	web, api := clusterview.ServiceRef{Namespace: "shop", Name: "web"}, clusterview.ServiceRef{Namespace: "shop", Name: "api"}
	client := netip.MustParseAddr("10.244.0.7")
	r1, _ := a.admit(web, client, 0)
	_, _ = a.admit(web, client, 0)
	if _, refused := a.admit(web, client, 0); refused.scope != ScopeService {
		t.Fatalf("third slot for one service: overflow %q, want %q", refused.scope, ScopeService)
	}
	if _, refused := a.admit(api, client, 0); refused.scope != "" {
		t.Fatalf("another service within the global bound was refused (%q)", refused.scope)
	}
	if _, refused := a.admit(api, client, 0); refused.scope != ScopeGlobal {
		t.Fatalf("past the global bound: overflow %q, want %q", refused.scope, ScopeGlobal)
	}
	r1()
	r1() // releasing twice frees one slot only
	if got := a.admitted(web); got != 1 {
		t.Fatalf("web holds %d slots after one release, want 1", got)
	}
	if _, refused := a.admit(api, client, 0); refused.scope != "" {
		t.Fatalf("a released slot was not reusable (%q)", refused.scope)
	}
	if _, refused := a.admit(web, client, 0); refused.scope != ScopeGlobal {
		t.Fatalf("global bound not enforced after reuse: %q", refused.scope)
	}
	if got := testutil.ToFloat64(queued); got != 3 {
		t.Fatalf("queued gauge = %v, want the 3 slots taken", got)
	}
}

// One client joining a wake under way costs no wake, but it cannot take
// a Service's whole queue: past its share it is refused while another
// client still gets in, and its entry is gone once it holds nothing.
func TestAdmissionBoundsEachSource(t *testing.T) {
	a := newAdmission(admissionLimits{perService: 10, global: 100, perSource: 4, heldBytes: 1 << 20, requestBytes: 1 << 40, namespaceShare: 100}, nil,
		prometheus.NewGauge(prometheus.GaugeOpts{Name: "q"}))
	web := clusterview.ServiceRef{Namespace: "shop", Name: "web"}
	noisy, quiet := netip.MustParseAddr("10.244.0.7"), netip.MustParseAddr("10.244.0.8")
	var releases []func()
	for i := range 4 {
		release, refused := a.admit(web, noisy, 0)
		if refused.scope != "" {
			t.Fatalf("request %d of one client, within its share, refused (%q)", i+1, refused.scope)
		}
		releases = append(releases, release)
	}
	if _, refused := a.admit(web, noisy, 0); refused.scope != ScopeClient {
		t.Fatalf("past its share: %q, want %q", refused.scope, ScopeClient)
	}
	// The share is per client, not per Service.
	if _, refused := a.admit(clusterview.ServiceRef{Namespace: "shop", Name: "api"}, noisy, 0); refused.scope != ScopeClient {
		t.Fatalf("past its share, for another Service: %q, want %q", refused.scope, ScopeClient)
	}
	if release, refused := a.admit(web, quiet, 0); refused.scope != "" {
		t.Fatalf("another client was refused (%q)", refused.scope)
	} else {
		release()
	}
	releases[0]()
	if _, refused := a.admit(web, noisy, 0); refused.scope != "" {
		t.Fatalf("a released share was not reusable (%q)", refused.scope)
	}
	for _, release := range releases {
		release()
	}
	if _, sources, _ := a.usage(); sources != 1 {
		t.Fatalf("%d sources tracked, want 1: entries must go when a client holds nothing", sources)
	}
}

// Held bytes have one budget: a request that would pass it is refused
// whatever the queues say, and released bytes are reusable.
func TestAdmissionBoundsHeldBytes(t *testing.T) {
	a := newAdmission(admissionLimits{perService: 100, global: 100, perSource: 100, heldBytes: 10 << 10, requestBytes: 1 << 40, namespaceShare: 100}, nil,
		prometheus.NewGauge(prometheus.GaugeOpts{Name: "q"}))
	web, client := clusterview.ServiceRef{Namespace: "shop", Name: "web"}, netip.MustParseAddr("10.244.0.7")
	r1, _ := a.admit(web, client, 6<<10)
	if _, refused := a.admit(web, client, 5<<10); refused.scope != ScopeBytes {
		t.Fatalf("past the byte budget: %q, want %q", refused.scope, ScopeBytes)
	}
	if _, refused := a.admit(web, client, 4<<10); refused.scope != "" {
		t.Fatalf("within the byte budget: refused (%q)", refused.scope)
	}
	r1()
	r1()
	if _, _, bytes := a.usage(); bytes != 4<<10 {
		t.Fatalf("%d bytes charged after a double release, want %d", bytes, 4<<10)
	}
	if _, refused := a.admit(web, client, 6<<10); refused.scope != "" {
		t.Fatalf("released bytes were not reusable (%q)", refused.scope)
	}
}

func TestHeldRequestBytesCountsWhatAHoldKeeps(t *testing.T) {
	req, err := http.NewRequest("GET", "http://web.shop/path?q=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.RequestURI = "/path?q=1"
	req.Header["Cookie"] = []string{"a=1", "b=22"}
	// 9 (target) + 8 (Host) + 2 × 6 (name) + 3 + 4 (values)
	const head = 9 + 8 + 12 + 7
	if got := heldRequestBytes(req, false); got != head {
		t.Fatalf("heldRequestBytes = %d, want %d", got, head)
	}
	// An HTTP/2 body that streams fills its stream window in memory; an
	// HTTP/1 one waits in the kernel, a buffered one has its own budget.
	req.Body, req.ContentLength = io.NopCloser(strings.NewReader("grpc")), -1
	if got := heldRequestBytes(req, false); got != head {
		t.Fatalf("HTTP/1 streaming body: %d, want %d", got, head)
	}
	req.ProtoMajor = 2
	if got := heldRequestBytes(req, false); got != head+serverMaxReceiveBufferPerStream {
		t.Fatalf("HTTP/2 streaming body: %d, want %d", got, head+serverMaxReceiveBufferPerStream)
	}
	if got := heldRequestBytes(req, true); got != head {
		t.Fatalf("HTTP/2 buffered body: %d, want %d", got, head)
	}
}
