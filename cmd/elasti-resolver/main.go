// Command elasti-resolver holds requests for services scaled to zero, asks
// the operator to wake them, and forwards each request to a Ready pod as
// soon as there is one.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/elasti-dev/elasti/pkg/command"
	versioned "github.com/elasti-dev/elasti/pkg/generated/clientset/versioned"
	elastiinformers "github.com/elasti-dev/elasti/pkg/generated/informers/externalversions"
	"github.com/elasti-dev/elasti/pkg/resolver"
)

func main() {
	var opts *options
	command.Main("elasti-resolver", func(fs *flag.FlagSet) func() error {
		var finish func() error
		opts, finish = bindFlags(fs, os.Getenv)
		return finish
	}, func(ctx context.Context) error { return run(ctx, opts) })
}

func run(ctx context.Context, o *options) error {
	logger := klog.FromContext(ctx)
	var cfg *rest.Config
	var err error
	if o.kubeconfig == "" {
		cfg, err = rest.InClusterConfig()
	} else {
		cfg, err = clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	}
	if err != nil {
		return fmt.Errorf("kubernetes client configuration: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	elasti, err := versioned.NewForConfig(cfg)
	if err != nil {
		return err
	}
	kubeFactory := informers.NewSharedInformerFactory(kube, 0)
	elastiFactory := elastiinformers.NewSharedInformerFactory(elasti, 0)
	endpoints, err := resolver.NewInformerEndpoints(ctx, kubeFactory.Core().V1().Services(), kubeFactory.Discovery().V1().EndpointSlices())
	if err != nil {
		return err
	}
	probes, err := resolver.NewProbeIndex(ctx, elastiFactory.Elasti().V1alpha1().ElastiServices())
	if err != nil {
		return err
	}
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	r, err := resolver.New(ctx, o.resolver, resolver.Options{Endpoints: endpoints, Probes: probes, Registerer: registry})
	if err != nil {
		return err
	}
	defer r.Close()

	informerCtx, stopInformers := context.WithCancel(ctx)
	defer func() { stopInformers(); kubeFactory.Shutdown(); elastiFactory.Shutdown() }()
	kubeFactory.Start(informerCtx.Done())
	elastiFactory.Start(informerCtx.Done())

	internal := http.NewServeMux()
	internal.HandleFunc("/healthz", r.Healthz)
	internal.HandleFunc("/readyz", r.Readyz)
	internal.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{Registry: registry}))
	proxy := &http.Server{Addr: o.proxyBindAddress, Handler: r, ReadHeaderTimeout: 30 * time.Second}
	resolver.ConfigureServer(proxy)
	servers := []*http.Server{
		proxy,
		{Addr: o.internalBindAddress, Handler: internal, ReadHeaderTimeout: 10 * time.Second},
	}
	errs := make(chan error, len(servers))
	for _, srv := range servers {
		go func() {
			logger.Info("Serving", "address", srv.Addr)
			if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errs <- fmt.Errorf("listen on %s: %w", srv.Addr, err)
			}
		}()
	}
	select {
	case err := <-errs:
		return err
	case <-ctx.Done():
	}
	// Stop accepting, and give in-flight requests time to finish.
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 25*time.Second)
	defer cancel()
	for _, srv := range servers {
		_ = srv.Shutdown(shutdownCtx)
	}
	return nil
}
