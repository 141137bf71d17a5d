package podnet

import (
	"net/netip"
	"testing"
)

func TestIPAllocatorStaysInItsHalfAndNeverRepeatsALiveIP(t *testing.T) {
	a := NewIPAllocator()
	sandboxes := netip.MustParsePrefix(SandboxPodCIDR)
	seen := map[string]bool{}
	for range 600 {
		ip, err := a.Allocate()
		if err != nil {
			t.Fatal(err)
		}
		addr := netip.MustParseAddr(ip)
		if !sandboxes.Contains(addr) || addr.As4()[3] == 0 || addr.As4()[3] == 255 {
			t.Fatalf("allocated %s outside %s or a .0/.255 address", ip, SandboxPodCIDR)
		}
		if seen[ip] {
			t.Fatalf("%s handed out twice while in use", ip)
		}
		seen[ip] = true
	}
	first, _ := a.Allocate()
	a.Release(first)
	next, _ := a.Allocate()
	if next == first {
		t.Errorf("a released IP came back at once (%s); it should be reused as late as possible", first)
	}
}

func TestKwokPodsAndSandboxesNeverShareAnIP(t *testing.T) {
	kwok := netip.MustParsePrefix("10.244.0.0/17") // localcluster.KwokPodCIDR
	if kwok.Overlaps(netip.MustParsePrefix(SandboxPodCIDR)) {
		t.Fatalf("%s overlaps kwok's %s", SandboxPodCIDR, kwok)
	}
}
