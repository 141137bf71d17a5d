// Package clustertest shares one local control plane among the tests of a
// package. Call Main from TestMain; tests then call Get.
//
// A package starts its own cluster unless ELASTI_TEST_CLUSTER names the
// directory of one already running (make cluster-up). A cluster that cannot
// start fails the package loudly: integration tests never skip.
package clustertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/elasti-dev/elasti/test/localcluster"
	"github.com/elasti-dev/elasti/test/localcluster/podnet"
)

// ReuseEnv names a running cluster's directory to use instead of starting one.
const ReuseEnv = "ELASTI_TEST_CLUSTER"

var (
	shared *localcluster.Cluster
	// readyAfterAddress is what ReadyAfterAddress sets.
	readyAfterAddress bool

	interruptMu sync.Mutex
	onInterrupt []func()
	afterTests  []func()
)

// OnInterrupt registers f to run, newest first, when the test binary is
// interrupted (SIGINT, SIGTERM), before the cluster stops: a package that
// builds network namespaces or starts processes tears them down there too.
func OnInterrupt(f func()) {
	interruptMu.Lock()
	defer interruptMu.Unlock()
	onInterrupt = append(onInterrupt, f)
}

// AfterTests registers f to run, newest first, once the package's tests
// have run or the binary is interrupted, whatever the outcome: for what a
// test binary leaves outside its tests' temporary directories, such as a
// build shared by all of them.
func AfterTests(f func()) {
	interruptMu.Lock()
	defer interruptMu.Unlock()
	afterTests = append(afterTests, f)
}

func runAfterTestsHooks() { runHooks(&afterTests) }

func runInterruptHooks() { runHooks(&onInterrupt) }

// runHooks runs and forgets the hooks in *list, newest first.
func runHooks(list *[]func()) {
	interruptMu.Lock()
	hooks := *list
	*list = nil
	interruptMu.Unlock()
	for i := len(hooks) - 1; i >= 0; i-- {
		hooks[i]()
	}
}

// Isolate runs the package's test binary in a network namespace of its own
// (podnet.Isolate), so its pod network and loopback listeners never meet
// another package's and it need not wait for LockPath: call it first in
// TestMain. The control plane's binaries are built, and the modules the
// tests' own builds need downloaded, before, on the host: the namespace
// has no route out, and a cold machine downloads. With ReuseEnv set the package
// uses a cluster on the host's loopback, so it stays on the host.
func Isolate() {
	if os.Getenv(ReuseEnv) != "" {
		return
	}
	podnet.Isolate(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		if _, err := localcluster.EnsureBinaries(ctx, os.Stderr); err != nil {
			return err
		}
		return localcluster.EnsureModules(ctx, os.Stderr)
	})
}

// ReadyAfterAddress makes the package's own cluster leave kwok pods' Ready
// to the pod network's fake kubelet (localcluster.Options.ReadyAfterAddress):
// call it before Main in a package whose bed runs podnet's Kubelet before
// it makes any kwok pod, so no pod is Ready before its address answers. A
// cluster named by ReuseEnv keeps the stages it was started with.
func ReadyAfterAddress() { readyAfterAddress = true }

// Main starts (or attaches to) the package's cluster, runs the tests and
// stops the cluster. Use it as: func TestMain(m *testing.M) { os.Exit(clustertest.Main(m)) }
func Main(m *testing.M) int {
	if dir := os.Getenv(ReuseEnv); dir != "" {
		c, err := localcluster.Load(dir)
		if err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: %s=%s: %v\n", ReuseEnv, dir, err)
			return 1
		}
		shared = c
		defer runAfterTestsHooks()
		return m.Run()
	}
	return runOwn(m)
}

// MainPrivate is Main for a package whose tests disturb the control plane
// itself, e.g. restart its apiserver: it always starts a cluster of its
// own, even when ReuseEnv names a running one, because other packages may
// be using that one, and only a cluster this process started can have its
// components restarted.
func MainPrivate(m *testing.M) int {
	if dir := os.Getenv(ReuseEnv); dir != "" {
		fmt.Fprintf(os.Stderr, "%s=%s ignored: this package disturbs its control plane, so it starts its own\n", ReuseEnv, dir)
	}
	return runOwn(m)
}

// runOwn starts a cluster, runs the tests and stops it.
func runOwn(m *testing.M) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer runAfterTestsHooks()
	c, err := localcluster.Start(ctx, localcluster.Options{Progress: os.Stderr, ReadyAfterAddress: readyAfterAddress})
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: the local control plane could not start, so no integration test can run:\n%v\n", err)
		return 1
	}
	shared = c

	// An interrupted run still stops the control plane; Pdeathsig covers a
	// killed one.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		if _, ok := <-sigs; ok {
			runInterruptHooks()
			c.Stop()
			runAfterTestsHooks()
			os.Exit(1)
		}
	}()
	code := m.Run()
	signal.Stop(sigs)
	close(sigs)
	c.Stop()
	return code
}

// Get returns the package's cluster.
func Get(t testing.TB) *localcluster.Cluster {
	t.Helper()
	if shared == nil {
		t.Fatal("clustertest.Main must be called from TestMain before clustertest.Get")
	}
	return shared
}

// Clientset returns an admin clientset for the package's cluster.
func Clientset(t testing.TB) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(Get(t).RESTConfig())
	if err != nil {
		t.Fatalf("clientset: %v", err)
	}
	return cs
}

// Namespace creates a namespace unique to the test and deletes it when the
// test ends, so tests sharing a cluster never see each other's objects.
func Namespace(t testing.TB) string {
	t.Helper()
	cs := Clientset(t)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "t-" + hex.EncodeToString(b)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = cs.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
	})
	return name
}
