package realnet

import (
	"slices"
	"testing"
)

// The backends are read with their ports: a slice rewritten to the same
// addresses on another port must not look followed.
func TestDNATBackendsKeepPorts(t *testing.T) {
	rules := `table ip kube-proxy {
	chain service-POT7HRUY-team/web/tcp/http {
		ip daddr 10.0.1.1 tcp dport 80 ip saddr != 10.244.0.0/16 jump mark-for-masquerade
		meta l4proto tcp dnat ip to numgen random mod 2 map { 0 : 10.244.128.10 . 20005, 1 : 10.244.128.13 . 20005 }
	}
	chain service-AAAAAAAA-team/other/tcp/http {
		meta l4proto tcp dnat ip to numgen random mod 1 map { 0 : 10.244.128.9 . 8080 }
	}
}`
	got := dnatBackends(rules, "team", "web")
	if want := []string{"10.244.128.10:20005", "10.244.128.13:20005"}; !slices.Equal(got, want) {
		t.Fatalf("backends %v, want %v", got, want)
	}
}

// kube-proxy's iptables mode: only the DNAT rules of the Service's own
// endpoint chains count, not another Service whose name it prefixes.
func TestIPTablesDNATBackends(t *testing.T) {
	rules := `*nat
-A KUBE-SEP-AAAA -s 10.244.128.10/32 -m comment --comment "team/web:http" -j KUBE-MARK-MASQ
-A KUBE-SEP-AAAA -p tcp -m comment --comment "team/web:http" -m tcp -j DNAT --to-destination 10.244.128.10:20005
-A KUBE-SEP-BBBB -p tcp -m comment --comment "team/web-2:http" -m tcp -j DNAT --to-destination 10.244.128.9:8080
-A KUBE-SEP-CCCC -p tcp -m comment --comment team/web -m tcp -j DNAT --to-destination 10.244.128.13:8080
-A KUBE-SVC-DDDD -m comment --comment "team/web:http -> 10.244.128.10:20005" -j KUBE-SEP-AAAA
COMMIT`
	got := iptablesDNATBackends(rules, "team", "web")
	if want := []string{"10.244.128.10:20005", "10.244.128.13:8080"}; !slices.Equal(got, want) {
		t.Fatalf("backends %v, want %v", got, want)
	}
}

// A Traefik backend is a Service's only by its exact name: web's routes
// are not web-d2's, the Ingress and HTTPRoute forms both count, and the
// namespace must match.
func TestTraefikServiceOf(t *testing.T) {
	for name, want := range map[string]bool{
		"shop-web-80@kubernetes":             true,
		"shop-web-http@kubernetes":           true,
		"shop-web-http-80@kubernetesgateway": true,
		"shop-web-d2-80@kubernetes":          false,
		"shop-web-2-80@kubernetes":           false,
		"shop-web-http-80@kubernetes":        false, // web-http's Ingress backend
		"shop-webby-80@kubernetes":           false,
		"other-web-80@kubernetes":            false,
		"shop-web-80":                        false,
	} {
		if got := traefikServiceOf(name, "shop", "web"); got != want {
			t.Errorf("traefikServiceOf(%q, shop, web) = %v, want %v", name, got, want)
		}
	}
}
