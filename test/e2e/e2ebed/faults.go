package e2ebed

import (
	"context"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/elasti-dev/elasti/test/localcluster"
	"github.com/elasti-dev/elasti/test/testenv"
)

// Fault is what a soak does beside one round's requests (issue 39).
type Fault string

const (
	// FaultResolverDeleted: a Ready resolver pod is deleted (its grace
	// period and all, as a rollout or a drain does) while it holds
	// requests.
	FaultResolverDeleted Fault = "resolver-pod-deleted"
	// FaultAPIServerKilled: the kube-apiserver is SIGKILLed and started
	// again (same flags, etcd kept) while requests are held.
	FaultAPIServerKilled Fault = "apiserver-killed"
)

// FaultDelay is how long after a round's requests go out its fault
// begins: they are held by then, their pods starting.
const FaultDelay = 500 * time.Millisecond

// FaultAt is the fault of round of rounds: a resolver pod deleted a
// third of the way in, the apiserver SIGKILLed two thirds in; none
// ("") with fewer than 3 rounds.
func FaultAt(round, rounds int) Fault {
	switch {
	case rounds < 3:
		return ""
	case round == rounds/3:
		return FaultResolverDeleted
	case round == 2*rounds/3:
		return FaultAPIServerKilled
	}
	return ""
}

// Inject waits FaultDelay, then brings f about on the cluster c that
// kube reaches. It runs beside the round's requests, so it reports with
// tb.Errorf, never Fatal.
func Inject(ctx context.Context, tb testing.TB, kube kubernetes.Interface, c *localcluster.Cluster, f Fault) {
	time.Sleep(FaultDelay)
	switch f {
	case FaultResolverDeleted:
		pods, err := kube.CoreV1().Pods(ElastiNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + ResolverDeployment})
		if err != nil {
			tb.Error(err)
			return
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Status.PodIP != "" && testenv.PodReady(&p) {
				tb.Logf("deleting resolver pod %s with requests held", p.Name)
				if err := kube.CoreV1().Pods(ElastiNamespace).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
					tb.Error(err)
				}
				return
			}
		}
		tb.Error("no Ready resolver pod to delete")
	case FaultAPIServerKilled:
		began := time.Now()
		if err := c.RestartAPIServer(ctx, syscall.SIGKILL); err != nil {
			tb.Errorf("restarting the apiserver: %v", err)
			return
		}
		tb.Logf("the apiserver was SIGKILLed with requests held and was healthy again %s later", time.Since(began).Round(time.Millisecond))
	}
}
