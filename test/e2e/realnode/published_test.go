package realnode

import (
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/elasti-dev/elasti/test/testenv"
)

// addressWatch remembers when each pod of a namespace was first seen with
// an address (status.podIPs) by a watch of its own: the moment the
// kubelet's status manager published it, give or take the watch's
// delivery, which the resolver's watches pay too. A pod's address is
// published late when the kubelet's status writes fall behind (many pods
// starting on one node at once), and nothing off the node can check or
// reach the pod before it is.
type addressWatch struct {
	mu   sync.Mutex
	seen map[string]time.Time // by pod name: names are new at every wake
}

// watchAddresses starts an addressWatch of e's namespace until tb ends.
func watchAddresses(tb testing.TB, e *testenv.Env) *addressWatch {
	tb.Helper()
	w := &addressWatch{seen: map[string]time.Time{}}
	factory := informers.NewSharedInformerFactoryWithOptions(e.Kube, 0, informers.WithNamespace(e.NS))
	inf := factory.Core().V1().Pods().Informer()
	record := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok && len(p.Status.PodIPs) > 0 {
			now := time.Now()
			w.mu.Lock()
			if _, ok := w.seen[p.Name]; !ok {
				w.seen[p.Name] = now
			}
			w.mu.Unlock()
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: record, UpdateFunc: func(_, obj any) { record(obj) },
	}); err != nil {
		tb.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	tb.Cleanup(func() { close(stop); factory.Shutdown() })
	if !cache.WaitForCacheSync(tb.Context().Done(), inf.HasSynced) {
		tb.Fatal("the pods' address watch did not sync")
	}
	return w
}

// at is when pod was first seen with an address.
func (w *addressWatch) at(pod string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t, ok := w.seen[pod]
	return t, ok
}
