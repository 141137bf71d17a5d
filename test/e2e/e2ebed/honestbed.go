package e2ebed

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/elasti-dev/elasti/test/localcluster/clustertest"
	"github.com/elasti-dev/elasti/test/localcluster/realnet"
	"github.com/elasti-dev/elasti/test/testenv"
)

// CheckPodsAnswerWhenReady checks that the bed never reports a pod Ready
// before its address answers, as a real kubelet does not: its Ready
// follows a probe that passed on that address. It starts pods pods at
// once in a Deployment of a namespace of its own and, the moment the watch says
// one is Ready, connects to its address on AppPort. Before the fake
// kubelet published Ready itself (issue 43), kwok wrote Ready as it gave
// the pod its address, and the fake kubelet put the address up later,
// one pod after another: 58 of 60 pods failed this check, and under load
// the lag passed the resolver's 10 s connect patience, so a cold start got
// a 502 from a resolver that trusted Ready. The bed must run with
// clustertest.ReadyAfterAddress.
func CheckPodsAnswerWhenReady(t *testing.T, n *realnet.Net, kube kubernetes.Interface, pods int) {
	t.Helper()
	ns := clustertest.Namespace(t)
	type result struct {
		ip  string
		err error
		// lag is how long after the watch said Ready the address first
		// answered, when it did not at once.
		lag time.Duration
	}
	var (
		mu      sync.Mutex
		results = map[types.UID]result{}
		checks  sync.WaitGroup
	)
	stop := make(chan struct{})
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(ns))
	informer := factory.Core().V1().Pods().Informer()
	see := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.DeletionTimestamp != nil || !testenv.PodReady(p) {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if _, seen := results[p.UID]; seen {
			return
		}
		results[p.UID] = result{ip: p.Status.PodIP}
		uid, ip := p.UID, p.Status.PodIP
		// At once, beside the watch: one dial per pod, bounded by
		// podnet.DefaultDialTimeout.
		seen := time.Now()
		checks.Go(func() {
			err := n.Network.Reachable(t.Context(), ip, AppPort)
			r := result{ip: ip, err: err}
			// A pod Ready before its address answers: how long until it
			// does, for the log (bounded).
			for deadline := seen.Add(time.Minute); r.err != nil && time.Now().Before(deadline); {
				time.Sleep(50 * time.Millisecond)
				if n.Network.Reachable(t.Context(), ip, AppPort) == nil {
					r.lag = time.Since(seen)
					break
				}
			}
			mu.Lock()
			results[uid] = r
			mu.Unlock()
		})
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    see,
		UpdateFunc: func(_, obj any) { see(obj) },
	}); err != nil {
		t.Fatal(err)
	}
	factory.Start(stop)
	defer func() { close(stop); factory.Shutdown() }()
	if !cache.WaitForCacheSync(t.Context().Done(), informer.HasSynced) {
		t.Fatal("the pod watch did not sync")
	}

	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "many", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(pods)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "many"}},
			Template: testenv.PodTemplate("many"),
		},
	}
	if _, err := kube.AppsV1().Deployments(ns).Create(t.Context(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(results) >= pods, nil
	}); err != nil {
		mu.Lock()
		seen := len(results)
		mu.Unlock()
		t.Fatalf("%d of %d pods seen Ready: %v", seen, pods, err)
	}
	checks.Wait()
	var failed []string
	for uid, r := range results {
		if r.err != nil {
			failed = append(failed, fmt.Sprintf("%s (%s): %v; answered %v after Ready", r.ip, uid, r.err, r.lag.Round(time.Millisecond)))
		}
	}
	sort.Strings(failed)
	if len(failed) > 0 {
		t.Fatalf("%d of %d pods were Ready before their address answered; the first: %v", len(failed), len(results), failed[:min(len(failed), 5)])
	}
	t.Logf("%d pods, each reached at its address the moment the watch said it was Ready", len(results))
}
