package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

const deploymentKind = elastiv1alpha1.KindDeployment

// The end-to-end tests that sent requests straight to an in-process
// resolver have real-path versions in test/e2e/traffic, where a client pod
// calls the Service by DNS name or ClusterIP through kube-proxy, against
// elasti from manifests/: TestProtocolsPassIntact (large bodies, gRPC,
// WebSocket, awake and held at zero), TestProbeIsAnsweredWithoutWaking,
// TestOperatorDownThenBack (held, queue overflow, the operator's return)
// and TestBurstAtZeroIsHeldAndWakesOnce. How the resolver rewrites a
// forwarded request, and its 504, are unit tests in pkg/resolver. What is
// left here tests the resolver itself with real informers and pod IPs.

// TestDeletedEndpointIsNeverUsed tests the resolver's own choice of
// endpoint, so it stays here, sending to the resolver directly: on the real
// path a Service in serve mode is reached through kube-proxy and the
// resolver is not in it (test/e2e/traffic tests that path). Two of three
// pods are deleted; once the resolver's source, the Service's
// EndpointSlice, lists only the third, every request goes to it. Before
// that, the resolver may still list a deleted pod that no longer accepts:
// it must then try another endpoint, never answer 502 (issue #10's flake;
// pkg/resolver's TestGoneEndpointsStillListedCostNoRequest pins it down).
func TestDeletedEndpointIsNeverUsed(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.FrontedAfterProxy("web", 3)
	before := s.ReadyPodIPs("web")
	s.Scale(deploymentKind, "web", 1)
	var remaining []string
	s.Eventually("one ready pod left, the Service's slice listing only it, the deleted pods' IPs gone", func() (bool, string) {
		remaining = s.ReadyPodIPs("web")
		public := s.sliceReadyIPs("web")
		up, err := network.IPs()
		if err != nil {
			t.Fatal(err)
		}
		gone := !slices.ContainsFunc(before, func(ip string) bool { return !slices.Contains(remaining, ip) && slices.Contains(up, ip) })
		return len(remaining) == 1 && slices.Equal(public, remaining) && gone,
			fmt.Sprintf("pods %v, slice %v, deleted pods' IPs gone %v", remaining, public, gone)
	})
	// The resolver's informer follows within moments; until it has, a
	// request may try a deleted pod first, and still reaches the survivor.
	client := &http.Client{Timeout: 10 * time.Second}
	s.Eventually("requests served by the remaining pod", func() (bool, string) {
		resp, err := s.do(t, client, http.MethodGet, "web", "/echo", nil)
		if err != nil {
			return false, err.Error()
		}
		got := decodeEcho(t, resp)
		return got.ServedBy == remaining[0], got.ServedBy
	})
	for i := range 50 {
		resp, err := s.do(t, client, http.MethodGet, "web", "/echo", nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if got := decodeEcho(t, resp); got.ServedBy != remaining[0] {
			t.Fatalf("request %d served by %s, a deleted pod; only %s is left", i, got.ServedBy, remaining[0])
		}
	}
}
