// Package operator assembles the elasti operator: clients, the shared
// informers, the CRD directory and the controller.
package operator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/controller"
	"github.com/elasti-dev/elasti/pkg/directory"
	versioned "github.com/elasti-dev/elasti/pkg/generated/clientset/versioned"
	"github.com/elasti-dev/elasti/pkg/idle"
	"github.com/elasti-dev/elasti/pkg/metrics"
	"github.com/elasti-dev/elasti/pkg/names"
	"github.com/elasti-dev/elasti/pkg/nsbudget"
	"github.com/elasti-dev/elasti/pkg/nsinformer"
	"github.com/elasti-dev/elasti/pkg/portalloc"
	"github.com/elasti-dev/elasti/pkg/scaletarget"
	"github.com/elasti-dev/elasti/pkg/triggers"
	"github.com/elasti-dev/elasti/pkg/wakeserver"
)

// Options configure the operator. Defaults suit thousands of ElastiServices.
type Options struct {
	// WatchNamespaces scopes every informer to these namespaces, one
	// informer each (see watched); empty means all namespaces.
	WatchNamespaces []string
	// Resolver location (KubeElasti: ELASTI_RESOLVER_*).
	ResolverNamespace string
	ResolverService   string
	ResolverProxyPort int32
	// ResolverPortRange is where every fronted Service port's own resolver
	// port comes from (see pkg/portalloc for the default's reasoning).
	ResolverPortRange portalloc.Range
	// ResolverPortQuota bounds the resolver ports of one ElastiService and
	// of one namespace (see portalloc.DefaultQuota); zero is unbounded.
	ResolverPortQuota portalloc.Quota
	// API client rate limits.
	QPS   float32
	Burst int
	// Workers per queue.
	ElastiServiceWorkers int
	TargetWorkers        int
	EndpointSliceWorkers int
	// DeletionGrace bounds how long a deleted ElastiService waits for its
	// restored target before the resolver stops fronting it.
	DeletionGrace time.Duration
	// ResyncPeriod re-syncs every ElastiService periodically to repair drift
	// no event reports.
	ResyncPeriod time.Duration
	// OnDrop, which may be nil, is told of every key the controller's
	// queues give up on (cmd/elasti-operator reports them to Sentry). Not
	// a flag.
	OnDrop controller.DropHandler

	// PollingInterval is how often idle triggers are evaluated
	// (KubeElasti: POLLING_INTERVAL).
	PollingInterval time.Duration
	// PollParallelism bounds concurrent trigger evaluations.
	PollParallelism int
	// QueryTimeout bounds each Prometheus query.
	QueryTimeout time.Duration
	// Prometheus defaults for trigger metadata (KubeElasti:
	// PROMETHEUS_TRIGGER_SERVER_ADDRESS, PROMETHEUS_TRIGGER_AUTHORIZATION_HEADER).
	PrometheusServerAddress       string
	PrometheusAuthorizationHeader string
	// PrometheusAllowedServers, when not empty, are the only servers
	// besides PrometheusServerAddress that triggers may query
	// (--prometheus-allowed-servers); empty allows any, as KubeElasti.
	PrometheusAllowedServers []triggers.ServerPrefix
	// PrometheusTenantHeaders are the tenant and identity headers triggers
	// may send to the default server (--prometheus-tenant-headers-allowed).
	PrometheusTenantHeaders triggers.TenantHeaders
	// WakeTimeout bounds one scale-from-zero call.
	WakeTimeout time.Duration
	// WakeSettleWindow is how long after a wake further requests for the
	// same Service are answered without looking again (see wakeserver).
	WakeSettleWindow time.Duration
	// WakeTokens, when set, is the wake token the scale endpoint requires
	// (see pkg/waketoken); nil requires none, as KubeElasti's operator.
	WakeTokens wakeserver.TokenVerifier
	// UserAgentSuffix is appended to the operator's user agent, so the
	// apiserver's audit log can tell operator instances apart.
	UserAgentSuffix string
	// NamespaceBudget bounds the ElastiServices of one namespace the
	// operator serves (pkg/nsbudget); the resolver's must be the same.
	NamespaceBudget nsbudget.Limits
}

// DefaultOptions returns KubeElasti's defaults for the resolver and limits
// sized for large fleets.
func DefaultOptions() Options {
	return Options{
		ResolverNamespace:    "elasti",
		ResolverService:      "elasti-resolver-service",
		ResolverProxyPort:    portalloc.DefaultProxyPort,
		ResolverPortRange:    portalloc.DefaultRange,
		ResolverPortQuota:    portalloc.DefaultQuota,
		QPS:                  1000,
		Burst:                2000,
		ElastiServiceWorkers: 64,
		TargetWorkers:        4,
		EndpointSliceWorkers: 4,
		DeletionGrace:        2 * time.Minute,
		ResyncPeriod:         10 * time.Minute,
		PollingInterval:      30 * time.Second,
		PollParallelism:      16,
		QueryTimeout:         5 * time.Second,
		WakeTimeout:          10 * time.Second,
		WakeSettleWindow:     5 * time.Second,
		NamespaceBudget:      nsbudget.Defaults(),
	}
}

// Validate reports the first unusable option.
func (o Options) Validate() error {
	if err := nsinformer.ValidateList(o.WatchNamespaces); err != nil {
		return err
	}
	switch {
	case o.ResolverNamespace == "":
		return fmt.Errorf("resolver namespace must be set (--resolver-namespace or ELASTI_RESOLVER_NAMESPACE)")
	case o.ResolverService == "":
		return fmt.Errorf("resolver service must be set (--resolver-service or ELASTI_RESOLVER_SERVICE_NAME)")
	case !portalloc.IsPort(o.ResolverProxyPort):
		return fmt.Errorf("resolver proxy port %d is not a TCP port (1-65535)", o.ResolverProxyPort)
	}
	if err := o.ResolverPortRange.ValidateForResolver(o.ResolverProxyPort); err != nil {
		return fmt.Errorf("%w (--resolver-port-range)", err)
	}
	switch {
	case o.ResolverPortQuota.PerOwner < 0 || o.ResolverPortQuota.PerNamespace < 0:
		return fmt.Errorf("resolver port quotas (--resolver-ports-per-elastiservice %d, --resolver-ports-per-namespace %d) must not be negative",
			o.ResolverPortQuota.PerOwner, o.ResolverPortQuota.PerNamespace)
	case o.QPS <= 0 || o.Burst < 1:
		return fmt.Errorf("client QPS (%v) and burst (%d) must be positive", o.QPS, o.Burst)
	case o.ElastiServiceWorkers < 1 || o.TargetWorkers < 1 || o.EndpointSliceWorkers < 1:
		return fmt.Errorf("every queue needs at least one worker")
	case o.DeletionGrace < 0:
		return fmt.Errorf("deletion grace must not be negative")
	case o.PollingInterval <= 0:
		return fmt.Errorf("polling interval must be positive (--polling-interval or POLLING_INTERVAL)")
	case o.PollParallelism < 1:
		return fmt.Errorf("poll parallelism must be at least 1")
	case o.QueryTimeout <= 0 || o.WakeTimeout <= 0:
		return fmt.Errorf("query and scale timeouts must be positive")
	}
	return nil
}

// Operator is an assembled, not yet running operator.
type Operator struct {
	Directory  *directory.Directory
	Controller *controller.Controller
	Scaler     *scaletarget.Scaler
	Kube       kubernetes.Interface
	Elasti     versioned.Interface
	// WakeServer answers the resolver's scale-from-zero requests; it acts
	// only while Ready.
	WakeServer *wakeserver.Server
	// Poller scales idle targets to zero; it runs only on the leader.
	Poller *idle.Poller
	// Wakes records every scale-up from zero, where each cooldown starts.
	Wakes *idle.Wakes
	// Metrics is the operator's own registry, served on /metrics.
	Metrics *metrics.Operator

	leading atomic.Bool

	watched         *watched
	resolverFactory informers.SharedInformerFactory
	rollouts        *scaletarget.RolloutInformer
}

// New builds the operator against cfg. Nothing runs until Start.
func New(ctx context.Context, cfg *rest.Config, opts Options) (*Operator, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = opts.QPS, opts.Burst
	cfg.UserAgent = strings.TrimSpace(rest.DefaultKubernetesUserAgent() + " " + controller.AgentName + " " + opts.UserAgentSuffix)
	kube, err := kubernetes.NewForConfig(protobuf(cfg))
	if err != nil {
		return nil, err
	}
	elasti, err := versioned.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	apiext, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}

	o := &Operator{Directory: directory.New(opts.NamespaceBudget), Kube: kube, Elasti: elasti, Metrics: metrics.NewOperator()}
	o.Wakes = idle.NewWakes(ctx, idle.StatusPatcher{Client: elasti}, opts.WakeTimeout)
	o.newInformerFactories(opts)
	if err := o.newController(ctx, cfg, dyn, apiext, opts); err != nil {
		return nil, err
	}
	o.WakeServer = wakeserver.New(ctx, o.Directory, o.Scaler, o.Wakes, o.Ready, o.Metrics,
		wakeserver.Config{WakeTimeout: opts.WakeTimeout, SettleWindow: opts.WakeSettleWindow, Tokens: opts.WakeTokens})
	o.Poller = idle.New(o.watched.elastiServices().Lister(), o.Scaler, o.Controller, o.Wakes,
		o.Controller.Recorder(), o.Metrics, idle.ConditionWriter{Client: elasti, FieldManager: controller.AgentName}, idle.Config{
			Interval:     opts.PollingInterval,
			Parallelism:  opts.PollParallelism,
			QueryTimeout: opts.QueryTimeout,
			Defaults: triggers.Defaults{
				ServerAddress:       opts.PrometheusServerAddress,
				AuthorizationHeader: opts.PrometheusAuthorizationHeader,
				AllowedServers:      opts.PrometheusAllowedServers,
				TenantHeaders:       opts.PrometheusTenantHeaders,
			},
		})
	o.Metrics.RegisterResolverPorts(o.Controller.ResolverPorts)
	esLister := o.watched.elastiServices().Lister()
	o.Metrics.RegisterSleepTotals(func() ([]*elastiv1alpha1.ElastiService, error) { return esLister.List(labels.Everything()) }, o.Leading)
	o.Metrics.RegisterNotReady(func() ([]*elastiv1alpha1.ElastiService, error) { return esLister.List(labels.Everything()) }, o.Leading)
	return o, nil
}

// newInformerFactories makes the shared informer factories, scoped to
// --watch-namespace.
func (o *Operator) newInformerFactories(opts Options) {
	o.watched = newWatched(o.Kube, o.Elasti, opts, o.budgetThenTrim)
	// The resolver's slices may live outside --watch-namespace; one more
	// narrow watch covers them.
	o.resolverFactory = informers.NewSharedInformerFactoryWithOptions(o.Kube, 0,
		informers.WithNamespace(opts.ResolverNamespace), informers.WithTransform(keepForCache),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.LabelSelector = labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: opts.ResolverService}).String()
		}))
}

// budgetThenTrim weighs an ElastiService against its namespace's budget
// as the apiserver sent it, as the resolver does, before trimForCache.
func (o *Operator) budgetThenTrim(obj any) (any, error) {
	if es, ok := obj.(*elastiv1alpha1.ElastiService); ok {
		o.Directory.Budget().Observe(es)
	}
	return trimForCache(obj)
}

// newController makes the scaler, the Rollout informer and the controller
// on the informer factories, and the controller's own events client.
func (o *Operator) newController(ctx context.Context, cfg *rest.Config, dyn dynamic.Interface, apiext apiextensionsclient.Interface, opts Options) error {
	deployments := o.watched.deployments()
	statefulSets := o.watched.statefulSets()
	o.rollouts = scaletarget.NewRolloutInformer(dyn, apiext, opts.WatchNamespaces)
	// The HPAs spec.autoscaler names (type hpa): one shared watch, scoped
	// like the others, read only, and only in an ElastiService's own
	// namespace (scaletarget.GoalFor).
	hpas := o.watched.horizontalPodAutoscalers()
	o.Scaler = scaletarget.NewScaler(o.Kube, dyn, deployments.Informer().GetIndexer(), statefulSets.Informer().GetIndexer(), o.rollouts, hpas.Lister())

	eventsCfg := protobuf(cfg)
	eventsCfg.QPS, eventsCfg.Burst = 50, 100
	events, err := kubernetes.NewForConfig(eventsCfg)
	if err != nil {
		return err
	}
	ctrl, err := controller.New(ctx, o.Kube, o.Elasti, o.Scaler, o.Directory, controller.Informers{
		ElastiServices: o.watched.elastiServices(),
		Services:       o.watched.services(),
		EndpointSlices: o.watched.endpointSlices(),
		ResolverSlices: o.resolverFactory.Discovery().V1().EndpointSlices(),
		Deployments:    deployments,
		StatefulSets:   statefulSets,
		Rollouts:       o.rollouts,

		HorizontalPodAutoscalers: hpas,
	}, controller.Config{
		ResolverNamespace:    opts.ResolverNamespace,
		ResolverService:      opts.ResolverService,
		ResolverProxyPort:    opts.ResolverProxyPort,
		ResolverPortRange:    opts.ResolverPortRange,
		ResolverPortQuota:    opts.ResolverPortQuota,
		ElastiServiceWorkers: opts.ElastiServiceWorkers,
		TargetWorkers:        opts.TargetWorkers,
		EndpointSliceWorkers: opts.EndpointSliceWorkers,
		DeletionGrace:        opts.DeletionGrace,
	}, o.Metrics, o.Wakes, controller.Options{QueueMetrics: o.Metrics.Queues, EventClient: events, OnDrop: opts.OnDrop})
	o.Controller = ctrl
	return err
}

// Synced reports whether every informer cache has synced.
func (o *Operator) Synced() bool {
	for _, synced := range o.Controller.CacheSynced() {
		if !synced() {
			return false
		}
	}
	return true
}

// Ready reports whether this replica may act: it leads and its caches are
// synced. Followers answer scale requests with 503.
func (o *Operator) Ready() bool { return o.leading.Load() && o.Synced() }

// Leading reports whether runLeader is running.
func (o *Operator) Leading() bool { return o.leading.Load() }

// runLeader runs everything that acts on the cluster: the controller's
// workers and the idle poller. It blocks until ctx ends and both stopped.
func (o *Operator) runLeader(ctx context.Context) error {
	// Stop answering scale requests the moment leadership or the process
	// ends, not after the workers have drained.
	stopLeading := context.AfterFunc(ctx, func() { o.leading.Store(false) })
	defer stopLeading()
	defer o.leading.Store(false)
	if !cache.WaitForCacheSync(ctx.Done(), o.Controller.CacheSynced()...) {
		return fmt.Errorf("caches did not sync before shutdown")
	}
	// A new leader knows every Service before it answers, so a wake during
	// failover is never a 404 for a Service the workers have not reached.
	o.Controller.PrimeDirectory(ctx)
	// Likewise every recorded resolver port is held again before any sync
	// can hand one out.
	o.Controller.SeedResolverPorts(ctx)
	o.leading.Store(ctx.Err() == nil)
	var pollerDone sync.WaitGroup
	pollerDone.Go(func() { o.Poller.Run(ctx) })
	err := o.Controller.Run(ctx)
	pollerDone.Wait()
	o.Wakes.Wait()
	return err
}

// startInformers starts every watch. Followers run them too, so a new
// leader starts with warm caches.
func (o *Operator) startInformers(ctx context.Context) {
	o.watched.start(ctx.Done())
	o.resolverFactory.Start(ctx.Done())
	go o.rollouts.Run(ctx)
}

// shutdownInformers waits for the informers' goroutines after ctx ends.
func (o *Operator) shutdownInformers() {
	o.watched.shutdown()
	o.resolverFactory.Shutdown()
}

// protobuf makes a client speak protobuf to the apiserver, as the
// controller-manager does: for built-in types it costs the apiserver far less
// CPU than JSON, which matters when thousands of objects are listed, watched
// and written. Custom resources only speak JSON, so their clients keep cfg.
func protobuf(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.ContentType = runtime.ContentTypeProtobuf
	c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return c
}

// trimForCache drops what the operator never reads before objects enter the
// informer caches, so memory stays flat with thousands of workloads. A new
// reader of a field dropped here must keep it.
//
//   - Objects the operator updates whole from a cached copy (private
//     Services, resolver slices: recognised by name, elasti's managed-by
//     label or an ElastiService owner, so an older elasti's or KubeElasti's
//     too) lose only managedFields, so an update never drops what users put
//     there. A resolver slice's endpoints, which its update replaces, keep
//     only what sameEndpoints compares.
//   - Deployments and StatefulSets become a scaletarget.Cached (the typed
//     object is over 1 KiB even empty): their typed listers must not be used.
//   - Other Services keep identity, type, selector and ports; other slices keep
//     identity, the service-name and managed-by labels, addressType and each
//     endpoint's addresses, conditions and targetRef.
//   - HorizontalPodAutoscalers keep identity, the target reference and
//     the replica bounds (scaletarget.CacheHPA); their status, rewritten
//     at every HPA pass, is dropped.
//   - ElastiServices lose annotations (status writes ignore metadata), save
//     the sleep request the idle poller honours (AnnotationSleepRequestedAt),
//     and keep of each trigger's metadata what its parser reads
//     (trimTriggers).
//
// The resolver's own slices have their own informer and keepForCache.
func trimForCache(obj any) (any, error) {
	switch o := obj.(type) {
	case *appsv1.Deployment, *appsv1.StatefulSet:
		return scaletarget.CacheTarget(o), nil
	case *autoscalingv2.HorizontalPodAutoscaler:
		return scaletarget.CacheHPA(o), nil
	case *corev1.Service:
		o.ManagedFields = nil
		if names.IsPrivateService(o.Name) || ownedByElastiService(o.OwnerReferences) {
			return o, nil
		}
		// The type too: an ExternalName Service is refused whatever its
		// selector (validation.FrontableService).
		return &corev1.Service{ObjectMeta: scaletarget.Identity(o.ObjectMeta), Spec: corev1.ServiceSpec{Type: o.Spec.Type, Selector: o.Spec.Selector, Ports: o.Spec.Ports}}, nil
	case *discoveryv1.EndpointSlice:
		o.ManagedFields = nil
		if names.IsResolverSlice(o.Name) || o.Labels[discoveryv1.LabelManagedBy] == controller.ManagedByValue || ownedByElastiService(o.OwnerReferences) {
			// ensureResolverSlice writes endpoints and ports afresh and
			// compares only the endpoints' addresses and conditions.
			for i := range o.Endpoints {
				ep := &o.Endpoints[i]
				*ep = discoveryv1.Endpoint{Addresses: ep.Addresses, Conditions: ep.Conditions}
			}
			return o, nil
		}
		meta := scaletarget.Identity(o.ObjectMeta)
		meta.Labels = keepLabels(o.Labels, discoveryv1.LabelServiceName, discoveryv1.LabelManagedBy)
		for i := range o.Endpoints {
			ep := &o.Endpoints[i]
			ep.Hostname, ep.NodeName, ep.Zone, ep.Hints, ep.DeprecatedTopology = nil, nil, nil, nil, nil
		}
		return &discoveryv1.EndpointSlice{ObjectMeta: meta, AddressType: o.AddressType, Endpoints: o.Endpoints}, nil
	case *elastiv1alpha1.ElastiService:
		o.ManagedFields = nil
		o.Annotations = keepLabels(o.Annotations, elastiv1alpha1.AnnotationSleepRequestedAt)
		trimTriggers(o)
	case metav1.Object:
		o.SetManagedFields(nil)
	}
	return obj, nil
}

// keepForCache drops only managedFields, for caches whose readers need the
// rest.
func keepForCache(obj any) (any, error) {
	if o, ok := obj.(metav1.Object); ok {
		o.SetManagedFields(nil)
	}
	return obj, nil
}

// keepLabels returns labels with only keys, reusing the map when it holds
// nothing else.
func keepLabels(labels map[string]string, keys ...string) map[string]string {
	kept := 0
	for _, k := range keys {
		if _, ok := labels[k]; ok {
			kept++
		}
	}
	if kept == len(labels) {
		return labels
	}
	if kept == 0 {
		return nil
	}
	out := make(map[string]string, kept)
	for _, k := range keys {
		if v, ok := labels[k]; ok {
			out[k] = v
		}
	}
	return out
}

// ownedByElastiService reports whether refs name an ElastiService.
func ownedByElastiService(refs []metav1.OwnerReference) bool {
	return slices.ContainsFunc(refs, elastiv1alpha1.IsElastiServiceRef)
}
