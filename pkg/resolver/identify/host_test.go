package identify

import (
	"strings"
	"testing"
)

func TestParseHost(t *testing.T) {
	valid := []struct {
		host, domain, svc, ns, port string
	}{
		{"web.team.svc.cluster.local", "cluster.local", "web", "team", ""},
		{"web.team.svc.cluster.local:8080", "cluster.local", "web", "team", "8080"},
		{"web.team.svc", "cluster.local", "web", "team", ""},
		{"web.team.svc:80", "cluster.local", "web", "team", "80"},
		{"web.team", "cluster.local", "web", "team", ""},
		{"web.team:443", "", "web", "team", "443"},
		{"WEB.Team.SVC.Cluster.Local:80", "cluster.local", "web", "team", "80"},
		{"web.team.svc.cluster.local.", "cluster.local", "web", "team", ""},
		{"web.team.svc.corp.example", "corp.example", "web", "team", ""},
		{"web.team.svc.cluster.local", "", "web", "team", ""},
		{"web.team.svc.k8s.local", ".K8S.local.", "web", "team", ""},
		{" my-svc-1.ns-2 ", "", "my-svc-1", "ns-2", ""},
		// Istio's X-Envoy-Decorator-Operation, as KubeElasti reads it.
		{"web.team.svc.cluster.local:80/*", "cluster.local", "web", "team", "80"},
		{"http://web.team.svc.cluster.local:80/*", "cluster.local", "web", "team", "80"},
		{"https://web.team.svc.cluster.local:8443/*", "cluster.local", "web", "team", "8443"},
		{"HTTP://web.team.svc.cluster.local/api/v1", "cluster.local", "web", "team", ""},
		{"web.team.svc.cluster.local/*", "cluster.local", "web", "team", ""},
	}
	for _, tc := range valid {
		svc, ns, port, err := ParseHost(tc.host, tc.domain)
		if err != nil {
			t.Errorf("ParseHost(%q, %q): unexpected error %v", tc.host, tc.domain, err)
			continue
		}
		if svc != tc.svc || ns != tc.ns || port != tc.port {
			t.Errorf("ParseHost(%q, %q) = %q, %q, %q; want %q, %q, %q", tc.host, tc.domain, svc, ns, port, tc.svc, tc.ns, tc.port)
		}
	}

	invalid := []struct{ host, domain, want string }{
		{"", "", "empty host"},
		{"http://", "", "empty host"},
		{"/*", "", "empty host"},
		{"ftp://web.team/*", "", "port"},
		{"web", "", "not a Kubernetes service name"},
		{"web:80", "", "not a Kubernetes service name"},
		{"web.team.cluster", "", "not a Kubernetes service name"},
		{"web.team.svc.other.domain", "cluster.local", "cluster domain"},
		{"web.team.pod.cluster.local", "cluster.local", "not a Kubernetes service name"},
		{"10.0.0.1", "", "not a Kubernetes service name"},
		{"10.0.0.1:80", "", "not a Kubernetes service name"},
		{"[::1]:80", "", "not a Kubernetes service name"},
		{"web.team:http", "", "port"},
		{"web.team:0", "", "port"},
		{"web.team:70000", "", "port"},
		{"web.team:080", "", "port"},
		{"web.team:+80", "", "port"},
		// Unicode case folding would make the Kelvin sign a "k".
		{"web.\u212aube", "", "not a valid namespace"},
		{"\u017fvc.team", "", "not a valid service name"},
		{"web.team:", "", "port"},
		{"web.team:80:90", "", "too many colons"},
		{"1web.team", "", "not a valid service name"},
		{"web_x.team", "", "not a valid service name"},
		{"web.te_am", "", "not a valid namespace"},
		{".team", "", "not a valid service name"},
		{"web..svc", "", "not a valid namespace"},
		{strings.Repeat("a", 64) + ".team", "", "not a valid service name"},
		{strings.Repeat("a", 70000) + ".team", "", "(70005 bytes)"},
	}
	for _, tc := range invalid {
		svc, ns, port, err := ParseHost(tc.host, tc.domain)
		if err == nil {
			t.Errorf("ParseHost(%q) = %q, %q, %q; want an error", tc.host, svc, ns, port)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseHost(%q) error %q does not mention %q", tc.host, err, tc.want)
		}
	}
}
