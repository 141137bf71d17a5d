// Package testenv is the shared fixture of the integration and end-to-end
// tests: a namespace on the local control plane with an operator watching
// only it, the objects tests build, and the waits they need.
//
//   - env.go: the Env, its operator and its cleanup;
//   - objects.go: builders of the objects tests need;
//   - wait.go: reads of the Env's objects, and waits on them;
//   - audit.go: readers of the apiserver's audit log;
//   - metrics.go: readers of the apiserver's metrics;
//   - scale.go: requests to the operator's scale endpoint;
//   - process.go: the operator binary run as a process of its own.
//
// A helper that acts in an Env's namespace or with its clients is a method
// of Env; one that needs no Env (the audit log and the metrics are the whole
// cluster's; builders of bodies, templates and descriptions are pure) is a
// function.
package testenv

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	versioned "github.com/elasti-dev/elasti/pkg/generated/clientset/versioned"
	"github.com/elasti-dev/elasti/pkg/operator"
	"github.com/elasti-dev/elasti/test/install"
	"github.com/elasti-dev/elasti/test/localcluster"
	"github.com/elasti-dev/elasti/test/localcluster/clustertest"
)

const (
	// ResolverName names the stand-in resolver Deployment and Service.
	ResolverName = "resolver"
	// ResolverProxyPort is the resolver port proxy-mode slices point at.
	ResolverProxyPort = 8012
	// PerPortRoutingPortName (the resolver Service's port),
	// PerPortContainerPortName (the container port it targets by name) and
	// PerPortRoutingPort are how elasti's resolver pods declare per-port
	// routing (manifests/30-resolver.yaml). A container port name has at
	// most 15 characters, hence two names.
	PerPortRoutingPortName   = "per-port-routing"
	PerPortContainerPortName = "per-port"
	PerPortRoutingPort       = 8014
	// ResolverPodLabel marks the pods the resolver Service selects.
	ResolverPodLabel = "elasti.test/resolver"
	// WaitTimeout bounds every Eventually.
	WaitTimeout = 60 * time.Second
)

var crdOnce sync.Once

// InstallCRD installs the ElastiService CRD once per test binary.
func InstallCRD(t testing.TB) {
	t.Helper()
	var err error
	crdOnce.Do(func() {
		root, rerr := localcluster.RepoRoot()
		if rerr != nil {
			err = rerr
			return
		}
		crds, rerr := install.ReadCRDs(filepath.Join(root, install.CRDFile))
		if rerr != nil {
			err = rerr
			return
		}
		// Once for the whole binary: not bound to the first caller's test.
		err = install.ApplyCRDs(context.WithoutCancel(t.Context()), clustertest.Get(t).RESTConfig(), crds...)
	})
	if err != nil {
		t.Fatalf("install CRD: %v", err)
	}
}

// Env is one test's namespace with its own operator watching only it, so
// tests can run in parallel on one cluster.
type Env struct {
	T      testing.TB
	NS     string
	Kube   kubernetes.Interface
	Elasti versioned.Interface
	// Opts configure the next StartOperator; tests may edit them first.
	Opts operator.Options
	// Stop stops the most recently started operator.
	Stop func()
	// LastOperator is the most recently started operator.
	LastOperator *operator.Operator
}

// New makes an Env in a fresh namespace with the CRD installed.
func New(t testing.TB) *Env {
	t.Helper()
	InstallCRD(t)
	cfg := clustertest.Get(t).RESTConfig()
	e := &Env{
		T:      t,
		NS:     clustertest.Namespace(t),
		Kube:   kubernetes.NewForConfigOrDie(cfg),
		Elasti: versioned.NewForConfigOrDie(cfg),
	}
	e.Opts = operator.DefaultOptions()
	e.Opts.WatchNamespaces = []string{e.NS}
	e.Opts.ResolverNamespace = e.NS
	e.Opts.ResolverService = ResolverName
	e.Opts.ResolverProxyPort = ResolverProxyPort
	e.Opts.DeletionGrace = 20 * time.Second
	e.Opts.UserAgentSuffix = e.UserAgentSuffix()
	return e
}

// StartOperator runs an operator in-process until the test ends or Stop.
func (e *Env) StartOperator() { e.T.Helper(); e.StartOperatorReturning() }

// StartOperatorReturning is StartOperator, returning the operator. It starts
// it as the binary does without --leader-elect, through operator.Start. The
// operator outlives the test's context: it must still finalize
// ElastiServices during cleanup.
func (e *Env) StartOperatorReturning() *operator.Operator {
	e.T.Helper()
	return e.StartOperatorWith(nil)
}

// StartOperatorWith is StartOperatorReturning, taking part in election as
// the binary does with --leader-elect when election is not nil.
func (e *Env) StartOperatorWith(election *operator.Election) *operator.Operator {
	e.T.Helper()
	logger := klog.Background().WithValues("test", e.T.Name())
	ctx, cancel := context.WithCancel(klog.NewContext(context.WithoutCancel(e.Ctx()), logger))
	op, err := operator.New(ctx, clustertest.Get(e.T).RESTConfig(), e.Opts)
	if err != nil {
		cancel()
		e.T.Fatalf("operator.New: %v", err)
	}
	e.LastOperator = op
	done := make(chan error, 1)
	go func() { done <- op.Start(ctx, election) }()
	var once sync.Once
	e.Stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					e.T.Errorf("operator.Start: %v", err)
				}
			case <-time.After(30 * time.Second):
				e.T.Error("operator did not stop within 30s of cancellation")
			}
		})
	}
	e.T.Cleanup(e.Stop)
	// Runs before the stop above: delete every ElastiService while an
	// operator can still finalize it, so no namespace is left terminating.
	e.T.Cleanup(e.FinalizeAll)
	return op
}

// FinalizeAll deletes every ElastiService and waits until they are gone. It
// runs as a cleanup, when the test's context is already cancelled.
//
// Each ElastiService gets a delete of its own, finalizeWorkers at a time.
// One DeleteCollection for all of them was a single request the apiserver
// works through one object at a time (--delete-collection-workers is 1),
// while the operator's finalization of those already deleted (scaling
// every target back up, deleting their Services and slices) writes beside
// it: 13 s for 200 ElastiServices on a quiet machine, past the 60 s
// request timeout under make test's three lanes. Short requests are each
// retried on their own, and what one deleted stays deleted.
func (e *Env) FinalizeAll() {
	ctx := context.WithoutCancel(e.Ctx())
	client := e.Elasti.ElastiV1alpha1().ElastiServices(e.NS)
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*WaitTimeout, true, func(ctx context.Context) (bool, error) {
		list, err := client.List(ctx, metav1.ListOptions{})
		if err != nil {
			last = err
			e.T.Logf("cleanup: list ElastiServices: %v; trying again", err)
			return false, nil
		}
		var pending []string
		for i := range list.Items {
			if list.Items[i].DeletionTimestamp == nil {
				pending = append(pending, list.Items[i].Name)
			}
		}
		if err := deleteEach(ctx, pending, func(ctx context.Context, name string) error {
			return client.Delete(ctx, name, metav1.DeleteOptions{})
		}); err != nil {
			last = err
			e.T.Logf("cleanup: delete ElastiServices: %v; trying again", err)
			return false, nil
		}
		return len(list.Items) == 0, nil
	})
	if err != nil {
		e.T.Errorf("cleanup: ElastiServices were not all deleted and finalized within %s (last error: %v)", 2*WaitTimeout, last)
	}
}

// finalizeWorkers is how many deletes FinalizeAll has in flight at once.
const finalizeWorkers = 8

// deleteEach calls del for every name, finalizeWorkers at a time, each with
// its own deadline; a name already gone is no error. It returns the first
// error of the round.
func deleteEach(ctx context.Context, names []string, del func(context.Context, string) error) error {
	return Parallel(len(names), finalizeWorkers, func(i int) error {
		reqCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := del(reqCtx, names[i]); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("%s: %w", names[i], err)
		}
		return nil
	})
}

// Parallel runs f(i) for every i in [0,n), at most workers at once, and
// returns the first error any returned; every f runs whatever the others
// return.
func Parallel(n, workers int, f func(i int) error) error {
	var (
		next     atomic.Int64
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return firstErr
}

// Ctx is the test's context, cancelled when the test ends, just before its
// cleanups run: a cleanup that talks to the cluster uses
// context.WithoutCancel(e.Ctx()).
func (e *Env) Ctx() context.Context { return e.T.Context() }

// UserAgentSuffix ends the user agent of this Env's operators, so their
// requests can be told apart in the audit log.
func (e *Env) UserAgentSuffix() string { return "test/" + e.NS }
