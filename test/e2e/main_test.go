package e2e

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/elasti-dev/elasti/pkg/command"
	"github.com/elasti-dev/elasti/test/localcluster/clustertest"
	"github.com/elasti-dev/elasti/test/localcluster/podnet"
)

var (
	podnetOnce     sync.Once
	podnetErr      error
	network        *podnet.Network
	stopPodNetwork func()
)

func TestMain(m *testing.M) {
	// As the binaries do (command.Main): every apiserver client of the
	// in-process operator and resolver checks its connections.
	command.CheckAPIServerConnections()
	// In a network namespace of its own, so the pod network needs no
	// machine-wide lock.
	clustertest.Isolate()
	code := clustertest.Main(m)
	// Every test's resolver stopped in its cleanup, so nothing dials a pod
	// IP any more when the route into the namespace goes.
	if stopPodNetwork != nil {
		stopPodNetwork()
	}
	os.Exit(code)
}

// podNetwork builds the package's pod network once, with a fake kubelet
// keeping Ready pods' IPs on it and the backends listening inside it. A
// network that cannot be built fails the test; it never skips.
func podNetwork(t testing.TB) *podnet.Network {
	t.Helper()
	podnetOnce.Do(func() {
		ctx := context.Background()
		n, err := podnet.Setup(ctx, podnet.Options{Logf: func(format string, args ...any) {
			fmt.Fprintf(os.Stderr, "[podnet] "+format+"\n", args...)
		}})
		if err != nil {
			podnetErr = fmt.Errorf("the pod network could not be built, so no end-to-end test can run: %w", err)
			return
		}
		kube := kubernetes.NewForConfigOrDie(clustertest.Get(t).RESTConfig())
		kctx, cancel := context.WithCancel(ctx)
		k, err := n.RunKubelet(kctx, kube, nil)
		if err != nil {
			cancel()
			n.Close()
			podnetErr = err
			return
		}
		for deadline := time.Now().Add(30 * time.Second); !k.HasSynced() && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
		}
		if err := startBackends(n); err != nil {
			cancel()
			n.Close()
			podnetErr = err
			return
		}
		network = n
		var stopOnce sync.Once
		stopPodNetwork = func() { stopOnce.Do(func() { cancel(); <-k.Done(); n.Close() }) }
		// Interrupted, the run still removes its namespace, veth and route.
		clustertest.OnInterrupt(stopPodNetwork)
	})
	if podnetErr != nil {
		t.Fatal(podnetErr)
	}
	return network
}
