package realnet

import (
	"context"
	"net"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/elasti-dev/elasti/test/localcluster"
)

// ProxyMode is a kube-proxy --proxy-mode the bed runs.
type ProxyMode string

const (
	// ProxyModeNFTables is the bed's default.
	ProxyModeNFTables ProxyMode = "nftables"
	// ProxyModeIPTables is the mode most clusters still run; the host's
	// iptables (hack/build-cluster-bins.sh installs it) writes its rules
	// in the node namespace only.
	ProxyModeIPTables ProxyMode = "iptables"
)

func (m ProxyMode) orDefault() ProxyMode {
	if m == "" {
		return ProxyModeNFTables
	}
	return m
}

// kubeProxyMode is the mode kube-proxy runs in, or runs in next.
func (n *Net) kubeProxyMode() ProxyMode {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.proxyMode.orDefault()
}

// SwitchKubeProxy stops kube-proxy, removes its rules and starts it again
// in mode, returning once the new mode's rules exist. ClusterIPs are
// refused in between; a test that switches switches back when it ends.
func (n *Net) SwitchKubeProxy(ctx context.Context, mode ProxyMode) error {
	if err := n.StopKubeProxy(ctx); err != nil {
		return err
	}
	n.mu.Lock()
	n.proxyMode = mode
	n.mu.Unlock()
	n.logf("starting kube-proxy (%s) in %s", mode, n.Network.Name())
	return n.StartKubeProxy(ctx)
}

// kubeProxyRulesExist says whether kube-proxy in mode has written its
// rules: its nftables table, or its iptables KUBE-SERVICES chain.
func (n *Net) kubeProxyRulesExist(ctx context.Context, mode ProxyMode) bool {
	var err error
	if mode == ProxyModeIPTables {
		_, err = n.NodeExec(ctx, "iptables", "-w", "-t", "nat", "-S", "KUBE-SERVICES")
	} else {
		_, err = n.NodeExec(ctx, "nft", "list", "table", "ip", "kube-proxy")
	}
	return err == nil
}

// removeKubeProxyRules removes what a stopped kube-proxy left: its
// nftables table, or (iptables) every KUBE- chain and the jumps to them,
// through kube-proxy's own --cleanup.
func (n *Net) removeKubeProxyRules(ctx context.Context) error {
	if n.kubeProxyMode() == ProxyModeIPTables {
		_, err := n.NodeExec(ctx, filepath.Join(n.cluster.BinDir, localcluster.KubeProxyBinary), "--cleanup")
		return err
	}
	if out, err := n.NodeExec(ctx, "nft", "delete", "table", "ip", "kube-proxy"); err != nil && !strings.Contains(out+err.Error(), "No such file") {
		return err
	}
	return nil
}

// kubeProxyBackends lists the "ip:port" backends kube-proxy's rules DNAT
// service to, in the mode it runs in.
func (n *Net) kubeProxyBackends(ctx context.Context, namespace, service string) ([]string, error) {
	routes, err := n.KubeProxyRoutes(ctx, namespace, service)
	return routes[service], err
}

// KubeProxyRoutes lists, for each of services in namespace, the "ip:port"
// backends kube-proxy's rules DNAT it to now, from one read of the rules
// in the mode it runs in: a check over many Services reads them once per
// look, not once per Service.
func (n *Net) KubeProxyRoutes(ctx context.Context, namespace string, services ...string) (map[string][]string, error) {
	read, parse := []string{"nft", "list", "table", "ip", "kube-proxy"}, dnatBackends
	if n.kubeProxyMode() == ProxyModeIPTables {
		read, parse = []string{"iptables-save", "-t", "nat"}, iptablesDNATBackends
	}
	rules, err := n.NodeExec(ctx, read...)
	if err != nil {
		return nil, err
	}
	routes := make(map[string][]string, len(services))
	for _, svc := range services {
		routes[svc] = parse(rules, namespace, svc)
	}
	return routes, nil
}

// toDestination is an iptables DNAT target's address.
var toDestination = regexp.MustCompile(`--to-destination (\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}):(\d{1,5})\b`)

// iptablesDNATBackends reads the "ip:port" backends of service from
// kube-proxy's iptables rules (iptables-save -t nat). Its iptables mode
// writes one KUBE-SEP chain per endpoint, whose DNAT rule carries the
// comment "<namespace>/<service>:<port name>" ("<namespace>/<service>"
// for an unnamed port).
func iptablesDNATBackends(rules, namespace, service string) []string {
	comment := regexp.MustCompile(`--comment "?` + regexp.QuoteMeta(namespace+"/"+service) + `(:[^" ]*)?"?( |$)`)
	var got []string
	for _, line := range strings.Split(rules, "\n") {
		if !strings.HasPrefix(line, "-A KUBE-SEP-") || !comment.MatchString(line) {
			continue
		}
		if m := toDestination.FindStringSubmatch(line); m != nil {
			got = append(got, net.JoinHostPort(m[1], m[2]))
		}
	}
	return got
}
