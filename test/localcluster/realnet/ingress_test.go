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
