// Command elasti-resolver holds requests for services scaled to zero, asks
// the operator to wake them, and forwards each request to a Ready pod as
// soon as there is one.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/elasti-dev/elasti/pkg/command"
	versioned "github.com/elasti-dev/elasti/pkg/generated/clientset/versioned"
	elastiinformers "github.com/elasti-dev/elasti/pkg/generated/informers/externalversions"
	"github.com/elasti-dev/elasti/pkg/resolver"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
	"github.com/elasti-dev/elasti/pkg/resolver/identify"
	"github.com/elasti-dev/elasti/pkg/resolver/proberules"
)

// summary is the first line of -h.
const summary = "elasti-resolver holds requests for Services scaled to zero, has the operator wake them, and forwards the requests once a pod is Ready."

func main() { command.Main("elasti-resolver", summary, bindFlags, run) }

func run(ctx context.Context, o *options) error {
	logger := klog.FromContext(ctx)
	if o.wakeTokenFile != "" {
		logger.Info("Wake requests carry the wake token", "file", o.wakeTokenFile)
	}
	cfg, err := command.RestConfig(o.kubeconfig)
	if err != nil {
		return err
	}
	registry := prometheus.NewRegistry()
	registry.MustRegister(command.RuntimeCollectors()...)
	registry.MustRegister(command.BuildInfo("elasti-resolver"))
	// The data plane and the informers outlive ctx: after the signal they
	// keep serving through the drain, and are stopped by drain and the
	// defers. Derived from ctx, they would stop at the signal and held
	// requests would be answered 503 before /readyz had failed.
	bg := context.WithoutCancel(ctx)
	dp, err := newDataPlane(bg, cfg, o, registry)
	if err != nil {
		return err
	}
	defer dp.resolver.Close()
	defer dp.stop()

	var draining atomic.Bool
	internal := http.NewServeMux()
	internal.HandleFunc("/healthz", dp.resolver.Healthz)
	internal.HandleFunc("/readyz", readyzUnlessDraining(&draining, dp.resolver.Readyz(dp.routes, dp.ports)))
	internal.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{Registry: registry}))
	// The route table names Services of every namespace: it is served
	// with the metrics, on the port a NetworkPolicy can keep to the
	// cluster's own components, not on a port every client reaches.
	internal.HandleFunc("/routes", identify.RoutesHandler(dp.routes, dp.ports))
	proxy := dp.resolver.NewServer(o.proxyBindAddress)
	servers := []*http.Server{
		proxy,
		command.Server(o.internalBindAddress, internal, command.WriteTimeout),
		// The per-port-routing port only declares per-port routing to the
		// operator (through the EndpointSlices of the resolver Service);
		// it serves nothing.
		command.Server(o.routesBindAddress, http.NotFoundHandler(), command.WriteTimeout),
	}
	// The proxy port's connections count against --max-connections with
	// the resolver ports'; 8013 and 8014 serve the cluster's own
	// components and have bounds of their own (command.Server,
	// command.Limit).
	limits := map[*http.Server]func(net.Listener) net.Listener{proxy: dp.resolver.LimitListener,
		servers[1]: command.Limit, servers[2]: command.Limit}
	errs, err := serveAll(logger, servers, limits)
	if err != nil {
		return err
	}
	select {
	case err := <-errs:
		return err
	case <-ctx.Done():
	}
	shutdown := []shutdowner{dp.ports}
	for _, srv := range servers {
		shutdown = append(shutdown, srv)
	}
	drain(logger, &draining, o.shutdownGrace, dp.resolver.Close, shutdownTimeout, shutdown...)
	return nil
}

// dataPlane is the resolver with the informer-fed sources it reads and
// its per-port listeners, running.
type dataPlane struct {
	resolver *resolver.Resolver
	routes   *identify.RouteTable
	ports    *identify.PortListeners
	// stop ends the informers and the port listeners' sync loop.
	stop func()
}

// newDataPlane builds the resolver on shared informers and starts them.
// ctx bounds nothing: stop does.
func newDataPlane(ctx context.Context, cfg *rest.Config, o *options, registry prometheus.Registerer) (*dataPlane, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = float32(o.kubeAPIQPS), o.kubeAPIBurst
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	// Direct probing's pod reads have a client, and so a rate limit, of
	// their own: an informer's relist never delays a held request's read.
	podReads, err := kubernetes.NewForConfig(rest.CopyConfig(cfg))
	if err != nil {
		return nil, err
	}
	elasti, err := versioned.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	bindHost, _, err := net.SplitHostPort(o.proxyBindAddress)
	if err != nil {
		return nil, fmt.Errorf("--proxy-bind-address=%q: %w", o.proxyBindAddress, err)
	}
	kubeFactory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(clusterview.TrimForCache))
	budget := clusterview.NewSpecBudget(o.resolver.NamespaceBudget, o.resolver.WatchNamespaces)
	elastiFactory := elastiinformers.NewSharedInformerFactoryWithOptions(elasti, 0, elastiinformers.WithTransform(budget.Transform))
	elastiServices := elastiFactory.Elasti().V1alpha1().ElastiServices()
	if err := budget.Watch(elastiServices); err != nil {
		return nil, err
	}
	named, err := clusterview.NewNamedIndex(elastiServices)
	if err != nil {
		return nil, err
	}
	endpoints, err := clusterview.NewInformerEndpoints(ctx, kubeFactory.Core().V1().Services(), kubeFactory.Discovery().V1().EndpointSlices(), named, o.resolver.FrontDrain)
	if err != nil {
		return nil, err
	}
	probes, err := proberules.NewIndex(ctx, elastiServices)
	if err != nil {
		return nil, err
	}
	routes, err := identify.NewInformerRouteTable(ctx, elastiServices, o.resolver.PortRange)
	if err != nil {
		return nil, err
	}
	viewCtx, stopViews := context.WithCancel(ctx)
	podView, err := clusterview.NewInformerPodView(viewCtx, kubeFactory.Core().V1().Services().Lister(), podListWatch(podReads), podGetter{podReads}, registry)
	if err != nil {
		stopViews()
		return nil, err
	}
	r, err := resolver.New(ctx, o.resolver, resolver.Options{
		Endpoints: endpoints, Probes: probes, Named: named, Waiting: named, Pages: named, Holds: named, Registerer: registry, WakeToken: o.wakeToken,
		Pods: podGetter{podReads}, PodView: podView,
	})
	if err != nil {
		stopViews()
		return nil, err
	}
	ports := r.NewPortListeners(routes, identify.PortListenersOptions{Host: bindHost})

	informerCtx, stopInformers := context.WithCancel(ctx)
	kubeFactory.Start(informerCtx.Done())
	elastiFactory.Start(informerCtx.Done())
	go ports.Run(informerCtx)
	return &dataPlane{resolver: r, routes: routes, ports: ports, stop: func() {
		stopViews()
		podView.Close()
		stopInformers()
		kubeFactory.Shutdown()
		elastiFactory.Shutdown()
	}}, nil
}

// serveAll listens on every server's address and serves in the
// background, through limits[srv] when it is set; serve errors arrive on
// errs. On a listen error the servers already started are closed.
func serveAll(logger klog.Logger, servers []*http.Server, limits map[*http.Server]func(net.Listener) net.Listener) (<-chan error, error) {
	errs := make(chan error, len(servers))
	for i, srv := range servers {
		ln, err := net.Listen("tcp", srv.Addr)
		if err != nil {
			for _, started := range servers[:i] {
				_ = started.Close()
			}
			return nil, fmt.Errorf("listen on %s: %w", srv.Addr, err)
		}
		// The bound address, with the real port when srv.Addr asks for :0.
		logger.Info("Serving", "address", ln.Addr().String())
		if limit := limits[srv]; limit != nil {
			ln = limit(ln)
		}
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errs <- fmt.Errorf("serve on %s: %w", ln.Addr(), err)
			}
		}()
	}
	return errs, nil
}

// shutdowner is a server that stops gracefully within a context.
type shutdowner interface {
	Shutdown(ctx context.Context) error
}

// shutdownTimeout bounds the servers' Shutdown after the grace period,
// held requests included. With the default --shutdown-grace the whole
// drain fits in Kubernetes' default terminationGracePeriodSeconds of 30.
const shutdownTimeout = 20 * time.Second

// readyzUnlessDraining answers 503 once draining is set, next otherwise.
func readyzUnlessDraining(draining *atomic.Bool, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		if draining.Load() {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		next(w, req)
	}
}

// drainAnswer is what the drain keeps of its timeout, after the requests
// still held have waited, to answer them 503 before the servers stop.
// They wait for their targets for the rest (18 s of the 20 s
// shutdownTimeout): a target that is starting when a rollout or a drain
// replaces this pod (helm upgrade) answers them itself. A wake slower
// than that under load is not rare: the soak of 3 December 2026 deleted
// a resolver pod 0.5 s into a wake of 120 Services whose pods were Ready
// 10 to 18 s later, and the two requests it still held when it answered
// them after the 10 s it then waited got 503. A client that does not
// retry on a 503 (most do not) gets its answer instead; one that does is
// still held again by another resolver pod.
const drainAnswer = 2 * time.Second

// drain stops the resolver in an order that loses no request silently:
//
//  1. /readyz starts failing (draining is set), so the pod leaves the
//     Service endpoints and the proxy-mode EndpointSlices;
//  2. for grace, traffic still in flight towards the pod is served as usual
//     while the endpoint removal propagates;
//  3. the servers stop accepting and are given timeout to finish the
//     requests in flight. Held requests keep waiting for their targets
//     meanwhile: one held here when a rollout replaced this pod (helm
//     upgrade) is still answered by the target's pod once it is ready,
//     not sent back to the client to retry elsewhere;
//  4. drainAnswer before timeout ends (at half of it, when timeout is
//     short), closeResolver answers 503 (with Retry-After) to the
//     requests still held, which the servers then finish.
func drain(logger klog.Logger, draining *atomic.Bool, grace time.Duration, closeResolver func(), timeout time.Duration, servers ...shutdowner) {
	draining.Store(true)
	logger.Info("Shutting down: readiness now fails", "grace", grace)
	time.Sleep(grace)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var closeOnce sync.Once
	closeHolds := func() { closeOnce.Do(closeResolver) }
	hold := max(timeout-drainAnswer, timeout/2)
	answerHeld := time.AfterFunc(hold, func() {
		logger.Info("Answering the requests still held: the resolver stops")
		closeHolds()
	})
	defer answerHeld.Stop()
	logger.Info("Not accepting connections; held requests keep waiting for their targets", "for", hold)
	var wg sync.WaitGroup
	for _, srv := range servers {
		wg.Go(func() {
			if err := srv.Shutdown(ctx); err != nil {
				logger.Error(err, "Shutting down a server")
			}
		})
	}
	wg.Wait()
	closeHolds()
}

// podListWatch lists and watches, for the pod view, the pods of one
// namespace that one selector selects: the apiserver filters them, so
// only a held Service's pods are sent. It shares direct probing's client
// and its rate limit, apart from the informers'.
func podListWatch(kube kubernetes.Interface) clusterview.PodListWatch {
	return func(namespace, selector string) cache.ListerWatcherWithContext {
		return cache.NewFilteredListWatchFromClient(kube.CoreV1().RESTClient(), "pods", namespace, func(o *metav1.ListOptions) {
			o.LabelSelector = selector
		})
	}
}

// podGetter reads one pod from the apiserver, for direct probing and to
// vouch for an address the pod view cannot: a GET per pod, no informer,
// which would cache every pod of the cluster.
type podGetter struct{ kube kubernetes.Interface }

func (g podGetter) Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	return g.kube.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
}
