package traffic

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/elasti-dev/elasti/pkg/localcluster/realnet"
	"github.com/elasti-dev/elasti/pkg/resolver"
	"github.com/elasti-dev/elasti/pkg/testenv"
)

// frontDrain is the drain of manifests/' resolver after a switch to serve:
// how long it still forwards what kube-proxy and ingress controllers send
// it for a Service whose resolver slice just went.
const frontDrain = resolver.DefaultFrontDrain

// TestResolverIsNoOpenProxy: the resolver forwards only for a Service it
// is in front of. A pod of another team's namespace that addresses the
// resolver itself while web serves, by Host on the proxy port (through the
// resolver Service) or on web's own resolver ports (HTTP and raw TCP),
// gets a 404 or a closed connection, never web's pods. Before, all three
// reached them, around any NetworkPolicy guarding web.
//
// Both sides of the drain are checked: right after a wake switches web to
// serve, what still reaches the resolver gets the pod's answer; once the
// drain is over, the same request gets 404.
func TestResolverIsNoOpenProxy(t *testing.T) {
	s := newProtocolScenario(t)
	other := testenv.New(t)
	attacker, err := s.bed.Client(s.ctx, other.NS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(attacker.Close)
	do := func(req realnet.Request) realnet.Response {
		t.Helper()
		resp, err := attacker.Do(s.ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resolverIP := s.resolverPodIP()
	byHost := realnet.Request{URL: fmt.Sprintf("http://%s.%s:8012/", resolverService, elastiNamespace), Host: s.fqdn(), Timeout: quickTimeout}
	byPort := realnet.Request{URL: fmt.Sprintf("http://%s:%d/", resolverIP, s.resolverPortFor(80)), Timeout: quickTimeout}
	byTCP := realnet.Request{URL: fmt.Sprintf("tcp://%s:%d", resolverIP, s.resolverPortFor(7000)), Protocol: realnet.ProtocolTCP, Body: "ping", Timeout: quickTimeout}
	refused := func(when string) {
		t.Helper()
		if resp := do(byHost); resp.Status != 404 {
			t.Errorf("%s, by Host through the resolver Service: %s; want 404", when, resp)
		}
		if resp := do(byPort); resp.Status != 404 {
			t.Errorf("%s, on web's resolver port: %s; want 404", when, resp)
		}
		if resp := do(byTCP); strings.Contains(resp.Body, "ping") {
			t.Errorf("%s, raw TCP on web's resolver port reached a pod: %s; want the connection closed", when, resp)
		}
	}
	// The operator's first sync may have put the resolver in front for a
	// moment, before web's pod was listed: let that drain pass.
	time.Sleep(frontDrain + time.Second)
	refused("while web serves")

	// Asleep, the resolver is in front: the same Host request wakes web.
	s.sleep()
	s.expectWoken(do(realnet.Request{URL: byHost.URL, Host: byHost.Host, Timeout: wakeTimeout}))
	// Just switched to serve: still forwarded, for what kube-proxy and
	// the ingress controllers send before they follow.
	served := time.Now()
	if resp := do(byHost); resp.Status != 200 {
		t.Errorf("%v after the switch to serve, within the drain: %s; want the pod's 200", time.Since(served).Round(time.Millisecond), resp)
	}
	if wait := frontDrain - time.Since(served); wait > 0 {
		time.Sleep(wait + time.Second)
	}
	refused("after the drain")
}
