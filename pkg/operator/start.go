package operator

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/elasti-dev/elasti/pkg/workloop"
)

// Election makes Start take part in leader election: only the replica
// holding the Lease runs the leader's work.
type Election struct {
	// Lock is the Lease the replicas contend for (see NewLeaseLock).
	Lock *resourcelock.LeaseLock
	// LeaseDuration, RenewDeadline and RetryPeriod are leaderelection's.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// WatchDog, when set, fails its health check if the election stalls.
	WatchDog *leaderelection.HealthzAdaptor
}

// config is the election of e, under name, with callbacks. The Lease is
// released on cancel, so a clean exit hands it over at once.
func (e *Election) config(name string, callbacks leaderelection.LeaderCallbacks) leaderelection.LeaderElectionConfig {
	return leaderelection.LeaderElectionConfig{
		Lock:            e.Lock,
		LeaseDuration:   e.LeaseDuration,
		RenewDeadline:   e.RenewDeadline,
		RetryPeriod:     e.RetryPeriod,
		ReleaseOnCancel: true,
		WatchDog:        e.WatchDog,
		Name:            name,
		Callbacks:       callbacks,
	}
}

// NewLeaseLock returns the Lease namespace/name, held under an identity
// unique to this process. It has a client of its own, so that renewing the
// Lease never waits behind the operator's rate-limited writes, and each of
// its requests ends after requestTimeout (give it the renew deadline, as
// kube-controller-manager does): the client may share the operator's
// HTTP/2 connection to the apiserver, and a request stuck on it must fail
// in time for the next try rather than outlive the Lease.
func NewLeaseLock(cfg *rest.Config, namespace, name string, requestTimeout time.Duration) (*resourcelock.LeaseLock, error) {
	leaseCfg := rest.AddUserAgent(rest.CopyConfig(cfg), "leader-election")
	leaseCfg.Timeout = requestTimeout
	kube, err := kubernetes.NewForConfig(leaseCfg)
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	return &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: namespace, Name: name},
		Client:     kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: host + "_" + string(uuid.NewUUID())},
	}, nil
}

// Start runs the operator until ctx ends; the binary and the tests start it
// this way. It starts every informer (followers run them too, so failover
// is quick) and runs the leader's work at once when election is nil, or
// whenever this replica holds the Lease. It returns once everything has
// stopped, with an error if leadership was lost while ctx was still live.
func (o *Operator) Start(ctx context.Context, election *Election) error {
	// Informers stop only when their context ends, so end it before
	// waiting for them.
	informerCtx, stopInformers := context.WithCancel(ctx)
	defer func() { stopInformers(); o.shutdownInformers() }()
	o.startInformers(informerCtx)
	if election == nil {
		return o.runLeader(ctx)
	}
	return o.runElected(ctx, election)
}

// runElected runs the leader's work while this replica holds the Lease. The
// election has its own context so that on shutdown the workers drain first
// and the Lease is released only afterwards: a new leader never overlaps
// with our last syncs.
func (o *Operator) runElected(ctx context.Context, e *Election) error {
	logger := klog.FromContext(ctx)
	identity := e.Lock.Identity()
	electionCtx, cancelElection := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelElection()
	workersDone := make(chan struct{})
	var lost atomic.Bool
	go func() {
		<-ctx.Done()
		if o.Leading() {
			select {
			case <-workersDone:
			case <-time.After(workloop.SyncTimeout):
				// Syncs are bounded by SyncTimeout, so this only fires if one
				// is stuck; the lease is still renewed while we wait.
				logger.Info("Workers did not finish in time; releasing the lease anyway")
			}
		}
		cancelElection()
	}()
	logger.Info("Waiting for leadership", "lease", e.Lock.LeaseMeta.Namespace+"/"+e.Lock.LeaseMeta.Name, "identity", identity)
	leaderelection.RunOrDie(electionCtx, e.config("elasti-operator", leaderelection.LeaderCallbacks{
		OnStartedLeading: func(leaderCtx context.Context) {
			defer close(workersDone)
			workCtx, cancel := context.WithCancel(leaderCtx)
			defer cancel()
			stopOnSignal := context.AfterFunc(ctx, cancel)
			defer stopOnSignal()
			logger.Info("Became leader", "identity", identity)
			if err := o.runLeader(workCtx); err != nil {
				logger.Error(err, "Controller stopped")
			}
		},
		OnStoppedLeading: func() {
			if ctx.Err() == nil {
				lost.Store(true)
			}
		},
	}))
	if lost.Load() {
		// Another replica may already act; exit so this one restarts clean.
		return errors.New("lost leadership")
	}
	return nil
}
