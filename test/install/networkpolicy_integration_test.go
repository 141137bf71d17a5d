package install_test

import (
	"context"
	"net/netip"
	"path/filepath"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/elasti-dev/elasti/pkg/portalloc"
	"github.com/elasti-dev/elasti/test/localcluster/clustertest"
)

// operatorNetworkPolicy is the NetworkPolicy manifests/ puts in front of the
// operator.
const operatorNetworkPolicy = "elasti-operator"

// peer is a source of traffic as a NetworkPolicy sees it: a pod (namespace
// and labels) or, with pod unset, a host address such as the node's.
type peer struct {
	what      string
	pod       bool
	namespace string
	labels    map[string]string
	ip        string
}

// admits reports whether np lets from reach port (TCP) of a pod it selects,
// by NetworkPolicy semantics: some rule matches both the port and the peer.
// Named ports are looked up in ports, the selected container's ports.
func admits(t *testing.T, np *networkingv1.NetworkPolicy, ports []corev1.ContainerPort, port int32, from peer) bool {
	t.Helper()
	for _, rule := range np.Spec.Ingress {
		if coversPort(rule.Ports, ports, port) && matchesPeer(t, np.Namespace, rule.From, from) {
			return true
		}
	}
	return false
}

func coversPort(rulePorts []networkingv1.NetworkPolicyPort, ports []corev1.ContainerPort, port int32) bool {
	if len(rulePorts) == 0 {
		return true
	}
	for _, p := range rulePorts {
		if p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP {
			continue
		}
		if p.Port == nil {
			return true
		}
		if p.Port.StrVal == "" {
			end := p.Port.IntVal
			if p.EndPort != nil {
				end = *p.EndPort
			}
			if port >= p.Port.IntVal && port <= end {
				return true
			}
			continue
		}
		for _, cp := range ports {
			if cp.Name == p.Port.StrVal && cp.ContainerPort == port {
				return true
			}
		}
	}
	return false
}

func matchesPeer(t *testing.T, policyNamespace string, peers []networkingv1.NetworkPolicyPeer, from peer) bool {
	t.Helper()
	if len(peers) == 0 {
		return true
	}
	for _, p := range peers {
		if p.IPBlock != nil {
			if !from.pod && inBlock(t, p.IPBlock, from.ip) {
				return true
			}
			continue
		}
		if !from.pod {
			continue // selectors match pods only
		}
		nsOK := from.namespace == policyNamespace
		if p.NamespaceSelector != nil {
			nsLabels := labels.Set{corev1.LabelMetadataName: from.namespace}
			nsOK = selectorMatches(t, p.NamespaceSelector, nsLabels)
		}
		podOK := p.PodSelector == nil || selectorMatches(t, p.PodSelector, from.labels)
		if nsOK && podOK {
			return true
		}
	}
	return false
}

// selectorMatches is LabelSelector semantics, where an empty selector
// matches everything (unlike selects, which treats it as a mistake).
func selectorMatches(t *testing.T, sel *metav1.LabelSelector, set map[string]string) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatal(err)
	}
	return s.Matches(labels.Set(set))
}

func inBlock(t *testing.T, b *networkingv1.IPBlock, ip string) bool {
	t.Helper()
	addr := netip.MustParseAddr(ip)
	if !netip.MustParsePrefix(b.CIDR).Contains(addr) {
		return false
	}
	for _, ex := range b.Except {
		if netip.MustParsePrefix(ex).Contains(addr) {
			return false
		}
	}
	return true
}

// namedPort returns the container port called name.
func namedPort(t *testing.T, c corev1.Container, name string) int32 {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	t.Fatalf("container %s has no port %q; it has %+v", c.Name, name, c.Ports)
	return 0
}

// checkOperatorNetworkPolicy checks np against the Deployments it is about,
// so renaming a label or moving a port without updating the policy fails:
// it selects the operator's pods and not the resolver's; the scale port
// admits the resolver's pods and nothing else; the metrics port admits pods
// of any namespace; the probes' port admits the node.
func checkOperatorNetworkPolicy(t *testing.T, np *networkingv1.NetworkPolicy, op, res *appsv1.Deployment) {
	t.Helper()
	if np.Namespace != op.Namespace || res.Namespace != op.Namespace {
		t.Fatalf("NetworkPolicy in %q, operator in %q, resolver in %q; the policy's pod selectors assume one namespace",
			np.Namespace, op.Namespace, res.Namespace)
	}
	if !selects(t, &np.Spec.PodSelector, op.Spec.Template.Labels) {
		t.Errorf("NetworkPolicy %s selects %v, not the operator pods %v", np.Name, np.Spec.PodSelector.MatchLabels, op.Spec.Template.Labels)
	}
	if selectorMatches(t, &np.Spec.PodSelector, res.Spec.Template.Labels) {
		t.Errorf("NetworkPolicy %s selects the resolver pods %v too; they must be reachable by every client", np.Name, res.Spec.Template.Labels)
	}
	ingress := false
	for _, pt := range np.Spec.PolicyTypes {
		ingress = ingress || pt == networkingv1.PolicyTypeIngress
	}
	if !ingress {
		t.Errorf("NetworkPolicy %s has policyTypes %v; without Ingress it restricts nothing", np.Name, np.Spec.PolicyTypes)
	}

	manager := container(t, op, "manager")
	scale, metrics, health := namedPort(t, manager, "http-scale"), namedPort(t, manager, "metrics"), namedPort(t, manager, "health")
	for _, probe := range []*corev1.Probe{manager.LivenessProbe, manager.ReadinessProbe} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Port.IntVal != health {
			t.Fatalf("operator probe %+v is not on the health port %d this test admits the node to", probe, health)
		}
	}
	resolverPod := peer{what: "a resolver pod", pod: true, namespace: res.Namespace, labels: res.Spec.Template.Labels}
	otherPod := peer{what: "another pod in " + op.Namespace, pod: true, namespace: op.Namespace, labels: map[string]string{"app": "web"}}
	lookalike := peer{what: "a pod with the resolver's labels in namespace apps", pod: true, namespace: "apps", labels: res.Spec.Template.Labels}
	prometheus := peer{what: "Prometheus in namespace monitoring", pod: true, namespace: "monitoring",
		labels: map[string]string{"app.kubernetes.io/name": "prometheus"}}
	node := peer{what: "the node (kubelet probes)", ip: "10.245.0.1"}
	for _, c := range []struct {
		port  int32
		from  peer
		allow bool
	}{
		{scale, resolverPod, true},
		{scale, otherPod, false},
		{scale, lookalike, false},
		{scale, prometheus, false},
		{scale, node, false},
		{metrics, prometheus, true},
		{metrics, node, false},
		{health, node, true},
	} {
		if got := admits(t, np, manager.Ports, c.port, c.from); got != c.allow {
			t.Errorf("NetworkPolicy %s: %s may reach operator port %d: %v, want %v", np.Name, c.from.what, c.port, got, c.allow)
		}
	}
}

// The NetworkPolicy `kubectl apply -f manifests/` creates guards the
// operator pods the applied Deployment makes, and lets the applied
// resolver's pods wake targets.
func TestOperatorNetworkPolicyAdmitsOnlyTheResolverToTheScaleEndpoint(t *testing.T) {
	np, op, res := appliedPolicy(t, operatorNetworkPolicy)
	checkOperatorNetworkPolicy(t, np, op, res)
}

// appliedPolicy applies manifests/ and returns the NetworkPolicy name it
// created, with the operator and resolver Deployments it guards.
func appliedPolicy(t *testing.T, name string) (*networkingv1.NetworkPolicy, *appsv1.Deployment, *appsv1.Deployment) {
	t.Helper()
	applyManifests(t)
	cs := clustertest.Clientset(t)
	ctx := context.Background()
	np, err := cs.NetworkingV1().NetworkPolicies(operatorNamespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("manifests/ created no NetworkPolicy %s/%s: %v", operatorNamespace, name, err)
	}
	op, err := cs.AppsV1().Deployments(operatorNamespace).Get(ctx, "elasti-operator-controller-manager", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.AppsV1().Deployments(operatorNamespace).Get(ctx, "elasti-resolver", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return np, op, res
}

// resolverNetworkPolicy is the NetworkPolicy manifests/ puts in front of
// the resolver.
const resolverNetworkPolicy = "elasti-resolver"

// checkResolverNetworkPolicy checks np against the resolver Deployment: it
// selects the resolver's pods and not the operator's; the proxy port and
// every port of the default resolver port range admit any pod and the
// node; the internal port (probes, metrics) admits the node and
// Prometheus; the per-port-routing port, which serves nothing, admits no
// one.
func checkResolverNetworkPolicy(t *testing.T, np *networkingv1.NetworkPolicy, op, res *appsv1.Deployment) {
	t.Helper()
	if np.Namespace != res.Namespace {
		t.Fatalf("NetworkPolicy in %q, resolver in %q", np.Namespace, res.Namespace)
	}
	if !selects(t, &np.Spec.PodSelector, res.Spec.Template.Labels) {
		t.Errorf("NetworkPolicy %s selects %v, not the resolver pods %v", np.Name, np.Spec.PodSelector.MatchLabels, res.Spec.Template.Labels)
	}
	if selectorMatches(t, &np.Spec.PodSelector, op.Spec.Template.Labels) {
		t.Errorf("NetworkPolicy %s selects the operator pods %v too", np.Name, op.Spec.Template.Labels)
	}
	if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
		t.Errorf("NetworkPolicy %s has policyTypes %v; without Ingress it restricts nothing", np.Name, np.Spec.PolicyTypes)
	}
	c := container(t, res, "resolver")
	proxy, internal, perPort := namedPort(t, c, "http-proxy"), namedPort(t, c, "http-internal"), namedPort(t, c, "per-port")
	for _, probe := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Port.IntVal != internal {
			t.Fatalf("resolver probe %+v is not on the internal port %d this test admits the node to", probe, internal)
		}
	}
	client := peer{what: "a client pod in namespace apps", pod: true, namespace: "apps", labels: map[string]string{"app": "shop"}}
	prometheus := peer{what: "Prometheus in namespace monitoring", pod: true, namespace: "monitoring",
		labels: map[string]string{"app.kubernetes.io/name": "prometheus"}}
	node := peer{what: "the node (kubelet probes, NodePort traffic)", ip: "10.245.0.1"}
	first, last := portalloc.DefaultRange.First, portalloc.DefaultRange.Last
	for _, tc := range []struct {
		port  int32
		from  peer
		allow bool
	}{
		{proxy, client, true}, {proxy, node, true},
		{first, client, true}, {last, client, true}, {first, node, true},
		{first - 1, client, false}, {last + 1, client, false},
		{internal, node, true}, {internal, prometheus, true},
		{perPort, client, false}, {perPort, node, false},
	} {
		if got := admits(t, np, c.Ports, tc.port, tc.from); got != tc.allow {
			t.Errorf("NetworkPolicy %s: %s may reach resolver port %d: %v, want %v", np.Name, tc.from.what, tc.port, got, tc.allow)
		}
	}
}

// The NetworkPolicy `kubectl apply -f manifests/` creates for the resolver
// admits what its clients, the kubelet and Prometheus need, and nothing on
// the port that only declares per-port routing.
func TestResolverNetworkPolicyAdmitsProxiedTrafficAndProbes(t *testing.T) {
	np, op, res := appliedPolicy(t, resolverNetworkPolicy)
	checkResolverNetworkPolicy(t, np, op, res)
}

// Every overlay keeps both policies in step with the Deployments it renders:
// an overlay that renames labels or moves ports must bring the policy
// along.
func TestOverlaysKeepTheNetworkPolicies(t *testing.T) {
	overlays, err := filepath.Glob(repoPath(t, "deploy", "overlays", "*"))
	if err != nil || len(overlays) == 0 {
		t.Fatalf("no overlays in deploy/overlays (%v)", err)
	}
	for _, dir := range overlays {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			objs := kustomize(t, dir)
			var np networkingv1.NetworkPolicy
			var op, res appsv1.Deployment
			objs.get(t, "NetworkPolicy", overlayElastiNamespace, operatorNetworkPolicy).into(t, &np)
			objs.get(t, "Deployment", overlayElastiNamespace, overlayOperatorDeployment).into(t, &op)
			objs.get(t, "Deployment", overlayElastiNamespace, overlayResolverDeployment).into(t, &res)
			checkOperatorNetworkPolicy(t, &np, &op, &res)
			var rnp networkingv1.NetworkPolicy
			objs.get(t, "NetworkPolicy", overlayElastiNamespace, resolverNetworkPolicy).into(t, &rnp)
			checkResolverNetworkPolicy(t, &rnp, &op, &res)
		})
	}
}
