// Command elasti-operator scales idle HTTP services to zero and wakes them on
// the first request. See README.md for flags and behaviour.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/klog/v2"

	"github.com/elasti-dev/elasti/pkg/command"
	"github.com/elasti-dev/elasti/pkg/controller"
	"github.com/elasti-dev/elasti/pkg/errreport"
	"github.com/elasti-dev/elasti/pkg/operator"
)

// summary is the first line of -h.
const summary = "elasti-operator scales idle HTTP workloads to zero and wakes them on the first request."

func main() { command.Main("elasti-operator", summary, bindFlags, run) }

// defaultGCPercent is the operator's GOGC unless the environment sets one.
// Its heap is mostly informer caches, which live as long as the process;
// the garbage is decoded watch events and wake requests, and it comes in
// bursts when a fleet scales down or wakes. At Go's default of 100 such a
// burst grows the heap to twice the caches before a collection; at 50, to
// one and a half (docs/benchmarks.md, "Garbage collection target").
const defaultGCPercent = 50

// setGCPercent applies defaultGCPercent unless GOGC is set to something,
// and returns the percentage in force. An empty GOGC (a template's
// `value: ""`) counts as unset; the runtime reads it as 100.
func setGCPercent(getenv func(string) string) int {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
		return defaultGCPercent
	}
	sample := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(sample)
	return int(sample[0].Value.Uint64())
}

func run(ctx context.Context, o *options) error {
	gcPercent := setGCPercent(os.Getenv)
	klog.FromContext(ctx).V(2).Info("Garbage collection target", "gcPercent", gcPercent)
	cfg, err := command.RestConfig(o.kubeconfig)
	if err != nil {
		return err
	}
	if o.releaseAll {
		op, err := operator.New(ctx, cfg, o.operator)
		if err != nil {
			return err
		}
		return releaseAll(ctx, cfg, o, op)
	}
	reporter, onDrop, err := reportErrors(ctx)
	if err != nil {
		return err
	}
	defer reporter.Close(5 * time.Second)
	opts := o.operator
	opts.OnDrop = onDrop
	op, err := operator.New(ctx, cfg, opts)
	if err != nil {
		return err
	}
	op.Metrics.RegisterClientGoMetrics()
	if o.wakeTokenFile != "" {
		klog.FromContext(ctx).Info("The scale endpoint requires the wake token", "file", o.wakeTokenFile)
	}
	op.Metrics.Registry.MustRegister(command.BuildInfo("elasti-operator"))

	watchdog := leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
	startServers(ctx, o, op, watchdog)
	if !o.leaderElect {
		return op.Start(ctx, nil)
	}
	lock, err := operator.NewLeaseLock(cfg, o.leaderElectNamespace, o.leaderElectName, o.renewDeadline)
	if err != nil {
		return err
	}
	return op.Start(ctx, &operator.Election{
		Lock:          lock,
		LeaseDuration: o.leaseDuration,
		RenewDeadline: o.renewDeadline,
		RetryPeriod:   o.retryPeriod,
		WatchDog:      watchdog,
	})
}

// reportErrors turns Sentry on when SENTRY_DSN is set: panics are
// reported, and errors that exhaust their retries are, with the object
// they concern, through the returned handler (nil when Sentry is off).
func reportErrors(ctx context.Context) (*errreport.Reporter, controller.DropHandler, error) {
	reporter, err := errreport.FromEnv(os.Getenv, "")
	if err != nil || !reporter.Enabled() {
		return reporter, nil, err
	}
	klog.FromContext(ctx).Info("Reporting errors to Sentry", "environment", os.Getenv(errreport.EnvEnvironment))
	utilruntime.PanicHandlers = append(utilruntime.PanicHandlers, reporter.PanicHandler())
	return reporter, func(ctx context.Context, queue string, object controller.DroppedObject, err error) {
		reporter.ReportDropped(ctx, queue, errreport.ObjectRef(object), err)
	}, nil
}

// startServers serves the probes, the metrics and the scale endpoint, each
// unless its address is "0", until ctx ends.
func startServers(ctx context.Context, o *options, op *operator.Operator, watchdog *leaderelection.HealthzAdaptor) {
	if !disabled(o.healthProbeBindAddress) {
		go serve(ctx, "health", o.healthProbeBindAddress, probes(op, watchdog), command.WriteTimeout)
	}
	if !disabled(o.metricsBindAddress) {
		go serve(ctx, "metrics", o.metricsBindAddress, metricsHandler(op.Metrics.Registry, o.profiling), metricsWriteTimeout(o.profiling))
	}
	if !disabled(o.wakeServerBindAddress) {
		// A scale request waits for its scale call, at most --scale-timeout.
		go serve(ctx, "scale", o.wakeServerBindAddress, op.WakeServer.Handler(), o.operator.WakeTimeout+command.WriteTimeout)
	}
}

// profileWriteTimeout is the metrics server's write timeout with
// --profiling on: a CPU profile or trace streams for the seconds asked
// (30 by default), and net/http/pprof refuses a longer one than this.
const profileWriteTimeout = 2 * time.Minute

func metricsWriteTimeout(profiling bool) time.Duration {
	if profiling {
		return profileWriteTimeout
	}
	return command.WriteTimeout
}

// metricsHandler serves /metrics and, with profiling on, Go's runtime
// profiles under /debug/pprof/ (as kube components' --profiling does).
func metricsHandler(registry *prometheus.Registry, profiling bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{Registry: registry}))
	if profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// probes serves /healthz, liveness with the leader-election watchdog, and
// /readyz: caches synced and leader.
func probes(op *operator.Operator, watchdog *leaderelection.HealthzAdaptor) http.Handler {
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
	return mux
}

// serve serves h on addr until ctx ends, its connections capped
// (command.Limit) and its answers bounded by writeTimeout; it logs the
// address it bound (the real port for ":0"), and exits the process if it
// cannot serve.
func serve(ctx context.Context, name, addr string, h http.Handler, writeTimeout time.Duration) {
	logger := klog.FromContext(ctx).WithValues("server", name)
	srv := command.Server(addr, h, writeTimeout)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		logger.Error(err, "Server failed", "address", addr)
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	ln = command.Limit(ln)
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
