package testenv

import (
	"context"
	"fmt"
	"strings"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DescribeDeployment says what a failed test needs to know of a Service
// and the Deployment behind it, both named name: the Deployment's and its
// ReplicaSets' sizes and generations, each pod's state, and every slice of
// the Service with each endpoint's pod and conditions. Reads that fail say
// so in the text; it never fails the test itself.
func (e *Env) DescribeDeployment(ctx context.Context, name string) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var b strings.Builder
	if d, err := e.Kube.AppsV1().Deployments(e.NS).Get(ctx, name, metav1.GetOptions{}); err != nil {
		fmt.Fprintf(&b, "Deployment %s: %v\n", name, err)
	} else {
		fmt.Fprintf(&b, "Deployment %s: replicas %s, generation %d observed %d, ready %d available %d\n",
			name, replicas(d.Spec.Replicas), d.Generation, d.Status.ObservedGeneration, d.Status.ReadyReplicas, d.Status.AvailableReplicas)
	}
	selector := metav1.ListOptions{LabelSelector: "app=" + name}
	if rss, err := e.Kube.AppsV1().ReplicaSets(e.NS).List(ctx, selector); err != nil {
		fmt.Fprintf(&b, "ReplicaSets: %v\n", err)
	} else {
		for _, rs := range rss.Items {
			fmt.Fprintf(&b, "ReplicaSet %s: replicas %s, generation %d observed %d, status replicas %d ready %d\n",
				rs.Name, replicas(rs.Spec.Replicas), rs.Generation, rs.Status.ObservedGeneration, rs.Status.Replicas, rs.Status.ReadyReplicas)
		}
	}
	if pods, err := e.Kube.CoreV1().Pods(e.NS).List(ctx, selector); err != nil {
		fmt.Fprintf(&b, "Pods: %v\n", err)
	} else {
		for _, p := range pods.Items {
			ready := "not ready"
			if PodReady(&p) {
				ready = "ready"
			}
			deleting := ""
			if p.DeletionTimestamp != nil {
				deleting = ", deleting since " + p.DeletionTimestamp.UTC().Format("15:04:05")
			}
			fmt.Fprintf(&b, "Pod %s uid %s: %s, %s, IP %s, created %s%s\n", p.Name, p.UID, p.Status.Phase, ready,
				p.Status.PodIP, p.CreationTimestamp.UTC().Format("15:04:05"), deleting)
		}
	}
	slices, err := e.Kube.DiscoveryV1().EndpointSlices(e.NS).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
	if err != nil {
		fmt.Fprintf(&b, "EndpointSlices: %v\n", err)
		return b.String()
	}
	for _, s := range slices.Items {
		fmt.Fprintf(&b, "EndpointSlice %s rv %s managed by %s, annotations %v:\n", s.Name, s.ResourceVersion, s.Labels[discoveryv1.LabelManagedBy], s.Annotations)
		for _, ep := range s.Endpoints {
			pod := "no pod"
			if ep.TargetRef != nil {
				pod = ep.TargetRef.Name + " uid " + string(ep.TargetRef.UID)
			}
			c := ep.Conditions
			fmt.Fprintf(&b, "  %v (%s): ready=%s serving=%s terminating=%s\n", ep.Addresses, pod, flag(c.Ready), flag(c.Serving), flag(c.Terminating))
		}
	}
	return b.String()
}

func replicas(r *int32) string {
	if r == nil {
		return "unset"
	}
	return fmt.Sprint(*r)
}
