package directprobe

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"

	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
	"github.com/elasti-dev/elasti/pkg/resolver/internal/resolvertest"
)

// testSvc is the Service the tests hold for.
var testSvc = clusterview.ServiceRef{Namespace: "team", Name: "web"}

// blockingPods never answers until its context ends: every probe it is
// asked for stays running, so the bounds are what limits them.
type blockingPods struct{ reads atomic.Int32 }

func TestDirectProbeBounds(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	var fellBack atomic.Int32
	p := NewProber(ctx, clusterview.NewMemoryEndpoints(), nil, &blockingPods{}, Report{FellBack: func(reason string) {
		if reason == FallbackBound {
			fellBack.Add(1)
		}
	}}, ktesting.NewLogger(t, ktesting.NewConfig()))
	t.Cleanup(func() { cancel(); p.Close() })

	var leaves []func()
	services := 2 * maxProbedPods / maxProbedPodsPerService
	for s := range services {
		svc := clusterview.ServiceRef{Namespace: "ns" + strconv.Itoa(s), Name: "web"}
		leaves = append(leaves, p.Join(svc))
		var eps []clusterview.UnreadyEndpoint
		for i := range clusterview.MaxUnreadyEndpoints {
			eps = append(eps, clusterview.UnreadyEndpoint{IP: fmt.Sprintf("10.244.%d.%d", s, i), Port: 80, Pod: "p" + strconv.Itoa(i), UID: types.UID(fmt.Sprint(s, "-", i))})
		}
		p.Passed(svc, eps)
		p.mu.Lock()
		per := len(p.services[svc].pods)
		p.mu.Unlock()
		if per > maxProbedPodsPerService {
			t.Fatalf("service %d: %d pods probed, bound %d", s, per, maxProbedPodsPerService)
		}
	}
	if got := p.Probing(); got != maxProbedPods {
		t.Errorf("%d pods probed in all, want the bound %d", got, maxProbedPods)
	}
	// Every listed pod past a bound is counted once, however often a
	// hold looks again.
	last := clusterview.ServiceRef{Namespace: "ns" + strconv.Itoa(services-1), Name: "web"}
	for range 3 {
		p.Passed(last, []clusterview.UnreadyEndpoint{{IP: "10.244.99.1", Port: 80, Pod: "late", UID: "late"}})
	}
	if want := int32(services*clusterview.MaxUnreadyEndpoints - maxProbedPods + 1); fellBack.Load() != want {
		t.Errorf("%d pods counted past the bound, want %d", fellBack.Load(), want)
	}
	for _, leave := range leaves {
		leave()
	}
	p.mu.Lock()
	left := len(p.services)
	p.mu.Unlock()
	if p.Probing() != 0 || left != 0 {
		t.Errorf("after every hold left: %d pods probed, %d services kept", p.Probing(), left)
	}
	// A Service nobody holds for is never probed.
	if addrs := p.Passed(testSvc, []clusterview.UnreadyEndpoint{{IP: "10.244.0.1", Port: 80, Pod: "p", UID: "x"}}); addrs != nil || p.Probing() != 0 {
		t.Errorf("a Service without holds: %v passed, %d probed", addrs, p.Probing())
	}
}

func TestPodPlansAreBounded(t *testing.T) {
	p := NewProber(context.Background(), clusterview.NewMemoryEndpoints(), nil, resolvertest.NewFakePods(), Report{}, ktesting.NewLogger(t, ktesting.NewConfig()))
	for i := range maxPodPlans + 10 {
		p.plans.Add(podAt{uid: types.UID(strconv.Itoa(i))}, planOrErr{}, podPlanTTL)
	}
	if n := len(p.plans.Keys()); n != maxPodPlans {
		t.Errorf("%d plans kept, bound %d", n, maxPodPlans)
	}
	if _, ok := p.plans.Get(podAt{uid: types.UID("0")}); ok {
		t.Error("the oldest plan was kept past the bound")
	}
}

func (b *blockingPods) Pod(ctx context.Context, _, _ string) (*corev1.Pod, error) {
	b.reads.Add(1)
	<-ctx.Done()
	return nil, ctx.Err()
}
