package testenv

import (
	"context"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// WakeOrder records, from watches, when each Deployment and StatefulSet of
// a namespace was first seen scaled up (spec.replicas > 0) and first seen
// with its wanted replicas ready, so a test can check the order a wake
// group (spec.wakeWith) came up in. Workloads are keyed "Kind/name".
type WakeOrder struct {
	mu            sync.Mutex
	scaled, ready map[string]time.Time
	// wanted is the ready count each workload counts as Ready at (1 when
	// it is not listed).
	wanted map[string]int32
}

// WatchWakeOrder starts a WakeOrder of e's namespace, until the test ends.
func (e *Env) WatchWakeOrder(wanted map[string]int32) *WakeOrder {
	e.T.Helper()
	o := &WakeOrder{scaled: map[string]time.Time{}, ready: map[string]time.Time{}, wanted: wanted}
	ctx, cancel := context.WithCancel(context.Background())
	e.T.Cleanup(cancel)
	deps, err := e.Kube.AppsV1().Deployments(e.NS).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		e.T.Fatal(err)
	}
	sets, err := e.Kube.AppsV1().StatefulSets(e.NS).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		e.T.Fatal(err)
	}
	for _, w := range []watch.Interface{deps, sets} {
		go func() {
			defer w.Stop()
			for ev := range w.ResultChan() {
				switch x := ev.Object.(type) {
				case *appsv1.Deployment:
					o.see("Deployment/"+x.Name, *x.Spec.Replicas, x.Status.ReadyReplicas)
				case *appsv1.StatefulSet:
					o.see("StatefulSet/"+x.Name, *x.Spec.Replicas, x.Status.ReadyReplicas)
				}
			}
		}()
	}
	return o
}

func (o *WakeOrder) see(key string, replicas, ready int32) {
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.scaled[key]; !ok && replicas > 0 {
		o.scaled[key] = now
	}
	if _, ok := o.ready[key]; !ok && replicas > 0 && ready >= max(o.wanted[key], 1) {
		o.ready[key] = now
	}
}

// ReadyBeforeScaled fails t unless first was seen Ready before second was
// seen scaled up.
func (o *WakeOrder) ReadyBeforeScaled(t testing.TB, first, second string) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	r, ok1 := o.ready[first]
	sc, ok2 := o.scaled[second]
	if !ok1 || !ok2 {
		t.Fatalf("%s seen Ready: %v; %s seen scaled: %v", first, ok1, second, ok2)
	}
	if !r.Before(sc) {
		t.Errorf("%s was scaled up at %s, before %s was Ready at %s", second, sc.Format(time.StampMicro), first, r.Format(time.StampMicro))
	}
	t.Logf("%s Ready at %s; %s scaled at %s", first, r.Format(time.StampMicro), second, sc.Format(time.StampMicro))
}
