package testenv

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/names"
)

// Eventually polls cond until it holds, failing the test with desc and the
// last observation otherwise.
func (e *Env) Eventually(desc string, cond func() (bool, string)) {
	e.T.Helper()
	e.EventuallyWithin(desc, WaitTimeout, cond)
}

// EventuallyWithin is Eventually with a bound of its own, for a wait a test
// knows to be longer than WaitTimeout.
func (e *Env) EventuallyWithin(desc string, timeout time.Duration, cond func() (bool, string)) {
	e.T.Helper()
	var last string
	err := wait.PollUntilContextTimeout(e.Ctx(), 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		ok, obs := cond()
		last = obs
		return ok, nil
	})
	if err != nil {
		e.T.Fatalf("timed out after %s waiting for %s; last seen: %s", timeout, desc, last)
	}
}

// Get reads the ElastiService name.
func (e *Env) Get(name string) *elastiv1alpha1.ElastiService {
	e.T.Helper()
	es, err := e.Elasti.ElastiV1alpha1().ElastiServices(e.NS).Get(e.Ctx(), name, metav1.GetOptions{})
	if err != nil {
		e.T.Fatal(err)
	}
	return es
}

// UpdateSpec changes the ElastiService name with mutate and writes it,
// read and written again on a conflict: the operator writes the same
// object's status at any time, so a read-modify-write that does not
// retry fails whenever one lands in between, as any client's would.
func (e *Env) UpdateSpec(name string, mutate func(*elastiv1alpha1.ElastiService)) {
	e.T.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		es := e.Get(name)
		mutate(es)
		_, err := e.Elasti.ElastiV1alpha1().ElastiServices(e.NS).Update(e.Ctx(), es, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		e.T.Fatal(err)
	}
}

// Describe sums up an ElastiService's mode and Ready condition.
func Describe(es *elastiv1alpha1.ElastiService) string {
	cond := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionReady)
	if cond == nil {
		return fmt.Sprintf("mode=%q, no Ready condition", es.Status.Mode)
	}
	return fmt.Sprintf("mode=%q Ready=%s/%s: %s", es.Status.Mode, cond.Status, cond.Reason, cond.Message)
}

// WaitMode waits until the ElastiService name is Ready in mode.
func (e *Env) WaitMode(name, mode string) {
	e.T.Helper()
	e.Eventually(fmt.Sprintf("%s to be in %s mode", name, mode), func() (bool, string) {
		es := e.Get(name)
		cond := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionReady)
		return es.Status.Mode == mode && cond != nil && cond.Status == metav1.ConditionTrue, Describe(es)
	})
}

// WaitReason waits until the ElastiService name's Ready condition has status
// and reason, and returns it.
func (e *Env) WaitReason(name string, status metav1.ConditionStatus, reason string) *elastiv1alpha1.ElastiService {
	e.T.Helper()
	var got *elastiv1alpha1.ElastiService
	e.Eventually(fmt.Sprintf("%s Ready=%s reason %s", name, status, reason), func() (bool, string) {
		got = e.Get(name)
		cond := meta.FindStatusCondition(got.Status.Conditions, elastiv1alpha1.ConditionReady)
		return cond != nil && cond.Status == status && cond.Reason == reason, Describe(got)
	})
	return got
}

// WaitResolverPorts waits until name records a resolver port for each of
// the Service ports given, and nothing else, with ResolverPortsAssigned
// True, and returns them by Service port.
func (e *Env) WaitResolverPorts(name string, servicePorts ...int32) map[int32]int32 {
	e.T.Helper()
	var got map[int32]int32
	e.Eventually(fmt.Sprintf("%s to record resolver ports for %v", name, servicePorts), func() (bool, string) {
		es := e.Get(name)
		got = map[int32]int32{}
		for _, p := range es.Status.ResolverPorts {
			got[p.Port] = p.ResolverPort
		}
		cond := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionResolverPortsAssigned)
		ok := cond != nil && cond.Status == metav1.ConditionTrue && len(got) == len(servicePorts)
		for _, p := range servicePorts {
			ok = ok && got[p] != 0
		}
		return ok, fmt.Sprintf("resolverPorts %+v, condition %+v", es.Status.ResolverPorts, cond)
	})
	return got
}

// SlicesFor lists the EndpointSlices labelled for a Service.
func (e *Env) SlicesFor(service string) []discoveryv1.EndpointSlice {
	e.T.Helper()
	list, err := e.Kube.DiscoveryV1().EndpointSlices(e.NS).List(e.Ctx(), metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: service}).String(),
	})
	if err != nil {
		e.T.Fatal(err)
	}
	return list.Items
}

// ReadyPodIPs lists the IPs of an app's Ready pods, sorted.
func (e *Env) ReadyPodIPs(app string) []string {
	e.T.Helper()
	pods, err := e.Kube.CoreV1().Pods(e.NS).List(e.Ctx(), metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		e.T.Fatal(err)
	}
	var ips []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.PodIP != "" && PodReady(&p) {
			ips = append(ips, p.Status.PodIP)
		}
	}
	sort.Strings(ips)
	return ips
}

// PodReady reports whether p's Ready condition is true.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// SliceIPs lists an EndpointSlice's addresses, sorted.
func SliceIPs(s discoveryv1.EndpointSlice) []string {
	var ips []string
	for _, ep := range s.Endpoints {
		ips = append(ips, ep.Addresses...)
	}
	sort.Strings(ips)
	return ips
}

// CountModes counts the namespace's ElastiServices in proxy and in serve.
func (e *Env) CountModes() (proxy, serve int) {
	e.T.Helper()
	list, err := e.Elasti.ElastiV1alpha1().ElastiServices(e.NS).List(e.Ctx(), metav1.ListOptions{})
	if err != nil {
		e.T.Fatal(err)
	}
	for _, es := range list.Items {
		switch es.Status.Mode {
		case elastiv1alpha1.ModeProxy:
			proxy++
		case elastiv1alpha1.ModeServe:
			serve++
		}
	}
	return proxy, serve
}

// Replicas reads a Deployment's or StatefulSet's spec.replicas.
func (e *Env) Replicas(kind, name string) int32 {
	e.T.Helper()
	switch kind {
	case elastiv1alpha1.KindStatefulSet:
		s, err := e.Kube.AppsV1().StatefulSets(e.NS).Get(e.Ctx(), name, metav1.GetOptions{})
		if err != nil {
			e.T.Fatal(err)
		}
		return ptr.Deref(s.Spec.Replicas, 1)
	default:
		d, err := e.Kube.AppsV1().Deployments(e.NS).Get(e.Ctx(), name, metav1.GetOptions{})
		if err != nil {
			e.T.Fatal(err)
		}
		return ptr.Deref(d.Spec.Replicas, 1)
	}
}

// WaitReplicas waits until a target's spec.replicas is want.
func (e *Env) WaitReplicas(kind, name string, want int32) {
	e.T.Helper()
	e.Eventually(fmt.Sprintf("%s %s at %d replicas", kind, name, want), func() (bool, string) {
		got := e.Replicas(kind, name)
		return got == want, fmt.Sprintf("%d replicas", got)
	})
}

// HoldsReplicas asserts the target stays at want for d.
func (e *Env) HoldsReplicas(kind, name string, want int32, d time.Duration) {
	e.T.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if got := e.Replicas(kind, name); got != want {
			e.T.Fatalf("%s %s went to %d replicas; it must stay at %d", kind, name, got, want)
		}
	}
}

// HasEvent reports whether object has an event with reason, and its message;
// otherwise the reasons it has.
func (e *Env) HasEvent(object, reason string) (bool, string) {
	evs, err := e.Kube.CoreV1().Events(e.NS).List(e.Ctx(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + object})
	if err != nil {
		return false, err.Error()
	}
	var seen []string
	for _, ev := range evs.Items {
		if ev.Reason == reason {
			return true, ev.Message
		}
		seen = append(seen, ev.Reason)
	}
	return false, strings.Join(seen, ",")
}

// ResolverSlice reads the resolver EndpointSlice the operator made for the
// public Service service.
func (e *Env) ResolverSlice(service string) (*discoveryv1.EndpointSlice, error) {
	return e.Kube.DiscoveryV1().EndpointSlices(e.NS).Get(e.Ctx(), names.ResolverSlice(service), metav1.GetOptions{})
}

// PrivateService reads the private Service the operator made for the public
// Service service.
func (e *Env) PrivateService(service string) (*corev1.Service, error) {
	return e.Kube.CoreV1().Services(e.NS).Get(e.Ctx(), names.PrivateService(service), metav1.GetOptions{})
}
