package realnet

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
)

// Ingress is an Ingress of the bed's ingress class that routes host, every
// path, to service's port named http in namespace.
func Ingress(namespace, name, host, service string) *networkingv1.Ingress {
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: networkingv1.IngressSpec{
			IngressClassName: ptr.To(IngressClass),
			Rules: []networkingv1.IngressRule{{
				Host: host,
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
					Paths: []networkingv1.HTTPIngressPath{{
						Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix),
						Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
							Name: service, Port: networkingv1.ServiceBackendPort{Name: "http"},
						}},
					}},
				}},
			}},
		},
	}
}

// ipv4Port matches an IPv4 address and a port as kube-proxy's nftables
// rules write them ("10.244.0.5 . 8080") or as a URL does ("10.244.0.5:8080").
var ipv4Port = regexp.MustCompile(`\b(\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3})(?: \. |:)(\d{1,5})\b`)

// ingressAPIPort is the Traefik admin entrypoint (addons/traefik.yaml).
const ingressAPIPort = "9000"

// WaitIngressFollows waits until the ingress controller routes service in
// namespace to the addresses and ports its EndpointSlices list now. After a switch
// between the pods and the resolver it lags by its providers throttle (2 s
// by default), and until then dials the old addresses; the wait reads its
// API from client c, as any pod could.
func (n *Net) WaitIngressFollows(ctx context.Context, c *Client, namespace, service string, timeout time.Duration) error {
	return n.follow(ctx, "the ingress controller", namespace, service, timeout, false, func() ([]string, error) {
		return n.ingressBackends(ctx, c, namespace, service)
	})
}

// WaitKubeProxyFollows waits until kube-proxy's rules send service in
// namespace to the addresses and ports its EndpointSlices list now, and
// to every port of every Ready endpoint: kube-proxy programs all of them,
// so a rule still missing for one port (say web's raw TCP port, right
// after kube-proxy restarted) means it has not caught up. Ports count:
// elasti may rewrite its slice to the resolver with the same addresses
// and another port (per-port routing or not). kube-proxy applies changes
// after its sync period (about a second), and until then new connections
// still go to the old endpoints.
func (n *Net) WaitKubeProxyFollows(ctx context.Context, namespace, service string, timeout time.Duration) error {
	return n.follow(ctx, "kube-proxy", namespace, service, timeout, true, func() ([]string, error) {
		return n.kubeProxyBackends(ctx, namespace, service)
	})
}

// follow polls routes until it names some "ip:port" backends and only
// those of service's EndpointSlices.
//
// kube-proxy (kubeProxy true) programs every port of every Ready
// endpoint, and may also use serving endpoints that are terminating, so
// its routes must name all of the first and may name the second.
//
// The ingress controller's routes name only the port its Ingress or
// HTTPRoute names, and the wait holds them to Ready endpoints only. A pod
// the slices still list, not Ready, while it terminates may be one the
// controller has not dropped yet: once the pod is gone, it dials an
// address that is no longer there until its next update. In a run of the
// traffic suite with its wake scenarios side by side (3 Dec 2026), a
// request through it right after a scale-down went to the pod the
// subtest before had woken, and hung 30 s: the wait had passed while the
// slice still listed that pod.
func (n *Net) follow(ctx context.Context, who, namespace, service string, timeout time.Duration, kubeProxy bool, routes func() ([]string, error)) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		all, ready, err := n.sliceAddresses(ctx, namespace, service)
		if err != nil {
			return false, err
		}
		got, err := routes()
		last = fmt.Sprintf("routes to %v, the EndpointSlices list %v, Ready %v (%v)", got, all, ready, err)
		if err != nil || len(got) == 0 {
			return false, nil
		}
		if kubeProxy {
			return subset(got, all) && subset(ready, got), nil
		}
		return subset(got, ready), nil
	})
	if err != nil {
		return fmt.Errorf("realnet: %s did not follow %s/%s within %s: %s: %w", who, namespace, service, timeout, last, err)
	}
	return nil
}

func subset(got, want []string) bool {
	for _, g := range got {
		if !slices.Contains(want, g) {
			return false
		}
	}
	return true
}

// sliceAddresses lists "ip:port" for every endpoint and port of service's
// slices, and apart those of the Ready endpoints (ready unset counts as
// Ready, as kube-proxy reads it).
func (n *Net) sliceAddresses(ctx context.Context, namespace, service string) (all, ready []string, err error) {
	list, err := n.Kube.DiscoveryV1().EndpointSlices(namespace).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + service,
	})
	if err != nil {
		return nil, nil, err
	}
	for _, s := range list.Items {
		for _, ep := range s.Endpoints {
			isReady := ep.Conditions.Ready == nil || *ep.Conditions.Ready
			for _, addr := range ep.Addresses {
				for _, p := range s.Ports {
					if p.Port == nil {
						continue
					}
					a := net.JoinHostPort(addr, strconv.Itoa(int(*p.Port)))
					all = append(all, a)
					if isReady {
						ready = append(ready, a)
					}
				}
			}
		}
	}
	return all, ready, nil
}

// ingressBackends lists the addresses the ingress controller sends
// service's traffic to, from its API.
func (n *Net) ingressBackends(ctx context.Context, c *Client, namespace, service string) ([]string, error) {
	routes, err := n.IngressRoutes(ctx, c, namespace, service)
	return routes[service], err
}

// IngressRoutes lists, for each of services in namespace, the "ip:port"
// servers the ingress controller sends it to now, by an Ingress or an
// HTTPRoute, from one read of its API from client c: a check over many
// Services reads it once per look, not once per Service.
func (n *Net) IngressRoutes(ctx context.Context, c *Client, namespace string, services ...string) (map[string][]string, error) {
	pods, err := n.Kube.CoreV1().Pods(IngressNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + IngressService})
	if err != nil {
		return nil, err
	}
	if len(pods.Items) != 1 || pods.Items[0].Status.PodIP == "" {
		return nil, fmt.Errorf("want one ingress controller pod with an IP, have %d", len(pods.Items))
	}
	api := "http://" + net.JoinHostPort(pods.Items[0].Status.PodIP, ingressAPIPort) + "/api/http/services"
	resp, err := c.Do(ctx, Request{URL: api, Timeout: 2 * time.Second})
	if err != nil {
		return nil, err
	}
	var all []struct {
		Name         string `json:"name"`
		LoadBalancer struct {
			Servers []struct {
				URL string `json:"url"`
			} `json:"servers"`
		} `json:"loadBalancer"`
	}
	if err := json.Unmarshal([]byte(resp.Body), &all); err != nil {
		return nil, fmt.Errorf("ingress API: %s", resp)
	}
	routes := make(map[string][]string, len(services))
	for _, service := range services {
		routes[service] = nil
		for _, svc := range all {
			if !traefikServiceOf(svc.Name, namespace, service) {
				continue
			}
			for _, s := range svc.LoadBalancer.Servers {
				u, err := url.Parse(s.URL)
				if err != nil {
					return nil, err
				}
				routes[service] = append(routes[service], u.Host)
			}
		}
	}
	return routes, nil
}

// traefikPort is what follows <namespace>-<service>- in the name Traefik
// gives a backend: <port>@kubernetes for an Ingress's, http-<port>@kubernetesgateway
// for an HTTPRoute's; a port is a number or a name without a dash here.
var traefikPort = regexp.MustCompile(`^(?:[0-9a-z]+@kubernetes|http-[0-9a-z]+@kubernetesgateway)$`)

// traefikServiceOf reports whether Traefik's backend name is service's
// in namespace, and not the backend of another Service whose name only
// starts with service's (web and web-2).
func traefikServiceOf(name, namespace, service string) bool {
	rest, ok := strings.CutPrefix(name, namespace+"-"+service+"-")
	return ok && traefikPort.MatchString(rest)
}

// dnatBackends reads the "ip:port" backends of service from kube-proxy's
// nftables rules. Its nftables mode names a Service's chains
// service-<hash>-<namespace>/<service>/<protocol>/<port> (and, with
// session affinity, endpoint-<hash>-...__<ip>/<port>).
func dnatBackends(rules, namespace, service string) []string {
	marker := "-" + namespace + "/" + service + "/"
	var got []string
	inChain := false
	for _, line := range strings.Split(rules, "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "chain" {
			inChain = strings.Contains(f[1], marker) && (strings.HasPrefix(f[1], "service-") || strings.HasPrefix(f[1], "endpoint-"))
			continue
		}
		if inChain && strings.Contains(line, "dnat") {
			for _, m := range ipv4Port.FindAllStringSubmatch(line, -1) {
				got = append(got, net.JoinHostPort(m[1], m[2]))
			}
		}
	}
	return got
}

// DescribeRoutes says, in one line each, where service's traffic goes
// now: the "ip:port" endpoints its EndpointSlices list, kube-proxy's
// backends, and the ingress controller's (read from client c). A failed
// test logs it first: it tells a stale router from a stuck backend.
func (n *Net) DescribeRoutes(ctx context.Context, c *Client, namespace, service string) string {
	var b strings.Builder
	line := func(who string, got []string, err error) {
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", who, err)
			return
		}
		fmt.Fprintf(&b, "%s: %v\n", who, got)
	}
	got, ready, err := n.sliceAddresses(ctx, namespace, service)
	line("EndpointSlices list", got, err)
	line("of which Ready", ready, err)
	got, err = n.kubeProxyBackends(ctx, namespace, service)
	line("kube-proxy sends to", got, err)
	got, err = n.ingressBackends(ctx, c, namespace, service)
	line("the ingress controller sends to", got, err)
	return b.String()
}
