// Package e2ebed is what the end-to-end suites' beds share (test/e2e/traffic,
// test/e2e/helm, test/e2e/realnode): starting a package's bed once, building
// elasti's binaries from this tree, the kwok app pods' one echo server, and
// waiting for elasti's Deployments from manifests/. Each suite keeps only
// what its bed does differently: traffic installs manifests/ on kwok pods,
// helm installs the chart, realnode runs images on the real node.
package e2ebed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/elasti-dev/elasti/pkg/command"
	"github.com/elasti-dev/elasti/test/localcluster/clustertest"
	"github.com/elasti-dev/elasti/test/localcluster/realnet"
)

const (
	// ElastiNamespace and the Deployment names are manifests/' own.
	ElastiNamespace    = "elasti"
	OperatorDeployment = "elasti-operator-controller-manager"
	ResolverDeployment = "elasti-resolver"

	// AppPort is where every kwok app pod "listens": one echo server on
	// 0.0.0.0 inside the node namespace answers on every live pod IP.
	AppPort = 8080

	// StallBeyondReady is how long after its app was ready (the pod's
	// Ready, or on the real node the app's first readiness 200) a cold
	// start may be answered before the cold-start gates fail it as a
	// stall and print its evidence: the soak's bound inside its fault
	// windows (issue 39). A stall is a bug, not noise; the gates' figures
	// outside faults stay far below it (docs/benchmarks.md).
	StallBeyondReady = 5 * time.Second
	// SlowBeyondReady is the time beyond the app's readiness past which
	// the gates log where a cold start's time went, with the evidence a
	// stall gets (issue 39: every cold start within a second of it):
	// twenty times the real-node gate's 50 ms p99 target.
	SlowBeyondReady = time.Second
)

// Once starts a package's bed at most once: every test of the package
// shares it, and a bed that cannot start fails each test loudly (nothing
// skips).
type Once[B any] struct {
	once sync.Once
	bed  B
	err  error
}

// Get returns the bed start made, calling start on the first Get only; what
// names the bed in the failure.
func (o *Once[B]) Get(t testing.TB, what string, start func(testing.TB) (B, error)) B {
	t.Helper()
	o.once.Do(func() {
		o.bed, o.err = start(t)
		if o.err != nil {
			o.err = fmt.Errorf("the %s could not start: %w", what, o.err)
		}
	})
	if o.err != nil {
		t.Fatal(o.err)
	}
	return o.bed
}

// Started returns the bed if a Get started it, for TestMain once the tests
// are over.
func (o *Once[B]) Started() (B, bool) {
	o.once.Do(func() { o.err = errors.New("never started") })
	return o.bed, o.err == nil
}

// Main runs a suite's tests (clustertest.Main) and then stop, the bed's
// stopper, and returns the exit code. A client pod is the suite's binary
// again, run inside its sandbox: that run is the client (realnet.ClientMain)
// and never returns here. The suite runs in a network namespace of its own
// (clustertest.Isolate), beside the other suites that need a pod network.
func Main(m *testing.M, stop func()) int {
	realnet.ClientMain()
	clustertest.Isolate()
	code := clustertest.Main(m)
	stop()
	return code
}

// Stopper returns stop, run once at most, and registers it to run when the
// test run is interrupted, so an interrupted run still removes its
// namespaces, veths and routes.
func Stopper(stop func()) func() {
	var once sync.Once
	f := func() { once.Do(stop) }
	clustertest.OnInterrupt(f)
	return f
}

// Logf is a logger to the test run's stderr whose lines start [suite].
func Logf(suite string) func(string, ...any) {
	return func(format string, args ...any) { fmt.Fprintf(os.Stderr, "["+suite+"] "+format+"\n", args...) }
}

// BuildElasti builds elasti-operator and elasti-resolver from the tree at
// root into dir, with version linked in as make build does (none: the
// binaries' default).
func BuildElasti(root, dir, version string) error {
	args := []string{"build"}
	if version != "" {
		args = append(args, "-ldflags", "-X "+command.VersionVariable+"="+version)
	}
	build := exec.Command("go", append(args, "-o", dir+"/", "./cmd/elasti-operator", "./cmd/elasti-resolver")...)
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %w\n%s", err, out)
	}
	return nil
}

// ServeApps runs kwok's app pods on n until ctx ends: their IPs go on the
// node's lo while Ready, where one server, app, answers for all of them on
// AppPort.
func ServeApps(ctx context.Context, n *realnet.Net, kube kubernetes.Interface, app http.Handler) error {
	if _, err := n.Network.RunKubelet(ctx, kube, nil); err != nil {
		return err
	}
	ln, err := n.Network.Listen("tcp", fmt.Sprintf("0.0.0.0:%d", AppPort))
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: app, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return nil
}

// EchoReply is what Echo answers: which pod served the request (the
// address it arrived at) and what it looked like on arrival.
type EchoReply struct {
	ServedBy string `json:"servedBy"`
	Host     string `json:"host"`
	Path     string `json:"path"`
}

// Echo is the app pods' HTTP answer, an EchoReply.
func Echo(w http.ResponseWriter, r *http.Request) {
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	host := ""
	if local != nil {
		host, _, _ = net.SplitHostPort(local.String())
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(EchoReply{ServedBy: host, Host: r.Host, Path: r.URL.Path})
}

// WaitElastiReady waits for the operator's and the resolver's Deployments
// from manifests/ to be Ready, each within timeout.
func WaitElastiReady(ctx context.Context, n *realnet.Net, timeout time.Duration) error {
	for _, d := range []string{OperatorDeployment, ResolverDeployment} {
		if err := n.WaitDeploymentReady(ctx, ElastiNamespace, d, timeout); err != nil {
			return err
		}
	}
	return nil
}
