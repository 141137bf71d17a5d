package directprobe

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/elasti-dev/elasti/pkg/resolver/clusterview/clusterviewtest"
	"github.com/elasti-dev/elasti/pkg/resolver/internal/resolvertest"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2/ktesting"

	"github.com/elasti-dev/elasti/pkg/podcheck"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
)

// Tenant safety (issue 38, hole 5): the direct-probing capacity is
// shared. One namespace takes at most maxProbedPodsPerNamespace of the
// maxProbedPods probes, a probe that ends (passed, or left to the
// kubelet) gives its slot back at once, and the pod reads of one
// namespace's probes are rate-limited.

// newTestProber is a prober on pods, ended with the test.
func newTestProber(t *testing.T, pods clusterview.PodGetter, fellBack func(string)) *Prober {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	if fellBack == nil {
		fellBack = func(string) {}
	}
	p := NewProber(ctx, clusterview.NewMemoryEndpoints(), nil, pods, Report{FellBack: fellBack, Lead: func(time.Duration) {}}, ktesting.NewLogger(t, ktesting.NewConfig()))
	t.Cleanup(func() { cancel(); p.Close() })
	return p
}

// holdFor joins svc and lists n unready pods of it, named after svc.
func holdFor(p *Prober, svc clusterview.ServiceRef, n int) (leave func(), eps []clusterview.UnreadyEndpoint) {
	leave = p.Join(svc)
	for i := range n {
		eps = append(eps, clusterview.UnreadyEndpoint{IP: fmt.Sprintf("10.244.%d.%d", len(svc.Name), i), Port: 80,
			Pod: svc.Name + "-" + strconv.Itoa(i), UID: types.UID(svc.Namespace + "/" + svc.Name + "-" + strconv.Itoa(i))})
	}
	p.Passed(svc, eps)
	return leave, eps
}

func TestOneNamespaceTakesAtMostItsShareOfTheProbes(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	p := newTestProber(t, &blockingPods{}, nil)
	// Eight Services of one namespace, four pods each: twice its share.
	for i := range 8 {
		leave, _ := holdFor(p, clusterview.ServiceRef{Namespace: "greedy", Name: "svc" + strconv.Itoa(i)}, maxProbedPodsPerService)
		defer leave()
	}
	if got := p.Probing(); got != maxProbedPodsPerNamespace {
		t.Errorf("one namespace probes %d pods, want its share %d", got, maxProbedPodsPerNamespace)
	}
	// The next namespace still gets its pods probed: the share boundary,
	// and one past it, are per namespace.
	leave, _ := holdFor(p, clusterview.ServiceRef{Namespace: "other", Name: "web"}, maxProbedPodsPerService)
	defer leave()
	if got := p.Probing(); got != maxProbedPodsPerNamespace+maxProbedPodsPerService {
		t.Errorf("%d pods probed; another namespace's %d were refused", got, maxProbedPodsPerService)
	}
}

// A pod left to the kubelet (no probe here) frees its slot as its probe
// ends, while the hold goes on, and is not started again on the next look.
func TestAProbeThatEndsGivesItsSlotBack(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	var pods []*corev1.Pod
	svc := clusterview.ServiceRef{Namespace: "team", Name: "web"}
	for i := range maxProbedPodsPerService {
		pods = append(pods, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web-" + strconv.Itoa(i), UID: types.UID("team/web-" + strconv.Itoa(i))},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}},
			Status:     corev1.PodStatus{PodIP: fmt.Sprintf("10.244.3.%d", i), PodIPs: []corev1.PodIP{{IP: fmt.Sprintf("10.244.3.%d", i)}}},
		})
	}
	fakes := resolvertest.NewFakePods(pods...)
	fellBack := make(chan string, 100)
	p := newTestProber(t, fakes, func(r string) { fellBack <- r })
	leave, eps := holdFor(p, svc, maxProbedPodsPerService)
	defer leave()
	for range maxProbedPodsPerService {
		select {
		case r := <-fellBack:
			if r != podcheck.FallbackNoProbe {
				t.Errorf("fell back for %q, want %q", r, podcheck.FallbackNoProbe)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the pods without probes did not fall back")
		}
	}
	resolvertest.Eventually(t, 5*time.Second, "the slots to be free", func() bool { return p.Probing() == 0 })
	for range 3 {
		p.Passed(svc, eps)
	}
	time.Sleep(100 * time.Millisecond)
	if p.Probing() != 0 || len(fellBack) != 0 {
		t.Errorf("looking again restarted the probes: %d probing, %d more fallbacks", p.Probing(), len(fellBack))
	}
	for _, pod := range pods {
		if n := fakes.ReadsOf("team", pod.Name); n != 1 {
			t.Errorf("%s read %d times, want once", pod.Name, n)
		}
	}
}

// Pods whose probe has initialDelaySeconds and that never show their
// container running are read again and again; the namespace's reads stay
// within its rate, however many such pods it has.
func TestPodReadsOfOneNamespaceAreRateLimited(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	var pods []*corev1.Pod
	probe := &corev1.Probe{InitialDelaySeconds: 5, ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(80)}}}
	for s := range 4 {
		for i := range maxProbedPodsPerService {
			name := fmt.Sprintf("svc%d-%d", s, i)
			ip := fmt.Sprintf("10.244.%d.%d", len(fmt.Sprint("svc", s)), i)
			pods = append(pods, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: "slow", Name: name, UID: types.UID("slow/" + name)},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", ReadinessProbe: probe}}},
				Status:     corev1.PodStatus{PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}},
			})
		}
	}
	fakes := resolvertest.NewFakePods(pods...)
	p := newTestProber(t, fakes, nil)
	began := time.Now()
	for s := range 4 {
		leave, _ := holdFor(p, clusterview.ServiceRef{Namespace: "slow", Name: "svc" + strconv.Itoa(s)}, maxProbedPodsPerService)
		defer leave()
	}
	if p.Probing() != 4*maxProbedPodsPerService {
		t.Fatalf("%d probing, want %d", p.Probing(), 4*maxProbedPodsPerService)
	}
	time.Sleep(2 * time.Second)
	reads := 0
	for _, pod := range pods {
		reads += fakes.ReadsOf("slow", pod.Name)
	}
	elapsed := time.Since(began).Seconds()
	if limit := clusterview.PodReadBurst + int(clusterview.PodReadRate*elapsed) + 1; reads > limit {
		t.Errorf("%d pod reads in %.1fs by one namespace, past its rate (%d at most)", reads, elapsed, limit)
	}
	if reads < clusterview.PodReadBurst {
		t.Errorf("only %d pod reads; the burst is %d", reads, clusterview.PodReadBurst)
	}
}

// flakyPods fails the first fail reads of each pod with err, then reads
// pods.
type flakyPods struct {
	*resolvertest.FakePods
	fail int
	err  error
}

func (f *flakyPods) Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	if f.ReadsOf(namespace, name) < f.fail {
		f.CountRead(namespace, name)
		return nil, f.err
	}
	return f.FakePods.Pod(ctx, namespace, name)
}

// A pod read that fails in a way that may pass (the apiserver throttles,
// times out, is unavailable) is tried again while the hold lasts, and the
// pod is probed once a read passes (issue 39, item 3). One that will not
// pass (the pod is gone, the read is forbidden) leaves the pod to the
// kubelet's Ready at once.
func TestAFailedPodReadIsTriedAgain(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	for _, c := range []struct {
		name   string
		err    error
		probed bool
	}{
		{"too many requests", apierrors.NewTooManyRequests("slow down", 1), true},
		{"a timeout", apierrors.NewTimeoutError("read", 1), true},
		{"unavailable", apierrors.NewServiceUnavailable("restarting"), true},
		{"a lost connection", errors.New("connection reset by peer"), true},
		{"gone", apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "web-1"), false},
		{"forbidden", apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "web-1", errors.New("no")), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			app := clusterviewtest.NewStartingApp(t, "127.0.0.2")
			app.Ready.Store(true)
			pods := &flakyPods{FakePods: resolvertest.NewFakePods(app.Pod("web-1", "u1")), fail: 3, err: c.err}
			var fellBack []string
			var mu sync.Mutex
			p := newTestProber(t, pods, func(r string) { mu.Lock(); fellBack = append(fellBack, r); mu.Unlock() })
			leave := p.Join(testSvc)
			defer leave()
			ep := app.Endpoint("web-1", "u1")
			passed := func() bool { return len(p.Passed(testSvc, []clusterview.UnreadyEndpoint{ep})) == 1 }
			passed() // starts the probe
			if c.probed {
				resolvertest.Eventually(t, 5*time.Second, "the pod to pass its check after the failed reads", passed)
				if n := pods.ReadsOf("team", "web-1"); n != 4 {
					t.Errorf("%d reads, want the 3 failed and 1 more", n)
				}
			} else {
				resolvertest.Eventually(t, 5*time.Second, "the fallback", func() bool { mu.Lock(); defer mu.Unlock(); return len(fellBack) == 1 })
				if passed() || pods.ReadsOf("team", "web-1") != 1 || fellBack[0] != FallbackPodUnreadable {
					t.Errorf("passed %v after %d reads, fell back for %v; want one read and %q", passed(), pods.ReadsOf("team", "web-1"), fellBack, FallbackPodUnreadable)
				}
			}
		})
	}
}

// Tenant safety (issue 38, hole 2): a forged not-ready endpoint that names
// a genuine pod (its name and UID) at another address gets a plan of its
// own, which the pod's status refuses (pod_mismatch): it never reuses the
// genuine endpoint's plan, whose checks pass at the pod's real address,
// so no held request is sent to the forged address. Variants: the forged
// address before the genuine one was ever probed, and after.
func TestAForgedEndpointNeverReusesAGenuinePodsPlan(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	app := clusterviewtest.NewStartingApp(t, "127.0.0.2")
	app.Ready.Store(true)
	pods := resolvertest.NewFakePods(app.Pod("web-1", "u1"))
	fellBack := make(chan string, 100)
	p := newTestProber(t, pods, func(r string) {
		select {
		case fellBack <- r:
		default:
		}
	})
	genuine := app.Endpoint("web-1", "u1")
	forged := genuine
	forged.IP = "127.0.0.3" // another team's pod, a node, the apiserver

	leave := p.Join(testSvc)
	defer leave()
	resolvertest.Eventually(t, 5*time.Second, "the genuine endpoint to pass", func() bool {
		return len(p.Passed(testSvc, []clusterview.UnreadyEndpoint{genuine})) == 1
	})
	for range 20 {
		if got := p.Passed(testSvc, []clusterview.UnreadyEndpoint{forged}); len(got) != 0 {
			t.Fatalf("the forged endpoint passed: %v", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case r := <-fellBack:
		if r != podcheck.FallbackPodMismatch {
			t.Errorf("the forged endpoint fell back for %q, want %q", r, podcheck.FallbackPodMismatch)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the forged endpoint was not refused")
	}
	time.Sleep(100 * time.Millisecond)
	if n := len(fellBack); n != 0 {
		t.Errorf("%d more fallbacks: looking again probed the forged endpoint again", n)
	}
	// And both listed at once: only the genuine address passes.
	resolvertest.Eventually(t, 5*time.Second, "the genuine address alone", func() bool {
		got := p.Passed(testSvc, []clusterview.UnreadyEndpoint{genuine, forged})
		return len(got) == 1 && got[0] == app.Addr()
	})
}
