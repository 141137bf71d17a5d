package install_test

import (
	"net/url"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// operatorEgressPolicy is the NetworkPolicy deploy/components/operator-egress adds.
const operatorEgressPolicy = "elasti-operator-egress"

// egressAdmits reports whether np lets a pod it selects connect to port
// (with protocol) of to: some egress rule matches both.
func egressAdmits(t *testing.T, np *networkingv1.NetworkPolicy, port int32, protocol corev1.Protocol, to peer) bool {
	t.Helper()
	for _, rule := range np.Spec.Egress {
		if egressCoversPort(rule.Ports, port, protocol) && matchesPeer(t, np.Namespace, rule.To, to) {
			return true
		}
	}
	return false
}

func egressCoversPort(rulePorts []networkingv1.NetworkPolicyPort, port int32, protocol corev1.Protocol) bool {
	if len(rulePorts) == 0 {
		return true
	}
	for _, p := range rulePorts {
		proto := corev1.ProtocolTCP
		if p.Protocol != nil {
			proto = *p.Protocol
		}
		if proto != protocol {
			continue
		}
		if p.Port == nil {
			return true
		}
		end := p.Port.IntVal
		if p.EndPort != nil {
			end = *p.EndPort
		}
		// A named port would be the destination's; this policy uses none.
		if p.Port.StrVal == "" && port >= p.Port.IntVal && port <= end {
			return true
		}
	}
	return false
}

// envValue is the value of the environment variable name in c.
func envValue(t *testing.T, c corev1.Container, name string) string {
	t.Helper()
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	t.Fatalf("container %s sets no %s", c.Name, name)
	return ""
}

// The egress policy lets the operator resolve names, reach the API and the
// Prometheus its own Deployment names, and nothing else a trigger could
// point it at: another namespace's service, another port of the monitoring
// namespace, a node's or the cloud's metadata address.
func TestOperatorEgressOverlay(t *testing.T) {
	dir := repoPath(t, "deploy", "overlays", "operator-egress")
	objs := kustomize(t, dir)
	var np networkingv1.NetworkPolicy
	var op, res appsv1.Deployment
	objs.get(t, "NetworkPolicy", overlayElastiNamespace, operatorEgressPolicy).into(t, &np)
	objs.get(t, "Deployment", overlayElastiNamespace, overlayOperatorDeployment).into(t, &op)
	objs.get(t, "Deployment", overlayElastiNamespace, overlayResolverDeployment).into(t, &res)

	if !selects(t, &np.Spec.PodSelector, op.Spec.Template.Labels) {
		t.Errorf("%s selects %v, not the operator pods %v", np.Name, np.Spec.PodSelector.MatchLabels, op.Spec.Template.Labels)
	}
	if selectorMatches(t, &np.Spec.PodSelector, res.Spec.Template.Labels) {
		t.Errorf("%s selects the resolver pods %v too; they must reach every fronted workload", np.Name, res.Spec.Template.Labels)
	}
	if len(np.Spec.PolicyTypes) != 1 || np.Spec.PolicyTypes[0] != networkingv1.PolicyTypeEgress {
		t.Errorf("%s has policyTypes %v, want [Egress]: ingress is manifests/' policy's business", np.Name, np.Spec.PolicyTypes)
	}

	// The default Prometheus the operator Deployment names, as
	// <service>.<namespace>.svc...:<port>.
	promURL, err := url.Parse(envValue(t, container(t, &op, "manager"), "PROMETHEUS_TRIGGER_SERVER_ADDRESS"))
	if err != nil {
		t.Fatal(err)
	}
	labels := strings.Split(promURL.Hostname(), ".")
	promPort, err := strconv.Atoi(promURL.Port())
	if len(labels) < 2 || err != nil {
		t.Fatalf("PROMETHEUS_TRIGGER_SERVER_ADDRESS %s is not <service>.<namespace>...:<port>", promURL)
	}
	promNamespace := labels[1]

	dns := peer{what: "CoreDNS", pod: true, namespace: "kube-system", labels: map[string]string{"k8s-app": "kube-dns"}}
	prom := peer{what: "Prometheus in " + promNamespace, pod: true, namespace: promNamespace,
		labels: map[string]string{"app.kubernetes.io/name": "prometheus"}}
	grafana := peer{what: "another pod in " + promNamespace, pod: true, namespace: promNamespace, labels: map[string]string{"app": "grafana"}}
	tenant := peer{what: "a pod in namespace team-a", pod: true, namespace: "team-a", labels: map[string]string{"app": "web"}}
	tenantDNS := peer{what: "a pod in team-a with CoreDNS's labels", pod: true, namespace: "team-a", labels: map[string]string{"k8s-app": "kube-dns"}}
	resolver := peer{what: "a resolver pod", pod: true, namespace: res.Namespace, labels: res.Spec.Template.Labels}
	apiserver := peer{what: "the API server (a node address)", ip: "10.245.0.1"}
	metadata := peer{what: "the cloud metadata address", ip: "169.254.169.254"}
	udp, tcp := corev1.ProtocolUDP, corev1.ProtocolTCP
	for _, c := range []struct {
		to    peer
		port  int32
		proto corev1.Protocol
		allow bool
	}{
		{dns, 53, udp, true},
		{dns, 53, tcp, true},
		{apiserver, 6443, tcp, true},
		{apiserver, 443, tcp, true},
		{prom, int32(promPort), tcp, true},
		{tenantDNS, 53, udp, false},
		{tenant, 8080, tcp, false},
		{tenant, int32(promPort), tcp, false},
		{grafana, 3000, tcp, false},
		{resolver, 8012, tcp, false},
		{dns, 8080, tcp, false},
		{apiserver, 10250, tcp, false},
		{apiserver, int32(promPort), tcp, false},
		{metadata, 80, tcp, false},
	} {
		if got := egressAdmits(t, &np, c.port, c.proto, c.to); got != c.allow {
			t.Errorf("%s: the operator may connect to %s port %s/%d: %v, want %v",
				np.Name, c.to.what, c.proto, c.port, got, c.allow)
		}
	}
	dryRunApplyKustomization(t, dir)
}
