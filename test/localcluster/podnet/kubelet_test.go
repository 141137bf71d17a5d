package podnet

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/elasti-dev/elasti/test/localcluster"
)

func pod(ns, name, ip string, ready bool) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			PodIP:      ip,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}},
		},
	}
}

// eventLog records onChange calls.
type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (l *eventLog) record(ip string, ready bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	state := "-"
	if ready {
		state = "+"
	}
	l.events = append(l.events, state+ip)
}

func (l *eventLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

// waitFor polls cond every 20ms for at most 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func hasIP(t *testing.T, n *Network, ip string) bool {
	t.Helper()
	ips, err := n.IPs()
	if err != nil {
		t.Fatal(err)
	}
	return slices.Contains(ips, ip)
}

// startKubelet runs a fake kubelet until the test ends.
func startKubelet(t *testing.T, n *Network, kube *fake.Clientset) (*Kubelet, *eventLog) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	log := &eventLog{}
	k, err := n.RunKubelet(ctx, kube, log.record)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		select {
		case <-k.Done():
		case <-time.After(10 * time.Second):
			t.Errorf("kubelet did not stop")
		}
	})
	waitFor(t, "kubelet sync", k.HasSynced)
	return k, log
}

func TestKubeletFollowsReadyPods(t *testing.T) {
	n := newNetwork(t)
	const port = 18081
	serve(t, n, "0.0.0.0:18081")

	kube := fake.NewClientset(
		pod("a", "ready", "10.244.3.4", true),
		pod("a", "notready", "10.244.3.5", false),
		pod("b", "outside", "10.1.2.3", true),
		pod("b", "noip", "", true),
	)
	_, log := startKubelet(t, n, kube)
	ctx := t.Context()

	// Existing pods are applied by the time HasSynced is true.
	if ips, err := n.IPs(); err != nil || !slices.Equal(ips, []string{"10.244.3.4"}) {
		t.Fatalf("IPs after sync = %v, %v; want [10.244.3.4]", ips, err)
	}
	if err := n.Reachable(ctx, "10.244.3.4", port); err != nil {
		t.Errorf("backend in Ready pod: %v", err)
	}
	if _, err := get(n, "10.244.3.5", port); err == nil {
		t.Errorf("not-Ready pod answered")
	}

	pods := kube.CoreV1().Pods("a")
	// Not Ready -> Ready -> not Ready.
	if _, err := pods.UpdateStatus(ctx, pod("a", "notready", "10.244.3.5", true), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "10.244.3.5 added", func() bool { return hasIP(t, n, "10.244.3.5") })
	if err := n.Reachable(ctx, "10.244.3.5", port); err != nil {
		t.Errorf("pod that became Ready: %v", err)
	}
	if _, err := pods.UpdateStatus(ctx, pod("a", "notready", "10.244.3.5", false), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "10.244.3.5 removed", func() bool { return !hasIP(t, n, "10.244.3.5") })

	// Deleted -> removed, and no longer answers.
	if err := pods.Delete(ctx, "ready", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "10.244.3.4 removed", func() bool { return !hasIP(t, n, "10.244.3.4") })
	if _, err := get(n, "10.244.3.4", port); err == nil {
		t.Errorf("deleted pod still answers")
	}

	// A deletionTimestamp is enough.
	if _, err := pods.Create(ctx, pod("a", "terminating", "10.244.3.6", true), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "10.244.3.6 added", func() bool { return hasIP(t, n, "10.244.3.6") })
	p := pod("a", "terminating", "10.244.3.6", true)
	now := metav1.Now()
	p.DeletionTimestamp = &now
	if _, err := pods.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "10.244.3.6 removed", func() bool { return !hasIP(t, n, "10.244.3.6") })

	want := []string{"+10.244.3.4", "+10.244.3.5", "-10.244.3.5", "-10.244.3.4", "+10.244.3.6", "-10.244.3.6"}
	// onChange runs after the address change, so the log can trail it.
	waitFor(t, "every onChange call", func() bool { return len(log.get()) >= len(want) })
	if got := log.get(); !slices.Equal(got, want) {
		t.Errorf("onChange calls = %v, want %v", got, want)
	}
	if ips, err := n.IPs(); err != nil || len(ips) != 0 {
		t.Errorf("IPs at the end = %v, %v; want none (10.1.2.3 must never be added)", ips, err)
	}
}

// kwok may give a new pod the IP of one that is still going away.
func TestKubeletSharedIP(t *testing.T) {
	n := newNetwork(t)
	kube := fake.NewClientset()
	_, log := startKubelet(t, n, kube)
	ctx := t.Context()
	pods := kube.CoreV1().Pods("a")

	const ip = "10.244.7.7"
	for _, name := range []string{"old", "new"} {
		if _, err := pods.Create(ctx, pod("a", name, ip, true), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, ip+" added", func() bool { return hasIP(t, n, ip) })
	if err := pods.Delete(ctx, "old", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The queue is FIFO with one worker: once a later pod is applied, the
	// deletion has been too.
	if _, err := pods.Create(ctx, pod("a", "barrier", "10.244.7.8", true), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "barrier added", func() bool { return hasIP(t, n, "10.244.7.8") })
	if !hasIP(t, n, ip) {
		t.Fatalf("%s removed although pod a/new still holds it", ip)
	}
	if err := pods.Delete(ctx, "new", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ip+" removed", func() bool { return !hasIP(t, n, ip) })
	want := []string{"+" + ip, "+10.244.7.8", "-" + ip}
	// onChange runs after the address change, so the log can trail it.
	waitFor(t, "every onChange call", func() bool { return len(log.get()) >= len(want) })
	if got := log.get(); !slices.Equal(got, want) {
		t.Errorf("onChange calls = %v, want %v", got, want)
	}
}

// A pod whose IP changes (not something kwok does, but cheap to get right)
// moves its address.
func TestKubeletIPChange(t *testing.T) {
	n := newNetwork(t)
	kube := fake.NewClientset(pod("a", "p", "10.244.8.1", true))
	startKubelet(t, n, kube)
	if !hasIP(t, n, "10.244.8.1") {
		t.Fatal("10.244.8.1 not added")
	}
	if _, err := kube.CoreV1().Pods("a").UpdateStatus(t.Context(), pod("a", "p", "10.244.8.2", true), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "IP moved", func() bool { return hasIP(t, n, "10.244.8.2") && !hasIP(t, n, "10.244.8.1") })
}

// scheduledPod is a pod the scheduler bound to the kwok node, not started:
// on a cluster with localcluster.Options.ReadyAfterAddress, kwok leaves it
// to the fake kubelet.
func scheduledPod(ns, name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name)},
		Spec: corev1.PodSpec{
			NodeName:       localcluster.NodeName,
			Containers:     []corev1.Container{{Name: "app", Image: "app:1"}},
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: "example.com/gate"}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}},
	}
}

// The fake kubelet starts the kwok node's pods as a kubelet does: an
// address of localcluster.KwokPodCIDR, up on lo first, then Running and
// Ready in one status write; whoever sees a pod Ready can reach it. Every
// watch event of the pods is checked at once. A pod of another node is
// left alone, and a host-network pod gets the node's address.
func TestKubeletStartsPodsReadyOnlyOnceTheAddressAnswers(t *testing.T) {
	n := newNetwork(t)
	const port = 18083
	serve(t, n, fmt.Sprintf("0.0.0.0:%d", port))
	kube := fake.NewClientset()
	startKubelet(t, n, kube)
	ctx := t.Context()
	pods := kube.CoreV1().Pods("a")
	w, err := pods.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	const started = 4
	for i := range started {
		if _, err := pods.Create(ctx, scheduledPod("a", fmt.Sprintf("p%d", i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	elsewhere := scheduledPod("a", "elsewhere")
	elsewhere.Spec.NodeName = "another-node"
	if _, err := pods.Create(ctx, elsewhere, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kwok := netip.MustParsePrefix(localcluster.KwokPodCIDR)
	ready, ips := map[string]bool{}, map[string]bool{}
	timeout := time.After(10 * time.Second)
	for len(ready) < started {
		select {
		case ev := <-w.ResultChan():
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || !podReady(p) || ready[p.Name] {
				continue
			}
			ready[p.Name] = true
			if p.Name == "elsewhere" {
				t.Errorf("the fake kubelet started a pod of another node")
			}
			addr, err := netip.ParseAddr(p.Status.PodIP)
			if err != nil || !kwok.Contains(addr) || ips[p.Status.PodIP] {
				t.Errorf("%s: address %q, want a free one of %s", p.Name, p.Status.PodIP, kwok)
			}
			ips[p.Status.PodIP] = true
			if _, err := get(n, p.Status.PodIP, port); err != nil {
				t.Errorf("%s is Ready and its address %s does not answer: %v", p.Name, p.Status.PodIP, err)
			}
			for _, c := range p.Status.Conditions {
				if c.Status != corev1.ConditionTrue {
					t.Errorf("%s: condition %s still %s", p.Name, c.Type, c.Status)
				}
			}
			if p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) != 1 || !p.Status.ContainerStatuses[0].Ready || p.Status.HostIP != HostIP {
				t.Errorf("%s: started as %+v", p.Name, p.Status)
			}
		case <-timeout:
			t.Fatalf("only %d of %d pods started: %v", len(ready), started, ready)
		}
	}
	// One status write per pod: as many as kwok's own start made.
	writes := 0
	for _, a := range kube.Actions() {
		if a.GetVerb() == "update" && a.GetSubresource() == "status" {
			writes++
		}
	}
	if writes != started {
		t.Errorf("%d status writes for %d pods, want one each", writes, started)
	}
	host := scheduledPod("a", "host")
	host.Spec.HostNetwork = true
	if _, err := pods.Create(ctx, host, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the host-network pod started", func() bool {
		p, err := pods.Get(ctx, "host", metav1.GetOptions{})
		return err == nil && podReady(p) && p.Status.PodIP == HostIP
	})
	if p, err := pods.Get(ctx, "elsewhere", metav1.GetOptions{}); err != nil || p.Status.PodIP != "" {
		t.Errorf("the pod of another node: %v, %v", p.Status, err)
	}
}

// TestKubeletStartsPodsWhileOneSyncIsSlow: a pod whose sync is slow (its
// status write on a loaded apiserver) holds no other pod's start, as a
// kubelet's per-pod workers do not. With one worker, the pods of a wake of
// 100 were written Ready one status write after another.
func TestKubeletStartsPodsWhileOneSyncIsSlow(t *testing.T) {
	n := newNetwork(t)
	kube := fake.NewClientset()
	k, err := NewKubelet(n, kube, nil)
	if err != nil {
		t.Fatal(err)
	}
	slow := cache.ObjectName{Namespace: "a", Name: "slow"}
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	k.syncHandler = func(ctx context.Context, key cache.ObjectName) error {
		if key == slow {
			once.Do(func() { close(entered) })
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return k.syncPod(ctx, key)
	}
	ctx, cancel := context.WithCancel(t.Context())
	go k.Run(ctx)
	t.Cleanup(func() {
		cancel()
		<-k.Done()
	})
	waitFor(t, "kubelet sync", k.HasSynced)
	defer close(release)

	pods := kube.CoreV1().Pods("a")
	if _, err := pods.Create(ctx, scheduledPod("a", "slow"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the slow pod's sync never began")
	}
	// More pods than one kubelet worker per pod would leave free if any
	// waited on another: each must be Ready with its own address.
	const others = kubeletWorkers - 1
	for i := range others {
		if _, err := pods.Create(ctx, scheduledPod("a", fmt.Sprintf("p%d", i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ips := map[string]string{}
	waitFor(t, fmt.Sprintf("%d pods Ready while one pod's sync is held", others), func() bool {
		for i := range others {
			p, err := pods.Get(ctx, fmt.Sprintf("p%d", i), metav1.GetOptions{})
			if err != nil || !podReady(p) {
				return false
			}
			ips[p.Name] = p.Status.PodIP
		}
		return true
	})
	seen := map[string]string{}
	for name, ip := range ips {
		if other, ok := seen[ip]; ok {
			t.Errorf("%s and %s were both given %s", name, other, ip)
		}
		seen[ip] = name
		if !hasIP(t, n, ip) {
			t.Errorf("%s is Ready at %s, which is not on lo", name, ip)
		}
	}
	if p, err := pods.Get(ctx, "slow", metav1.GetOptions{}); err != nil || p.Status.PodIP != "" {
		t.Errorf("the held pod was started before its sync ran: %v, %v", p.Status, err)
	}
}
