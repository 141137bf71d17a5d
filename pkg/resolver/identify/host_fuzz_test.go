package identify

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
)

// maxHostErrorBytes bounds a host parse error: it is sent to the client and
// logged, and the header it came from may be 64 KiB.
const maxHostErrorBytes = 1024

// hostSeeds are Host (or HEADER_FOR_HOST) values a client or a mesh sends,
// and the near misses around them.
var hostSeeds = []string{
	"web.team", "web.team.svc", "web.team.svc.cluster.local", "web.team.svc.cluster.local.",
	"WEB.Team.SVC.Cluster.Local:80", "web.team:8080", "web.team:080", "web.team:+80", "web.team:0",
	"web.team:65536", "web.team:", "web.team:80:90", " web.team ", "web.team.svc.other.domain",
	"http://web.team.svc.cluster.local:80/*", "HTTPS://web.team/api", "web.team.svc.cluster.local:80/*",
	"/*", "http://", "", ".", "..", "web..team", ".web.team", "web.team..", "web.team.svc..",
	"10.0.0.42", "10.0.0.42:80", "10.0.0.42:080", "10.0.0.42:+80", "[fd00::42]", "[fd00::42]:80",
	"fd00::42", "[FD00::42]:80", "[::ffff:10.0.0.42]:80", "[fe80::1%eth0]:80", "[::1", "::1]:80",
	"1web.team", "web_x.team", "web.te_am", "web-.team", "-web.team", "web.team-",
	strings.Repeat("a", 63) + ".team", strings.Repeat("a", 64) + ".team", "web." + strings.Repeat("n", 64),
	strings.Repeat("a.", 200) + "team", "web.\u212aube", "web.te\u0131m", "ſvc.team", "web.team\u00a0",
	"web.team\x00", "web.team\r\nX-Evil: 1", "web%2eteam", "web.team#frag", "web.team?x=1",
}

// FuzzParseHost: whatever the header holds, ParseHost never panics, an
// accepted host names a valid Service in a valid namespace that the input
// spells (ASCII case aside), the port is canonical, the answer does not
// depend on ASCII case or on the call, and errors stay short.
func FuzzParseHost(f *testing.F) {
	for _, h := range hostSeeds {
		f.Add(h, "")
		f.Add(h, "cluster.local")
	}
	f.Add("web.team.svc.corp.example", ".CORP.example.")
	f.Add("web.team.svc.k8s", "K8S")
	f.Fuzz(func(t *testing.T, host, domain string) {
		svc, ns, port, err := ParseHost(host, domain)
		svc2, ns2, port2, err2 := ParseHost(host, domain)
		if svc != svc2 || ns != ns2 || port != port2 || errString(err) != errString(err2) {
			t.Fatalf("ParseHost(%q, %q) is not deterministic", host, domain)
		}
		if err != nil {
			if svc != "" || ns != "" || port != "" {
				t.Fatalf("ParseHost(%q) failed but returned %q %q %q", host, svc, ns, port)
			}
			if n := len(err.Error()); n > maxHostErrorBytes {
				t.Fatalf("ParseHost(%d-byte host): %d-byte error", len(host), n)
			}
		} else {
			checkIdentified(t, host, clusterview.ServiceRef{Namespace: ns, Name: svc}, port)
			if !strings.Contains(asciiLower(host), svc+"."+ns) {
				t.Fatalf("ParseHost(%q) = %s/%s, which the host does not spell", host, ns, svc)
			}
		}
		usvc, uns, uport, uerr := ParseHost(asciiUpper(host), domain)
		if usvc != svc || uns != ns || uport != port || (uerr == nil) != (err == nil) {
			t.Fatalf("ParseHost depends on case: %q gives %q %q %q %v, %q gives %q %q %q %v",
				host, svc, ns, port, err, asciiUpper(host), usvc, uns, uport, uerr)
		}
	})
}

// FuzzIdentifyHost runs the shared proxy port's identify layer, with and
// without HEADER_FOR_HOST and a ClusterIP index: no panic, a valid
// ServiceRef and canonical port on success, the header wins over Host
// whenever it is set, and the same request always gets the same answer.
func FuzzIdentifyHost(f *testing.F) {
	for _, h := range hostSeeds {
		f.Add(h, "", false)
		f.Add("10.0.0.1:8012", h, true)
		f.Add(h, h, true)
	}
	f.Fuzz(func(t *testing.T, host, header string, useHeader bool) {
		hosts := Hosts{ClusterDomain: DefaultClusterDomain, ClusterIPs: fuzzClusterIPs{
			"10.0.0.42": {Namespace: "team", Name: "web"},
			"fd00::42":  {Namespace: "team", Name: "api"},
		}}
		if useHeader {
			hosts.Header = "X-Envoy-Decorator-Operation"
		}
		req := &http.Request{Host: host, Header: http.Header{}}
		if header != "" {
			req.Header.Set(hosts.Header, header)
		}
		svc, port, err := hosts.Identify(req)
		svc2, port2, err2 := hosts.Identify(req)
		if svc != svc2 || port != port2 || errString(err) != errString(err2) {
			t.Fatalf("Identify(%q, %q) is not deterministic", host, header)
		}
		if err != nil {
			if n := len(err.Error()); n > maxHostErrorBytes {
				t.Fatalf("Identify: %d-byte error", n)
			}
		} else {
			checkIdentified(t, host+" / "+header, svc, port)
		}
		if useHeader && header != "" {
			// The header alone decides; Host is not even a fallback.
			alone := &http.Request{Host: header, Header: http.Header{}}
			hosts.Header = ""
			hsvc, hport, herr := hosts.Identify(alone)
			if hsvc != svc || hport != port || errString(herr) != errString(err) {
				t.Fatalf("with header %q: %v %q %v; as Host: %v %q %v", header, svc, port, err, hsvc, hport, herr)
			}
		}
	})
}

// checkIdentified fails unless svc is a Service name, its namespace a
// namespace name, and port empty or a canonical port number.
func checkIdentified(t *testing.T, input string, svc clusterview.ServiceRef, port string) {
	t.Helper()
	if errs := validation.IsDNS1035Label(svc.Name); len(errs) > 0 {
		t.Fatalf("%q: Service name %q: %v", input, svc.Name, errs)
	}
	if errs := validation.IsDNS1123Label(svc.Namespace); len(errs) > 0 {
		t.Fatalf("%q: namespace %q: %v", input, svc.Namespace, errs)
	}
	if port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
			t.Fatalf("%q: port %q is not a canonical port number", input, port)
		}
	}
}

// fuzzClusterIPs is a ClusterIP index of two Services.
type fuzzClusterIPs map[string]clusterview.ServiceRef

func (f fuzzClusterIPs) ServiceForClusterIP(ip string) (clusterview.ServiceRef, bool) {
	s, ok := f[ip]
	return s, ok
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func asciiUpper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}
