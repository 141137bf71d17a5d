package realnet

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/elasti-dev/elasti/test/localcluster"
)

const (
	// GatewayNamespace and GatewayName name the bed's Gateway, served by
	// the ingress controller (Traefik's Gateway API provider) on its web
	// entrypoint; HTTPRoutes in any namespace may attach to it. Clients
	// reach it through the ingress controller's Service, as an Ingress.
	// addons/traefik.yaml declares it.
	GatewayNamespace = IngressNamespace
	GatewayName      = "web"
)

// installGatewayAPI creates the standard Gateway API CRDs, read in place
// from the module cache (localcluster.GatewayAPICRDDir), and waits until
// the apiserver serves them, so that the addons' GatewayClass and Gateway
// apply and Traefik's provider finds its kinds at start.
func (n *Net) installGatewayAPI(ctx context.Context) error {
	crds, err := filepath.Glob(filepath.Join(n.cluster.BinDir, localcluster.GatewayAPICRDDir, "*.yaml"))
	if err != nil {
		return err
	}
	if len(crds) == 0 {
		return fmt.Errorf("realnet: no Gateway API CRDs in %s", filepath.Join(n.cluster.BinDir, localcluster.GatewayAPICRDDir))
	}
	// Server-side: the HTTPRoute CRD is larger than the 256 KiB annotation
	// a client-side apply keeps.
	args := []string{"apply", "--server-side"}
	for _, f := range crds {
		args = append(args, "-f", f)
	}
	if _, err := n.cluster.Kubectl(ctx, args...); err != nil {
		return fmt.Errorf("realnet: Gateway API CRDs: %w", err)
	}
	wait := []string{"wait", "--for=condition=Established", "--timeout=" + addonTimeout.String()}
	for _, f := range crds {
		wait = append(wait, "-f", f)
	}
	if _, err := n.cluster.Kubectl(ctx, wait...); err != nil {
		return fmt.Errorf("realnet: Gateway API CRDs not established: %w", err)
	}
	return nil
}
