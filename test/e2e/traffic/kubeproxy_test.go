package traffic

import (
	"context"
	"testing"

	"github.com/elasti-dev/elasti/test/localcluster/realnet"
)

// TestWakeOnEitherKubeProxyMode: with kube-proxy in nftables mode (the
// bed's default) and in iptables mode, a request by short name to a
// sleeping Service goes through that mode's rules to the resolver, wakes
// it, and gets the new pod's answer; so does one to the bare ClusterIP.
// The bed's kube-proxy is back in nftables mode when the test ends.
func TestWakeOnEitherKubeProxyMode(t *testing.T) {
	s := newScenario(t)
	s.waitResolverPorts(1)
	t.Cleanup(func() {
		if err := s.bed.SwitchKubeProxy(context.Background(), realnet.ProxyModeNFTables); err != nil {
			t.Errorf("back to nftables mode: %v", err)
		}
	})
	for _, mode := range []realnet.ProxyMode{realnet.ProxyModeNFTables, realnet.ProxyModeIPTables} {
		t.Run(string(mode), func(t *testing.T) {
			s := s.in(t)
			if err := s.bed.SwitchKubeProxy(s.ctx, mode); err != nil {
				t.Fatal(err)
			}
			for _, way := range []struct{ name, url string }{
				{"short name", "http://" + app + "/"},
				{"ClusterIP", "http://" + s.clusterIP() + "/"},
			} {
				// Awake, the new rules send it to the pod...
				s.e.Eventually("kube-proxy ("+string(mode)+") to route web by "+way.name, func() (bool, string) {
					resp := s.do(realnet.Request{URL: way.url, Timeout: quickTimeout})
					return resp.Status == 200, resp.String()
				})
				// ...and asleep, to the resolver, which wakes it.
				s.sleep()
				s.expectWokenHeld(s.do(realnet.Request{URL: way.url, Timeout: wakeTimeout}))
			}
		})
	}
}
