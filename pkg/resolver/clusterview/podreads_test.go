package clusterview

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/elasti-dev/elasti/pkg/resolver/internal/resolvertest"
)

// readsEnv is a podReads over pods, on a clock the test sets, and the
// Services it was told changed.
type readsEnv struct {
	r     *podReads
	clock *testingclock.FakeClock
	got   chan ServiceRef
}

func newReadsEnv(t *testing.T, pods PodGetter) *readsEnv {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	e := &readsEnv{clock: testingclock.NewFakeClock(time.Unix(1000, 0)), got: make(chan ServiceRef, 1024)}
	e.r = newPodReads(ctx, pods, func(svc ServiceRef) { e.got <- svc }, ktesting.NewLogger(t, ktesting.NewConfig()), e.clock)
	t.Cleanup(func() { cancel(); e.r.wait() })
	return e
}

func (e *readsEnv) advance(d time.Duration) { e.clock.Step(d) }

// settle waits for the reads under way to be in.
func (e *readsEnv) settle() { e.r.wait() }

func podNames(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	slices.Sort(out)
	return out
}

// A read vouches for a pod the Service selects, once it is in: the first
// lookup starts it and says when it is in; the pod is read again only
// once its read is readPodFresh old; a pod that does not exist, or that
// the Service does not select, vouches for nothing.
func TestPodReadsVouchForWhatTheyRead(t *testing.T) {
	web := map[string]string{"app": "web"}
	pods := resolvertest.NewFakePods(resolvertest.Labelled(resolvertest.ViewPod("web-1", "u1", true, "10.244.0.5"), web),
		resolvertest.Labelled(resolvertest.ViewPod("other", "u2", true, "10.244.0.6"), map[string]string{"app": "other"}))
	e := newReadsEnv(t, pods)
	const sel = "app=web"
	ask := []string{"web-1", "other", "gone"}

	if got, ok := e.r.get(testSvc, sel, ask); !ok || len(got) != 0 {
		t.Fatalf("first lookup = %v, %v; want nothing yet, and reads started", podNames(got), ok)
	}
	e.settle()
	if len(e.got) == 0 {
		t.Error("no resolvertest.Service was told its reads were in")
	}
	got, ok := e.r.get(testSvc, sel, ask)
	if !ok || !slices.Equal(podNames(got), []string{"web-1"}) {
		t.Fatalf("after the reads = %v, %v; want [web-1]", podNames(got), ok)
	}
	if got[0].Status.PodIPs[0].IP != "10.244.0.5" || got[0].UID != "u1" {
		t.Errorf("read pod = %+v, want web-1's UID and address", got[0])
	}
	e.settle()
	for _, n := range ask {
		if r := pods.ReadsOf(testSvc.Namespace, n); r != 1 {
			t.Errorf("%s read %d times within readPodFresh, want 1", n, r)
		}
	}

	e.advance(readPodFresh)
	if got, _ := e.r.get(testSvc, sel, ask); !slices.Equal(podNames(got), []string{"web-1"}) {
		t.Errorf("a stale read no longer vouches: %v", podNames(got))
	}
	e.settle()
	if r := pods.ReadsOf(testSvc.Namespace, "web-1"); r != 2 {
		t.Errorf("web-1 read %d times after readPodFresh, want 2", r)
	}

	// The pod goes: the next read says so.
	pods.Delete(testSvc.Namespace, "web-1")
	e.advance(readPodFresh)
	e.r.get(testSvc, sel, ask)
	e.settle()
	if got, _ := e.r.get(testSvc, sel, ask); len(got) != 0 {
		t.Errorf("a deleted pod still vouched for: %v", podNames(got))
	}

	// A read is kept readPodKeep at most: past it, nothing vouches until
	// a read is in again.
	pods.Set(resolvertest.Labelled(resolvertest.ViewPod("web-1", "u1", true, "10.244.0.5"), web))
	e.advance(readPodFresh)
	e.r.get(testSvc, sel, ask)
	e.settle()
	e.advance(readPodKeep + time.Millisecond)
	if got, _ := e.r.get(testSvc, sel, []string{"web-1"}); len(got) != 0 {
		t.Errorf("a read older than readPodKeep vouched: %v", podNames(got))
	}
}

// A Service whose selector changed reads its pods again: a read says
// whether one selector selects the pod.
func TestPodReadsAreBySelector(t *testing.T) {
	pods := resolvertest.NewFakePods(resolvertest.Labelled(resolvertest.ViewPod("web-1", "u1", true, "10.244.0.5"), map[string]string{"app": "web", "v": "2"}))
	e := newReadsEnv(t, pods)
	for _, sel := range []string{"app=web,v=1", "app=web,v=2", ""} {
		e.r.get(testSvc, sel, []string{"web-1"})
		e.settle()
	}
	if got, _ := e.r.get(testSvc, "app=web,v=1", []string{"web-1"}); len(got) != 0 {
		t.Errorf("vouched for a pod the selector does not select: %v", podNames(got))
	}
	if got, _ := e.r.get(testSvc, "app=web,v=2", []string{"web-1"}); len(got) != 1 {
		t.Errorf("did not vouch for the selected pod: %v", podNames(got))
	}
	if got, _ := e.r.get(testSvc, "", []string{"web-1"}); len(got) != 1 {
		t.Errorf("a selector the cache did not keep: want the pod by name alone, got %v", podNames(got))
	}
}

// What a lookup reads is bounded: at most maxReadsPerLookup names of
// one lookup, and maxReadsInFlight reads at once.
func TestPodReadsAreBounded(t *testing.T) {
	block := make(chan struct{})
	slow := &heldPodReads{release: block}
	e := newReadsEnv(t, slow)
	var many []string
	for i := range 3 * maxReadsInFlight {
		many = append(many, "p"+string(rune('a'+i%26))+string(rune('a'+i/26)))
	}
	e.r.get(testSvc, "", many)
	e.r.get(ServiceRef{Namespace: "other", Name: "web"}, "", many)
	e.r.get(ServiceRef{Namespace: "third", Name: "web"}, "", many)
	e.r.mu.Lock()
	inFlight := len(e.r.inFlight)
	e.r.mu.Unlock()
	if inFlight != maxReadsInFlight {
		t.Errorf("%d reads under way, want maxReadsInFlight (%d)", inFlight, maxReadsInFlight)
	}
	close(block)
	e.settle()
	if n := slow.count(testSvc.Namespace); n != maxReadsPerLookup {
		t.Errorf("one lookup read %d pods, want maxReadsPerLookup (%d)", n, maxReadsPerLookup)
	}
}

// Once a read is refused, the resolver may not read pods for
// readRefusalPause: nothing is vouched for by a read (ok false), and it
// reads no more. After the pause it reads again: the refusal may have
// come from an apiserver whose authorizer was starting.
func TestPodReadsRefusedSayNotOKForAPause(t *testing.T) {
	for _, refusal := range []error{
		apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "web-1", nil),
		apierrors.NewUnauthorized("starting"),
	} {
		refused := &heldPodReads{release: closed, err: refusal}
		e := newReadsEnv(t, refused)
		e.r.get(testSvc, "", []string{"web-1"})
		e.settle()
		if _, ok := e.r.get(testSvc, "", []string{"web-1", "web-2"}); ok {
			t.Errorf("%v: ok after a refused read", refusal)
		}
		e.advance(readRefusalPause - time.Millisecond)
		if _, ok := e.r.get(testSvc, "", []string{"web-1", "web-2"}); ok {
			t.Errorf("%v: ok before the pause ended", refusal)
		}
		e.settle()
		if n := refused.count(testSvc.Namespace); n != 1 {
			t.Errorf("%v: %d reads, want 1: none in the pause", refusal, n)
		}
		e.advance(time.Millisecond)
		if _, ok := e.r.get(testSvc, "", []string{"web-1"}); !ok {
			t.Errorf("%v: not ok once the pause ended", refusal)
		}
		e.settle()
		if n := refused.count(testSvc.Namespace); n != 2 {
			t.Errorf("%v: %d reads, want 2: one more once the pause ended", refusal, n)
		}
	}
}

// heldPodReads answers each read once release is closed, with err or a
// pod of the name asked for.
type heldPodReads struct {
	release <-chan struct{}
	err     error
	mu      sync.Mutex
	reads   map[string]int
}

func (b *heldPodReads) Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	b.mu.Lock()
	if b.reads == nil {
		b.reads = map[string]int{}
	}
	b.reads[namespace]++
	b.mu.Unlock()
	select {
	case <-b.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if b.err != nil {
		return nil, b.err
	}
	return resolvertest.ViewPod(name, "u", true, "10.244.0.9"), nil
}

func (b *heldPodReads) count(namespace string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.reads[namespace]
}
