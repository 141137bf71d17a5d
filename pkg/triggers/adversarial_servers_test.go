package triggers

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

// A trigger naming the author's server with a Host header that names the
// default server (issue 30, item 1) is refused before any request: it is
// not taken for the default server, gets no credential, and its server
// never hears from the operator.
func TestHostHeaderNamingTheDefaultServerIsRefused(t *testing.T) {
	const credential = "Bearer operator-" + marker
	def := newFakeProm(t, always(http.StatusOK, vector(`"1"`)))
	attacker := newFakePromOn(t, "127.0.0.2:0", always(http.StatusInternalServerError, `{"status":"error","errorType":"internal","error":"`+marker+`"}`))
	defHost := strings.TrimPrefix(def.URL, "http://")
	_, defPort, _ := net.SplitHostPort(defHost)
	for _, host := range []string{defHost, "127.0.0.1.:" + defPort, "[::ffff:127.0.0.1]:" + defPort, "localhost:" + defPort, "LOCALHOST:" + defPort} {
		t.Run(host, func(t *testing.T) {
			d := Defaults{ServerAddress: def.URL, AuthorizationHeader: credential}
			meta := `{"query":"q","threshold":"5","serverAddress":"` + attacker.URL + `","headers":{"Host":"` + host + `"}}`
			v, err := Evaluate(t.Context(), testClient(), []v1alpha1.ScaleTrigger{trigger(meta)}, cooldown, d)
			if v.Idle || ReasonOf(err) != ReasonInvalidMetadata {
				t.Fatalf("Evaluate = %+v, %v; want refused with InvalidMetadata", v, err)
			}
			if strings.Contains(err.Error(), marker) {
				t.Errorf("error %q quotes the author's server", err)
			}
			if n := len(attacker.seen()) + len(def.seen()); n != 0 {
				t.Fatalf("%d requests were sent; want none", n)
			}
		})
	}
	// The same trick does not pass --prometheus-allowed-servers either.
	allowed, err := ParseServerPrefixes(def.URL)
	if err != nil {
		t.Fatal(err)
	}
	meta := `{"query":"q","threshold":"5","serverAddress":"` + attacker.URL + `","headers":{"Host":"` + defHost + `"}}`
	if _, err := Evaluate(t.Context(), testClient(), []v1alpha1.ScaleTrigger{trigger(meta)}, cooldown, Defaults{AllowedServers: allowed}); ReasonOf(err) != ReasonInvalidMetadata {
		t.Errorf("allowed servers: Evaluate error %v, want InvalidMetadata", err)
	}
	if n := len(attacker.seen()); n != 0 {
		t.Fatalf("the author's server got %d requests", n)
	}
}

// newFakePromOn is newFakeProm listening on addr, a loopback address.
func newFakePromOn(t *testing.T, addr string, answer func(string) (int, string)) *fakeProm {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s: %v", addr, err)
	}
	f := newFakeProm(t, answer)
	f.Close()
	f.Server = httptest.NewUnstartedServer(f.Config.Handler)
	f.Listener = l
	f.Start()
	t.Cleanup(f.Close)
	return f
}

// The Host header is allowed when it names the URL's own server, written
// any way that names the same dial address, and refused otherwise.
func TestHostHeaderMustNameTheURLsServer(t *testing.T) {
	for _, tt := range []struct {
		addr, host string
		ok         bool
	}{
		{"http://prom:9090", "prom:9090", true},
		{"http://prom:9090", "PROM:9090", true},
		{"http://PROM:9090", "prom:9090", true},
		{"http://prom:9090", "", true},
		{"http://prom", "prom", true},
		{"http://prom", "prom:80", true},
		{"http://prom:80", "prom", true},
		{"https://prom", "prom:443", true},
		{"https://prom", "prom:80", false},
		{"http://[::1]:9090", "[::1]:9090", true},
		{"http://[::1]", "[::1]", true},
		{"http://[::1]", "::1", false},
		{"http://[::1]:80", "::1:80", false},
		{"http://user:pw@prom:9090", "prom:9090", true},
		{"http://%E4%B8%AD.example", "xn--fiq.example", true},
		{"http://prom:9090", "prom.:9090", false},
		{"http://prom.:9090", "prom:9090", false},
		{"http://prom:9090", "prom:09090", false},
		{"http://prom:9090", "prom:9091", false},
		{"http://prom:9090", "prom", false},
		{"http://prom:9090", "evil.example:9090", false},
		{"http://prom:9090", "%70rom:9090", false},
		{"http://prom:9090", "user@prom:9090", false},
		{"http://prom:9090", "prom:9090/x", false},
		{"http://prom:9090", "[prom]:9090", false},
		{"http://prom:9090", "prom:9090:9090", false},
		{"http://127.0.0.2:1", "127.0.0.1:1", false},
	} {
		headers := map[string]string{}
		if tt.host != "" {
			headers["Host"] = tt.host
		}
		raw, _ := json.Marshal(map[string]any{"query": "q", "threshold": "1", "serverAddress": tt.addr, "headers": headers})
		_, err := ParsePrometheus(raw, Defaults{})
		if tt.ok && err != nil {
			t.Errorf("%s with Host %q: %v, want accepted", tt.addr, tt.host, err)
		}
		if !tt.ok && ReasonOf(err) != ReasonInvalidMetadata {
			t.Errorf("%s with Host %q: %v, want InvalidMetadata", tt.addr, tt.host, err)
		}
		// ValidatePrometheus, which knows no defaults, says the same.
		if err2 := ValidatePrometheus(raw); (err2 == nil) != tt.ok {
			t.Errorf("ValidatePrometheus(%s with Host %q) = %v, want ok %v", tt.addr, tt.host, err2, tt.ok)
		}
	}
	// Without serverAddress the default's is the URL the Host must match.
	for host, ok := range map[string]bool{"prom:9090": true, "evil:9090": false} {
		raw := json.RawMessage(`{"query":"q","threshold":"1","headers":{"Host":"` + host + `"}}`)
		if _, err := ParsePrometheus(raw, Defaults{ServerAddress: "http://prom:9090"}); (err == nil) != ok {
			t.Errorf("default server with Host %q: %v, want ok %v", host, err, ok)
		}
	}
	// Every Host entry counts, whatever its case: which one net/http would
	// send depends on map order.
	raw := json.RawMessage(`{"query":"q","threshold":"1","serverAddress":"http://prom:9090","headers":{"Host":"prom:9090","host":"evil:9090"}}`)
	if _, err := ParsePrometheus(raw, Defaults{}); ReasonOf(err) != ReasonInvalidMetadata {
		t.Errorf("two Host entries, one naming another server: %v, want InvalidMetadata", err)
	}
}

// The default server is recognised by the address dialled, written any way
// that dials it, and by nothing else.
func TestDefaultServerIdentityVariants(t *testing.T) {
	for _, tt := range []struct {
		def, server string
		want        bool
	}{
		{"http://prom:9090", "http://PROM:9090", true},
		{"http://prom:9090", "HTTP://Prom:9090/", true},
		{"http://prom:9090", "http://prom.:9090", false},
		{"http://prom.:9090", "http://prom:9090", false},
		{"http://[::1]:9090", "http://[::1]:9090", true},
		{"http://[::1]:9090", "http://[0:0:0:0:0:0:0:1]:9090", false},
		{"http://prom", "http://prom:80", true},
		{"http://prom:80", "http://prom", true},
		{"https://prom", "https://prom:443", true},
		{"http://prom", "http://prom:443", false},
		{"http://prom:9090", "http://prom:09090", false},
		{"http://xn--fiq.example", "http://%E4%B8%AD.example", true},
		{"http://xn--fiq.example", "http://中.example", true},
		// net/http dials the Kelvin sign as k (IDNA maps it), so it is k.
		{"http://k:9090", "http://\u212a:9090", true},
		{"http://prom:9090", "http://ｐrom:9090", true},
		{"http://prom:9090", "http://user:pw@prom:9090", true},
		{"http://prom:9090", "http://prom:9090@evil:9090", false},
		{"http://127.0.0.1:1", "http://127.0.0.2:1", false},
	} {
		if got := isDefaultServer(tt.server, tt.def); got != tt.want {
			t.Errorf("isDefaultServer(%q, %q) = %v, want %v", tt.server, tt.def, got, tt.want)
		}
	}
}

// Headers that choose a tenant or an identity are refused on the default
// server unless the operator allows them, and go to any other server.
func TestTenantHeadersOnTheDefaultServer(t *testing.T) {
	const def = "http://prom:9090"
	for name := range identityHeaders {
		for _, written := range []string{name, strings.ToLower(name), strings.ToUpper(name)} {
			raw, _ := json.Marshal(map[string]any{"query": "q", "threshold": "1", "headers": map[string]string{written: "v"}})
			_, err := ParsePrometheus(raw, Defaults{ServerAddress: def})
			if ReasonOf(err) != ReasonInvalidMetadata {
				t.Errorf("%s on the default server: %v, want InvalidMetadata", written, err)
			}
			// Written as the default's address, it is the default server.
			raw, _ = json.Marshal(map[string]any{"query": "q", "threshold": "1", "serverAddress": "HTTP://PROM:9090/x", "headers": map[string]string{written: "v"}})
			if _, err := ParsePrometheus(raw, Defaults{ServerAddress: def}); ReasonOf(err) != ReasonInvalidMetadata {
				t.Errorf("%s on the default server written out: %v, want InvalidMetadata", written, err)
			}
			for _, list := range []string{written, "*", "x-other, " + written} {
				allowed, err := ParseTenantHeaders(list)
				if err != nil {
					t.Fatal(err)
				}
				raw, _ := json.Marshal(map[string]any{"query": "q", "threshold": "1", "headers": map[string]string{written: "v"}})
				if _, err := ParsePrometheus(raw, Defaults{ServerAddress: def, TenantHeaders: allowed}); err != nil {
					t.Errorf("%s allowed by %q: %v", written, list, err)
				}
			}
			raw, _ = json.Marshal(map[string]any{"query": "q", "threshold": "1", "serverAddress": "http://other:9090", "headers": map[string]string{written: "v"}})
			if _, err := ParsePrometheus(raw, Defaults{ServerAddress: def}); err != nil {
				t.Errorf("%s on another server: %v", written, err)
			}
		}
	}
	// Allowing one does not allow another.
	allowed, _ := ParseTenantHeaders("Authorization")
	raw := json.RawMessage(`{"query":"q","threshold":"1","headers":{"X-Scope-OrgID":"other-team"}}`)
	if _, err := ParsePrometheus(raw, Defaults{ServerAddress: def, TenantHeaders: allowed}); ReasonOf(err) != ReasonInvalidMetadata {
		t.Errorf("X-Scope-OrgID with only Authorization allowed: %v, want InvalidMetadata", err)
	}
	if _, err := ParseTenantHeaders("X-Scope-OrgID, bad name"); err == nil {
		t.Error("ParseTenantHeaders accepted a name that is no HTTP token")
	}
}

// dialRecorder is a Transport that records the address net/http dials and
// connects nowhere.
type dialRecorder struct {
	mu    sync.Mutex
	dials []string
}

var errNoDial = errors.New("test transport: not connecting")

func (r *dialRecorder) transport() *http.Transport {
	return &http.Transport{
		Proxy: nil,
		DialContext: func(_ context.Context, _, addr string) (net.Conn, error) {
			r.mu.Lock()
			r.dials = append(r.dials, addr)
			r.mu.Unlock()
			return nil, errNoDial
		},
	}
}

// FuzzServerIdentityIsWhatIsDialed builds, for any serverAddress and Host
// header ParsePrometheus accepts, the request Query would send and lets
// net/http's own Transport pick the address to dial. That address is the
// identity the checks computed (serverOf), and the credential is added
// exactly when it is the default server's.
func FuzzServerIdentityIsWhatIsDialed(f *testing.F) {
	const def = "http://127.0.0.1:1"
	for _, seed := range [][2]string{
		{"http://127.0.0.2:1", "127.0.0.1:1"},
		{"http://127.0.0.1:1", "127.0.0.1:1"},
		{"http://127.0.0.1:1/x", ""},
		{"HTTP://LOCALHOST:1", "localhost:1"},
		{"http://127.0.0.1.:1", ""},
		{"http://[::1]:1", "[::1]:1"},
		{"http://[::ffff:127.0.0.1]:1", ""},
		{"http://u:p@127.0.0.1:1", ""},
		{"http://127.0.0.1:1@127.0.0.2:1", ""},
		{"http://%E4%B8%AD.example", "xn--fiq.example"},
		{"http://\u212a:1", "k:1"},
		{"https://127.0.0.1", "127.0.0.1:443"},
		{"http://127.0.0.1:01", ""},
		{"http://[fe80::1%25lo]:1", ""},
	} {
		f.Add(seed[0], seed[1])
	}
	defServer, _ := serverOf(def)
	f.Fuzz(func(t *testing.T, addr, host string) {
		headers := map[string]string{}
		if host != "" {
			headers["Host"] = host
		}
		raw, err := json.Marshal(map[string]any{"query": "q", "threshold": "1", "serverAddress": addr, "headers": headers})
		if err != nil {
			return
		}
		p, err := ParsePrometheus(raw, Defaults{ServerAddress: def, AuthorizationHeader: "Bearer operator"})
		if err != nil {
			return
		}
		target, err := queryURL(p.ServerAddress, "q")
		if err != nil {
			return
		}
		req, err := newQueryRequest(t.Context(), target, p.Headers)
		if err != nil {
			return
		}
		rec := &dialRecorder{}
		resp, err := (&http.Client{Transport: rec.transport()}).Do(req)
		if err == nil {
			_ = resp.Body.Close()
			t.Fatal("a request succeeded through a transport that connects nowhere")
		}
		if len(rec.dials) == 0 {
			return // refused by net/http before dialling: nothing sent
		}
		got := lowerASCII(rec.dials[0])
		identity, ok := serverOf(p.ServerAddress)
		if !ok {
			t.Fatalf("%q was accepted and dialled %s, but serverOf refuses it", p.ServerAddress, got)
		}
		if got != identity.dialAddress() {
			t.Fatalf("%q (Host %q) dials %s; the checks took it for %s", p.ServerAddress, host, got, identity.dialAddress())
		}
		_, withCredential := p.Headers["Authorization"]
		if withCredential && got != defServer.dialAddress() {
			t.Fatalf("%q (Host %q) dials %s with the credential; the default server is %s", p.ServerAddress, host, got, defServer.dialAddress())
		}
		// The Host the server is told, when the trigger sets one, names the
		// same server.
		if h := req.Host; host != "" {
			hh, port, ok := splitHostHeader(h)
			if port == "" {
				port = defaultPort[identity.scheme]
			}
			if !ok || net.JoinHostPort(dialHost(hh), port) != got {
				t.Fatalf("%q is sent with Host %q, another server than the %s dialled", p.ServerAddress, h, got)
			}
		}
	})
}
