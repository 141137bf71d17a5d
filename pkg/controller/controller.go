package controller

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	autoscalingv2informers "k8s.io/client-go/informers/autoscaling/v2"
	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/directory"
	versioned "github.com/elasti-dev/elasti/pkg/generated/clientset/versioned"
	elastischeme "github.com/elasti-dev/elasti/pkg/generated/clientset/versioned/scheme"
	elastiinformers "github.com/elasti-dev/elasti/pkg/generated/informers/externalversions/elasti/v1alpha1"
	elastilisters "github.com/elasti-dev/elasti/pkg/generated/listers/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/names"
	"github.com/elasti-dev/elasti/pkg/nsbudget"
	"github.com/elasti-dev/elasti/pkg/outcome"
	"github.com/elasti-dev/elasti/pkg/portalloc"
	"github.com/elasti-dev/elasti/pkg/scaletarget"
	"github.com/elasti-dev/elasti/pkg/tombstone"
	"github.com/elasti-dev/elasti/pkg/validation"
	"github.com/elasti-dev/elasti/pkg/workloop"
)

// AgentName is the event source and field manager of the operator.
const AgentName = "elasti-operator"

// Event reasons. Constant, so events group and alert cleanly.
const (
	ReasonSwitchedToProxy     = "SwitchedToProxy"
	ReasonSwitchedToServe     = "SwitchedToServe"
	ReasonServiceNotFound     = "ServiceNotFound"
	ReasonTargetNotFound      = "TargetNotFound"
	ReasonUnsupportedTarget   = "UnsupportedTarget"
	ReasonResolverUnavailable = "ResolverUnavailable"
	ReasonServiceConflict     = "ServiceConflict"
	ReasonInvalidSpec         = "InvalidSpec"
	ReasonReconciled          = "Reconciled"
	ReasonTargetRestored      = "TargetRestored"
	ReasonWaitingForTarget    = "WaitingForTarget"
	ReasonWokenForMove        = "WokenForServiceChange"
	ReasonFinalized           = "Finalized"
	ReasonSyncFailed          = "SyncFailed"
	// ReasonResolverPortRangeExhausted is also the reason of the
	// ResolverPortsAssigned condition it goes with.
	ReasonResolverPortRangeExhausted = elastiv1alpha1.ReasonResolverPortRangeExhausted
	ReasonResolverPortQuotaExceeded  = elastiv1alpha1.ReasonResolverPortQuotaExceeded

	// ReasonServiceHasNoSelector, ReasonServiceNotSelectable (type
	// ExternalName) and ReasonServiceSelectsOtherPods refuse a Service
	// that does not route to the scale target's pods (see
	// serviceWithoutSelector, serviceSelectsOtherPods).
	ReasonServiceHasNoSelector    = validation.ReasonServiceHasNoSelector
	ReasonServiceNotSelectable    = validation.ReasonServiceNotSelectable
	ReasonServiceSelectsOtherPods = "ServiceSelectsOtherPods"
	// ReasonNamespaceBudgetExceeded refuses an ElastiService past its
	// namespace's budget (see overBudget).
	ReasonNamespaceBudgetExceeded = nsbudget.Reason
	// ReasonResolverWithdrawn: the resolver left the front of a Service
	// whose endpoints Kubernetes stopped keeping (see leaveUnkeptService).
	ReasonResolverWithdrawn = "ResolverWithdrawn"
)

// ResolverPerPortRoutingPort is the resolver Service port by which resolver
// pods declare that they serve per-port routing. In elasti's manifests it
// targets, by name, a container port of the resolver (named "per-port": a
// container port name has at most 15 characters), so the EndpointSlice
// controller lists it only for pods that have that container port.
// KubeElasti's resolver pods have none (see resolverEndpoints).
const ResolverPerPortRoutingPort = "per-port-routing"

// Labels and values on the objects the operator creates.
const (
	// ManagedByValue marks resolver EndpointSlices as ours, so the
	// EndpointSlice controller leaves them alone and our mode check ignores
	// them when counting the target's endpoints.
	ManagedByValue = names.ResolverSliceManagedBy
	// LabelManagedBy is the generic managed-by label on private Services.
	LabelManagedBy = "app.kubernetes.io/managed-by"
)

// Index names.
const (
	indexByService = "byService" // ElastiServices and EndpointSlices by namespace/public Service
	indexByTarget  = "byTarget"  // ElastiServices by namespace/Kind/name of the target
	// ElastiServices by namespace/Kind/name of each workload in spec.wakeWith
	indexByDependency = "byDependency"
	indexByOwner      = "byOwner" // generated objects by namespace/name of the owning ElastiService
)

// Observer receives the controller's measurements (metrics.Operator is
// one).
type Observer interface {
	// ObserveSync is called after every ElastiService sync.
	ObserveSync(d time.Duration, result outcome.Sync)
	// ObserveMode reports an ElastiService's mode after a sync.
	ObserveMode(es types.NamespacedName, mode string)
	// ModeSwitched reports a mode switch as it is written.
	ModeSwitched(es types.NamespacedName, mode string, at time.Time)
	// ForgetElastiService reports an ElastiService that no longer exists.
	ForgetElastiService(es types.NamespacedName)
}

// Replicas is told the replicas of each ElastiService's target as its
// informer shows them change, so that a scale-up from zero by anyone, not
// only a wake, starts the cooldown (idle.Wakes is one).
type Replicas interface {
	ObserveReplicas(ctx context.Context, es types.NamespacedName, replicas int32)
	// Forget drops what is known of an ElastiService that no longer exists.
	Forget(es types.NamespacedName)
	// Pending reports whether a wake of es's group (spec.wakeWith) is
	// under way while its target is at zero.
	Pending(es types.NamespacedName, st *elastiv1alpha1.ElastiServiceStatus) bool
}

// Config holds the operator's tunables.
type Config struct {
	// ResolverNamespace/ResolverService locate the resolver, whose Ready
	// endpoints fill every proxy-mode slice.
	ResolverNamespace string
	ResolverService   string
	// ResolverProxyPort is the resolver port proxy-mode slices point at
	// when they route by Host.
	ResolverProxyPort int32
	// ResolverPortRange is where each Service port's own resolver port
	// comes from (see pkg/portalloc).
	ResolverPortRange portalloc.Range
	// ResolverPortQuota bounds the ports of one ElastiService and of one
	// namespace; zero fields are unbounded.
	ResolverPortQuota portalloc.Quota
	// Workers per queue.
	ElastiServiceWorkers int
	TargetWorkers        int
	EndpointSliceWorkers int
	// DeletionGrace bounds how long a deleted ElastiService keeps routing to
	// the resolver while its restored target starts.
	DeletionGrace time.Duration
}

// Informers the controller reads from. They must not have been started.
type Informers struct {
	ElastiServices elastiinformers.ElastiServiceInformer
	Services       coreinformers.ServiceInformer
	EndpointSlices discoveryinformers.EndpointSliceInformer
	// ResolverSlices watches only the resolver Service's slices in the
	// resolver namespace, which --watch-namespace may exclude from
	// EndpointSlices.
	ResolverSlices discoveryinformers.EndpointSliceInformer
	Deployments    appsinformers.DeploymentInformer
	StatefulSets   appsinformers.StatefulSetInformer
	// Rollouts is optional.
	Rollouts *scaletarget.RolloutInformer
	// HorizontalPodAutoscalers is optional. The controller only waits for
	// it: the Scaler reads the HPA spec.autoscaler names from it, to wake
	// a target the way its HPA would size it (scaletarget.GoalFor).
	HorizontalPodAutoscalers autoscalingv2informers.HorizontalPodAutoscalerInformer
}

// Controller reconciles ElastiServices.
type Controller struct {
	kubeClient   kubernetes.Interface
	elastiClient versioned.Interface
	scaler       *scaletarget.Scaler
	directory    *directory.Directory
	cfg          Config
	clock        clock.PassiveClock

	elastiServices       elastilisters.ElastiServiceLister
	elastiServiceIndexer cache.Indexer
	services             corelisters.ServiceLister
	serviceIndexer       cache.Indexer
	slices               discoverylisters.EndpointSliceLister
	sliceIndexer         cache.Indexer
	cacheSynced          []cache.InformerSynced

	elastiServiceQueue  *workloop.Loop[types.NamespacedName]
	targetQueue         *workloop.Loop[scaletarget.Ref]
	sliceQueue          *workloop.Loop[types.NamespacedName]
	privateServiceQueue *workloop.Loop[types.NamespacedName]

	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder

	observer Observer
	replicas Replicas
	// events writes Events (Options.EventClient).
	events kubernetes.Interface

	// superseded remembers, per ElastiService, resourceVersions that our own
	// writes replaced, so a sync that sees one knows the cache is behind
	// and waits for the newer object's event instead of writing on stale
	// state (which would only conflict).
	superseded *supersededVersions
	// handoffs are the idle poller's scale-downs under way (handoff.go).
	handoffs handoffs
	// drains are the old Services of moves that wait to be let go of
	// (move.go).
	drains moveDrains

	// front puts the resolver in front of Services.
	front *resolverFront
	// status writes the ElastiServices' status.
	status *statusWriter
	// groups wakes and restores groups, live reads the pods behind ready
	// endpoints, claims decides who claims a Service.
	groups *groupWaker
	live   *podLiveness
	claims *claimer
	// wakes records the stages of waking targets' pods as events.
	wakes *wakeProgress

	// queue takes the ElastiService keys to sync: elastiServiceQueue
	// unless Options.Queue replaces it.
	queue Queue
}

// Queue takes ElastiService keys to sync. *workloop.Loop is one.
type Queue interface {
	KeyAdder
	// AddUrgent queues a key ahead of its namespace's others (see
	// enqueueForTarget).
	AddUrgent(key types.NamespacedName)
	// Len is how many keys wait for a worker.
	Len() int
}

// KeyAdder takes ElastiService keys.
type KeyAdder interface {
	Add(key types.NamespacedName)
}

// Options are New's optional collaborators; each zero field takes the
// default it names.
type Options struct {
	// QueueMetrics receives the queues' measurements; nil measures nothing.
	QueueMetrics workqueue.MetricsProvider
	// EventClient writes Events; nil uses the main client. A separate
	// client gives events their own rate limit, so a burst of events never
	// delays reconciles.
	EventClient kubernetes.Interface
	// OnDrop is told of the keys every queue gives up on; ElastiServices
	// that were only waiting (see IsWaiting) are not reported. nil drops
	// them silently (the queue logs them).
	OnDrop DropHandler
	// Clock tells the time; nil is the real clock.
	Clock clock.PassiveClock
	// Recorder records events; nil records through the controller's own
	// broadcaster to EventClient.
	Recorder record.EventRecorder
	// Queue and PrivateServices replace the controller's own ElastiService
	// and private Service queues, for tests that capture keys or create
	// private Services in line; nil uses the controller's own.
	Queue           Queue
	PrivateServices KeyAdder
}

// privateServiceWorkers create private Services. A handful keeps a
// fleet-wide first scale-down from waiting long on slow Service creates
// without flooding the apiserver with them.
const privateServiceWorkers = 8

func init() {
	utilruntime.Must(elastischeme.AddToScheme(scheme.Scheme))
}

// supersededVersions is safe for concurrent use.
type supersededVersions struct {
	mu sync.Mutex
	m  map[types.NamespacedName][]string
}

// add records that our write replaced resourceVersion rv of key.
func (s *supersededVersions) add(key types.NamespacedName, rv string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[types.NamespacedName][]string{}
	}
	// A handful is plenty: the cache is never more than a few writes behind.
	s.m[key] = append(s.m[key][max(0, len(s.m[key])-3):], rv)
}

// stale reports whether rv is one our writes replaced; when it is not, the
// cache has caught up and the record is dropped.
func (s *supersededVersions) stale(key types.NamespacedName, rv string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if slices.Contains(s.m[key], rv) {
		return true
	}
	delete(s.m, key)
	return false
}

func (s *supersededVersions) forget(key types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
}

// New wires the controller's handlers onto the informers. Start the
// informers after New and before Run. observer receives the measurements,
// replicas the targets' replicas; opts holds the optional collaborators.
func New(ctx context.Context, kube kubernetes.Interface, elasti versioned.Interface, scaler *scaletarget.Scaler,
	dir *directory.Directory, inf Informers, cfg Config, observer Observer, replicas Replicas,
	opts Options) (*Controller, error) {
	if r := cfg.ResolverPortRange; !r.Valid() {
		return nil, fmt.Errorf("resolver port range %s is not a range of TCP ports", r)
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	recorder := opts.Recorder
	if recorder == nil {
		recorder = broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: AgentName})
	}
	c := &Controller{
		kubeClient:           kube,
		elastiClient:         elasti,
		scaler:               scaler,
		directory:            dir,
		observer:             observer,
		replicas:             replicas,
		cfg:                  cfg,
		clock:                cmp.Or[clock.PassiveClock](opts.Clock, clock.RealClock{}),
		elastiServices:       inf.ElastiServices.Lister(),
		elastiServiceIndexer: inf.ElastiServices.Informer().GetIndexer(),
		services:             inf.Services.Lister(),
		serviceIndexer:       inf.Services.Informer().GetIndexer(),
		slices:               inf.EndpointSlices.Lister(),
		sliceIndexer:         inf.EndpointSlices.Informer().GetIndexer(),
		broadcaster:          broadcaster,
		recorder:             recorder,
		events:               cmp.Or[kubernetes.Interface](opts.EventClient, kube),
		superseded:           &supersededVersions{},
	}
	c.newQueues(opts)
	c.status = &statusWriter{elastiClient: elasti, observer: observer, clock: c.clock, recorder: recorder,
		queue: c.queue, superseded: c.superseded}
	c.groups = &groupWaker{scaler: scaler, replicas: replicas, recorder: recorder}
	c.claims = &claimer{directory: dir, elastiServices: c.elastiServices, services: c.services, slices: c.slices, queue: c.queue}
	c.front = &resolverFront{
		kubeClient: kube, cfg: cfg, ports: portalloc.New(cfg.ResolverPortRange, cfg.ResolverPortQuota),
		elastiServices: c.elastiServices, services: c.services, slices: c.slices, sliceIndexer: c.sliceIndexer,
		resolverSlices: inf.ResolverSlices.Lister(), recorder: recorder,
		queue: c.queue, privateServices: cmp.Or[KeyAdder](opts.PrivateServices, c.privateServiceQueue),
		terminating: newTerminatingNamespaces(c.clock),
	}
	c.live = &podLiveness{kubeClient: kube, front: c.front}
	c.wakes = newWakeProgress(kube, recorder, c.elastiServiceQueue, c.clock)
	if err := watch(c, inf); err != nil {
		return nil, err
	}
	klog.FromContext(ctx).V(4).Info("Controller wired", "resolver", cfg.ResolverNamespace+"/"+cfg.ResolverService)
	return c, nil
}

// watch adds c's indexes and event handlers to the informers, and lists
// the informers Run waits for.
func watch(c *Controller, inf Informers) error {
	esInformer := inf.ElastiServices.Informer()
	if err := esInformer.AddIndexers(cache.Indexers{indexByService: indexElastiServiceByService, indexByTarget: indexElastiServiceByTarget,
		indexByDependency: indexElastiServiceByDependency}); err != nil {
		return err
	}
	if err := inf.EndpointSlices.Informer().AddIndexers(cache.Indexers{indexByService: indexSliceByService, indexByOwner: indexByOwnerElastiService}); err != nil {
		return err
	}
	if err := inf.Services.Informer().AddIndexers(cache.Indexers{indexByOwner: indexByOwnerElastiService}); err != nil {
		return err
	}
	handlers := []struct {
		informer cache.SharedIndexInformer
		handler  cache.ResourceEventHandler
	}{
		{esInformer, cache.ResourceEventHandlerFuncs{
			AddFunc:    c.onElastiService,
			UpdateFunc: func(old, cur any) { c.onElastiServiceUpdate(old, cur) },
			DeleteFunc: c.onElastiServiceDelete,
		}},
		{inf.Services.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    c.onService,
			UpdateFunc: func(old, cur any) { c.onServiceUpdate(old, cur) },
			DeleteFunc: c.onService,
		}},
		{inf.EndpointSlices.Informer(), sliceHandler(c.sliceQueue)},
		{inf.ResolverSlices.Informer(), sliceHandler(c.sliceQueue)},
		{inf.Deployments.Informer(), targetHandler(c.targetQueue, elastiv1alpha1.KindDeployment)},
		{inf.StatefulSets.Informer(), targetHandler(c.targetQueue, elastiv1alpha1.KindStatefulSet)},
	}
	for _, h := range handlers {
		if _, err := h.informer.AddEventHandler(h.handler); err != nil {
			return err
		}
		c.cacheSynced = append(c.cacheSynced, h.informer.HasSynced)
	}
	if inf.Rollouts != nil {
		inf.Rollouts.AddHandler(c.targetQueue.Add)
		c.cacheSynced = append(c.cacheSynced, inf.Rollouts.HasSynced)
	}
	if inf.HorizontalPodAutoscalers != nil {
		c.cacheSynced = append(c.cacheSynced, inf.HorizontalPodAutoscalers.Informer().HasSynced)
	}
	return nil
}

// newQueues makes the four queues; their names label the queue metrics.
func (c *Controller) newQueues(opts Options) {
	metrics, drops := opts.QueueMetrics, dropReports{opts.OnDrop}
	// Every queue takes turns by namespace: one namespace's thousand keys
	// (a fleet created or deleted at once) must not hold another
	// namespace's wake behind them (docs/concepts/wake-and-sleep.md).
	c.elastiServiceQueue = workloop.NewFair(elastiServiceQueueName, namespaceOf, func(ctx context.Context, key types.NamespacedName) error {
		start := c.clock.Now()
		err := c.syncElastiService(ctx, key)
		c.observer.ObserveSync(c.clock.Since(start), syncOutcome(err))
		return err
	}, metrics, drops.elastiService)
	c.targetQueue = workloop.NewFair(targetQueueName, func(ref scaletarget.Ref) string { return ref.Namespace },
		c.enqueueForTarget, metrics, drops.target)
	c.sliceQueue = workloop.NewFair(sliceQueueName, namespaceOf, c.enqueueForSliceService, metrics, drops.service)
	c.privateServiceQueue = workloop.NewFair(privateServiceQueueName, namespaceOf, func(ctx context.Context, key types.NamespacedName) error {
		return c.front.syncPrivateService(ctx, key)
	}, metrics, drops.privateService)
	c.queue = cmp.Or[Queue](opts.Queue, c.elastiServiceQueue)
}

func namespaceOf(key types.NamespacedName) string { return key.Namespace }

// DroppedObject names the object behind a key a queue gave up on: an
// ElastiService, a scale target (by its kind) or a Service.
type DroppedObject struct {
	Kind      string
	Namespace string
	Name      string
}

// DropHandler is told of a key that exhausted its retries.
type DropHandler func(ctx context.Context, queue string, object DroppedObject, err error)

// dropReports turns a DropHandler into each queue's drop report, naming
// the object behind the key; a nil handler reports nothing.
type dropReports struct{ h DropHandler }

// Queue names; they label the queue metrics.
const (
	elastiServiceQueueName  = "elastiservice"
	targetQueueName         = "scaletarget"
	sliceQueueName          = "endpointslice"
	privateServiceQueueName = "privateservice"
)

// elastiService reports a dropped ElastiService unless it was only
// waiting (see IsWaiting).
func (d dropReports) elastiService(ctx context.Context, k types.NamespacedName, err error) {
	if d.h != nil && !IsWaiting(err) {
		d.h(ctx, elastiServiceQueueName, DroppedObject{elastiv1alpha1.KindElastiService, k.Namespace, k.Name}, err)
	}
}

func (d dropReports) target(ctx context.Context, r scaletarget.Ref, err error) {
	if d.h != nil {
		d.h(ctx, targetQueueName, DroppedObject{r.Kind, r.Namespace, r.Name}, err)
	}
}

func (d dropReports) service(ctx context.Context, k types.NamespacedName, err error) {
	if d.h != nil {
		d.h(ctx, sliceQueueName, DroppedObject{"Service", k.Namespace, k.Name}, err)
	}
}

func (d dropReports) privateService(ctx context.Context, k types.NamespacedName, err error) {
	if d.h != nil {
		d.h(ctx, privateServiceQueueName, DroppedObject{elastiv1alpha1.KindElastiService, k.Namespace, k.Name}, err)
	}
}

// Recorder is the event recorder, shared with the idle poller.
func (c *Controller) Recorder() record.EventRecorder { return c.recorder }

// CacheSynced lists the informers Run waits for.
func (c *Controller) CacheSynced() []cache.InformerSynced { return c.cacheSynced }

// Run waits for the caches, starts the four worker pools and blocks until
// ctx ends and every worker has finished its current sync.
func (c *Controller) Run(ctx context.Context) error {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)

	c.broadcaster.StartStructuredLogging(3)
	c.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.events.CoreV1().Events("")})
	defer c.broadcaster.Shutdown()

	logger.Info("Waiting for informer caches to sync")
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.cacheSynced...) {
		c.elastiServiceQueue.ShutDown()
		c.targetQueue.ShutDown()
		c.sliceQueue.ShutDown()
		c.privateServiceQueue.ShutDown()
		return fmt.Errorf("caches did not sync before shutdown")
	}
	logger.Info("Starting workers",
		"elastiservice", c.cfg.ElastiServiceWorkers, "scaletarget", c.cfg.TargetWorkers, "endpointslice", c.cfg.EndpointSliceWorkers)
	done := make(chan struct{}, 4)
	run := func(f func()) {
		go func() { f(); done <- struct{}{} }()
	}
	run(func() { c.elastiServiceQueue.Run(ctx, c.cfg.ElastiServiceWorkers) })
	run(func() { c.targetQueue.Run(ctx, c.cfg.TargetWorkers) })
	run(func() { c.sliceQueue.Run(ctx, c.cfg.EndpointSliceWorkers) })
	run(func() { c.privateServiceQueue.Run(ctx, privateServiceWorkers) })
	for range 4 {
		<-done
	}
	logger.Info("Controller stopped")
	return nil
}

// Enqueue asks for a sync of an ElastiService (the scale server uses it to
// hasten the switch back to serve).
func (c *Controller) Enqueue(key types.NamespacedName) { c.queue.Add(key) }

// ---- event handlers: no API calls, only index lookups and queue adds ----

func (c *Controller) onElastiService(obj any) {
	if es, ok := obj.(*elastiv1alpha1.ElastiService); ok {
		c.queue.Add(es.Key())
	}
	enqueueBudgetChanges(c.queue, c.directory.Budget().TakeChanged())
}

func (c *Controller) onElastiServiceUpdate(old, cur any) {
	o, ok1 := old.(*elastiv1alpha1.ElastiService)
	n, ok2 := cur.(*elastiv1alpha1.ElastiService)
	if !ok1 || !ok2 {
		return
	}
	c.queue.Add(n.Key())
	enqueueBudgetChanges(c.queue, c.directory.Budget().TakeChanged())
	// A changed spec.service frees the old Service for another claimant.
	if o.Spec.Service != n.Spec.Service {
		c.enqueueByService(o.Namespace, o.Spec.Service)
	}
}

func (c *Controller) onElastiServiceDelete(obj any) {
	es, ok := tombstone.Object[*elastiv1alpha1.ElastiService](obj)
	if !ok {
		return
	}
	c.queue.Add(es.Key())
	c.directory.Budget().Forget(es.Key())
	enqueueBudgetChanges(c.queue, c.directory.Budget().TakeChanged())
	// Another ElastiService may have been waiting for this one's Service.
	c.enqueueByService(es.Namespace, es.Spec.Service)
}

func (c *Controller) onService(obj any) {
	svc, ok := tombstone.Object[*corev1.Service](obj)
	if !ok {
		return
	}
	c.enqueueByService(svc.Namespace, svc.Name)
	c.enqueueOwner(svc)
}

func (c *Controller) onServiceUpdate(old, cur any) {
	o, ok1 := old.(*corev1.Service)
	n, ok2 := cur.(*corev1.Service)
	if !ok1 || !ok2 || o.ResourceVersion == n.ResourceVersion {
		return
	}
	c.onService(n)
}

func (c *Controller) enqueueByService(namespace, service string) {
	objs, err := c.elastiServiceIndexer.ByIndex(indexByService, namespace+"/"+service)
	if err != nil {
		return
	}
	for _, obj := range objs {
		c.queue.Add(obj.(*elastiv1alpha1.ElastiService).Key())
	}
}

// enqueueOwner re-syncs the ElastiService that owns a generated object, so a
// hand-edited or deleted private Service is put back.
func (c *Controller) enqueueOwner(obj metav1.Object) {
	for _, key := range ownerElastiServices(obj) {
		c.queue.Add(key)
	}
}
