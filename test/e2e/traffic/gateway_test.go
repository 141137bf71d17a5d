package traffic

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/elasti-dev/elasti/test/localcluster/realnet"
)

// httpRoutes is the Gateway API's HTTPRoute resource (standard channel).
var httpRoutes = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "httproutes"}

// TestGatewayRouteWakesAService: a client's request through the bed's
// Gateway (Traefik's Gateway API provider), by an HTTPRoute with a public
// hostname to a sleeping Service that carries no annotation, wakes it
// and gets the new pod's answer. The gateway reads the Service's
// EndpointSlices and dials the resolver's per-Service port, so nothing in
// the request names the Service. KubeElasti #247 is this case with Envoy
// Gateway.
func TestGatewayRouteWakesAService(t *testing.T) {
	sideBySideScenario(t)
	s := newScenario(t)
	s.waitResolverPorts(1)
	// Its own host per test namespace, as for Ingresses: a hostname that
	// two routes claim goes to either.
	publicHost := "gw-" + s.e.NS + ".example.com"
	s.httpRoute("public", publicHost)
	viaGateway := realnet.Request{URL: "http://" + ingressAddr + "/", Host: publicHost}
	s.waitIngressRoutes(viaGateway)
	s.setProbeRule()
	s.sleep()
	// The Gateway is served by the ingress controller's web entrypoint, so
	// the same wait tells when its router reaches the resolver.
	s.waitIngressReachesResolver(publicHost)
	viaGateway.Timeout = wakeTimeout
	s.expectWokenHeld(s.do(viaGateway))
}

// httpRoute routes host to web's port 80 through the bed's Gateway. web's
// Service is left as testenv made it: no annotation, no label.
func (s *scenario) httpRoute(name, host string) { s.t.Helper(); s.httpRouteTo(name, host, app) }

// httpRouteTo routes host to service's port 80 through the bed's Gateway.
func (s *scenario) httpRouteTo(name, host, service string) {
	s.t.Helper()
	dyn, err := dynamic.NewForConfig(s.bed.cluster.RESTConfig())
	if err != nil {
		s.t.Fatal(err)
	}
	route := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": httpRoutes.GroupVersion().String(),
		"kind":       "HTTPRoute",
		"metadata":   map[string]any{"name": name, "namespace": s.e.NS},
		"spec": map[string]any{
			"parentRefs": []any{map[string]any{"name": realnet.GatewayName, "namespace": realnet.GatewayNamespace}},
			"hostnames":  []any{host},
			"rules": []any{map[string]any{
				"backendRefs": []any{map[string]any{"name": service, "port": int64(80)}},
			}},
		},
	}}
	if _, err := dyn.Resource(httpRoutes).Namespace(s.e.NS).Create(s.ctx, route, metav1.CreateOptions{}); err != nil {
		s.t.Fatal(err)
	}
}
