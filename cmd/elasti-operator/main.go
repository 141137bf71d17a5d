// Command elasti-operator scales idle HTTP services to zero and wakes them on
// the first request. See README.md for flags and behaviour.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/elasti-dev/elasti/pkg/command"
	"github.com/elasti-dev/elasti/pkg/controller/workloop"
	"github.com/elasti-dev/elasti/pkg/errreport"
	"github.com/elasti-dev/elasti/pkg/operator"
)

// summary is the first line of -h.
const summary = "elasti-operator scales idle HTTP workloads to zero and wakes them on the first request."

func main() { command.Main("elasti-operator", summary, bindFlags, run) }

func run(ctx context.Context, o *options) error {
	logger := klog.FromContext(ctx)
	cfg, err := command.RestConfig(o.kubeconfig)
	if err != nil {
		return err
	}
	op, err := operator.New(ctx, cfg, o.operator)
	if err != nil {
		return err
	}

	// Sentry is on only when SENTRY_DSN is set; errors that exhaust their
	// retries and panics are reported with the object they concern.
	reporter, err := errreport.FromEnv(os.Getenv, "")
	if err != nil {
		return err
	}
	defer reporter.Close(5 * time.Second)
	if reporter.Enabled() {
		logger.Info("Reporting errors to Sentry", "environment", os.Getenv(errreport.EnvEnvironment))
		utilruntime.PanicHandlers = append(utilruntime.PanicHandlers, reporter.PanicHandler())
		op.Controller.OnDrop(func(ctx context.Context, queue, kind, key string, err error) {
			reporter.ReportDropped(ctx, queue, key, err, errreport.ObjectRefFromKey(kind, key))
		})
	}

	registry := op.Metrics.Registry
	op.Metrics.RegisterClientGoMetrics()

	watchdog := leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
	if !disabled(o.healthProbeBindAddress) {
		mux := http.NewServeMux()
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
			if err := watchdog.Check(r); err != nil {
				http.Error(w, "leader election: "+err.Error(), http.StatusInternalServerError)
				return
			}
			fmt.Fprintln(w, "ok")
		})
		mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
			// A follower is not ready, so the operator Service sends scale
			// requests to the leader only.
			switch {
			case !op.Synced():
				http.Error(w, "informer caches are not synced", http.StatusServiceUnavailable)
			case !op.Leading():
				http.Error(w, "not the leader", http.StatusServiceUnavailable)
			default:
				fmt.Fprintln(w, "ok")
			}
		})
		go serve(ctx, "health", o.healthProbeBindAddress, mux)
	}
	if !disabled(o.metricsBindAddress) {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{Registry: registry}))
		go serve(ctx, "metrics", o.metricsBindAddress, mux)
	}

	if !disabled(o.scaleServerBindAddress) {
		go serve(ctx, "scale", o.scaleServerBindAddress, op.ScaleServer.Handler())
	}

	// Followers keep their caches warm so failover is quick. Informers stop
	// only when their context ends, so end it before waiting for them.
	informerCtx, stopInformers := context.WithCancel(ctx)
	defer func() { stopInformers(); op.ShutdownInformers() }()
	op.StartInformers(informerCtx)

	if !o.leaderElect {
		return op.RunLeader(ctx)
	}

	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	identity := host + "_" + string(uuid.NewUUID())
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: o.leaderElectNamespace, Name: o.leaderElectName},
		Client:     kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
	}

	// The election has its own context so that on shutdown the workers drain
	// first and the Lease is released only afterwards: a new leader never
	// overlaps with our last syncs.
	electionCtx, cancelElection := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelElection()
	workersDone := make(chan struct{})
	var lost atomic.Bool
	go func() {
		<-ctx.Done()
		if op.Leading() {
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
	logger.Info("Waiting for leadership", "lease", o.leaderElectNamespace+"/"+o.leaderElectName, "identity", identity)
	leaderelection.RunOrDie(electionCtx, leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   o.leaseDuration,
		RenewDeadline:   o.renewDeadline,
		RetryPeriod:     o.retryPeriod,
		ReleaseOnCancel: true,
		WatchDog:        watchdog,
		Name:            "elasti-operator",
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leaderCtx context.Context) {
				defer close(workersDone)
				workCtx, cancel := context.WithCancel(leaderCtx)
				defer cancel()
				stopOnSignal := context.AfterFunc(ctx, cancel)
				defer stopOnSignal()
				logger.Info("Became leader", "identity", identity)
				if err := op.RunLeader(workCtx); err != nil {
					logger.Error(err, "Controller stopped")
				}
			},
			OnStoppedLeading: func() {
				if ctx.Err() == nil {
					lost.Store(true)
				}
			},
		},
	})
	if lost.Load() {
		// Another replica may already act; exit so this one restarts clean.
		return errors.New("lost leadership")
	}
	return nil
}

// serve serves h on addr until ctx ends; it logs the address it bound
// (the real port for ":0"), and exits the process if it cannot serve.
func serve(ctx context.Context, name, addr string, h http.Handler) {
	logger := klog.FromContext(ctx).WithValues("server", name)
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		logger.Error(err, "Server failed", "address", addr)
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	logger = logger.WithValues("address", ln.Addr().String())
	go func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}()
	logger.Info("Serving")
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		logger.Error(err, "Server failed")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
}
