package clusterview

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/elasti-dev/elasti/pkg/endpointready"
)

// The pod view (issue 39, item 2): while a request is held for a Service,
// the resolver watches the pods that Service selects, in its namespace,
// and learns their addresses and Ready condition as the kubelet writes
// them. A hold no longer waits on the EndpointSlice controller alone,
// whose per-Service backoff, when its slice cache trails its own writes
// (1 s, doubling), once kept Ready pods out of a slice for tens of
// seconds (docs/concepts/wake-and-sleep.md, "The tail"). The same view
// vouches for the slices' addresses: the resolver forwards only to an
// address that a pod the Service selects holds (vouch.go).
//
// Its cost, chosen over the alternatives (docs/concepts/wake-and-sleep.md,
// "The pod view"):
// one label-selected LIST and one WATCH per held Service, in its
// namespace, for the hold and podViewLinger after it, at most MaxPodViews
// at once; with no hold, nothing. A cluster-wide pod informer would hold
// every pod of the cluster in the resolver's memory, and one per
// namespace every pod of each namespace with a hold.

// PodView is the resolver's view of the pods of the Services it holds
// requests for.
type PodView interface {
	// Join starts watching the pods svc selects, unless a watch runs;
	// leave says the caller no longer needs it. The watch outlives its
	// last leave by podViewLinger, so the requests of the drain after a
	// hold are vouched for by it too. listed is closed once the watch has
	// listed, or will not (no view for svc, or the list was refused).
	Join(svc ServiceRef) (leave func(), listed <-chan struct{})
	// HasView reports whether a view of svc's pods runs now. A Join past
	// the bounds or within a refusal's pause starts none, and a view can
	// end under its holds (refused, or given back to a namespace within
	// its share): a hold without one joins again (hold.joinView).
	HasView(svc ServiceRef) bool
	// Pods returns the pods svc selects, as last written, and whether
	// that is all of them: the watch has listed, no pod was left out for
	// a bound, and the Service still selects what the watch does. The
	// pods are shared and must not be changed.
	Pods(svc ServiceRef) (pods []*corev1.Pod, whole bool)
	// Read vouches for what Pods cannot (not whole): it returns the pods
	// of names, in svc's namespace, that svc selects, as a GET of each
	// found them, and reads in the background those it has not read
	// lately, at most podReadRate a second per namespace; Watch tells
	// when one is in. ok is false when the resolver may not read pods.
	// The pods are shared and must not be changed.
	Read(svc ServiceRef, names []string) (pods []*corev1.Pod, ok bool)
	// Watch returns a channel closed on the next change of svc's pods,
	// and stop, as EndpointSource.Watch.
	Watch(svc ServiceRef) (changed <-chan struct{}, stop func())
}

const (
	// MaxPodViews bounds the Services whose pods are watched at once, and
	// MaxPodViewsPerNamespace is one namespace's share of them: what it
	// is sure to get. A namespace past its share borrows views while
	// there is room, and gives a borrowed one back when the views are
	// full and a namespace within its share needs one (roomLocked): a
	// namespace that wakes more Services at once than its share (the
	// soak's 120, a replica holding 60 of them give or take a few) gets a
	// view for each, and cannot keep another namespace from its own. A
	// Service with no view is held on its slices, each Ready address
	// vouched for by a read of the pod it names (Read).
	MaxPodViews             = 256
	MaxPodViewsPerNamespace = MaxPodViews / 4
	// MaxViewPods bounds the pods one view keeps: a wake from zero starts
	// a few, and the first Ready one releases every held request. A
	// Service that selects more is not whole, and the pods its slices
	// name are read to vouch for their addresses (Read).
	MaxViewPods = 8
	// podViewLinger is how long a view outlives its last hold: longer
	// than the front's drain (DefaultFrontDrain), in which requests still
	// reach the resolver after the wake, and short enough that a fleet's
	// wakes do not keep their watches for long.
	podViewLinger = 30 * time.Second
	// viewRefusalPause is how long no view starts after a list or watch
	// was refused. A resolver installed without list and watch on pods
	// tries once in that time; an apiserver that refuses while it starts
	// (its authorizer not synced yet) is given views again soon after.
	viewRefusalPause = 10 * time.Second
)

// PodListWatch returns what lists and watches the pods of namespace that
// selector selects. The command's is the apiserver, with the selector
// in the request, so only those pods are sent.
type PodListWatch func(namespace, selector string) cache.ListerWatcherWithContext

// InformerPodView is the PodView of a running resolver: one reflector per
// held Service, into a bounded store (podStore).
type InformerPodView struct {
	services  corelisters.ServiceLister
	listWatch PodListWatch
	linger    time.Duration
	ctx       context.Context
	logger    klog.Logger
	b         *Broadcaster[ServiceRef]
	// refused counts a Join past the bounds.
	refused func()
	// refusals pause the views after a list or watch was refused
	// (forbiddenEnds): no view starts meanwhile.
	refusals refusals
	// reads vouches for what the watches cannot (Read).
	reads *podReads

	mu          sync.Mutex
	views       map[ServiceRef]*podWatch
	inNamespace map[string]int
	wg          sync.WaitGroup
}

// podWatch is one Service's view.
type podWatch struct {
	svc      ServiceRef
	selector string
	refs     int
	cancel   context.CancelFunc
	// linger stops the watch once it ran podViewLinger unused.
	linger *time.Timer
	store  *podStore
}

// NewInformerPodView returns a PodView whose watches end with ctx or
// Close. services gives each Service's selector, and pods reads one pod
// (Read). Its metrics go to reg (none when nil).
func NewInformerPodView(ctx context.Context, services corelisters.ServiceLister, listWatch PodListWatch, pods PodGetter, reg prometheus.Registerer) (*InformerPodView, error) {
	refused := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "elasti_resolver_pod_views_refused_total",
		Help: fmt.Sprintf("Holds whose Service got no pod view because %d were watched and none could give its place up (a namespace is sure of %d, and borrows past them while there is room); they wait on the EndpointSlices alone, vouched for by reads.", MaxPodViews, MaxPodViewsPerNamespace),
	})
	v := &InformerPodView{services: services, listWatch: listWatch, linger: podViewLinger, ctx: ctx,
		logger: klog.FromContext(ctx).WithName("podview"), b: NewBroadcaster[ServiceRef](), refused: refused.Inc,
		views: map[ServiceRef]*podWatch{}, inNamespace: map[string]int{}}
	v.refusals.pause = viewRefusalPause
	v.reads = newPodReads(ctx, pods, v.b.Broadcast, v.logger, clock.RealClock{})
	views := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "elasti_resolver_pod_views",
		Help: fmt.Sprintf("Services whose pods the resolver watches now: those it holds requests for, and for %v after; at most %d.", podViewLinger, MaxPodViews),
	}, func() float64 { return float64(v.Viewing()) })
	if reg != nil {
		if err := errors.Join(reg.Register(refused), reg.Register(views)); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// selector is the label selector of svc's pods, false when Kubernetes
// keeps no endpoints for it (endpointready.Unkept), or the cache did not
// keep its selector (maxCachedSelector): no pods to view.
func (v *InformerPodView) selector(svc ServiceRef) (string, bool) {
	pub, err := v.services.Services(svc.Namespace).Get(svc.Name)
	if err != nil || endpointready.Unkept(pub) != "" {
		return "", false
	}
	if _, oversized := pub.Spec.Selector[""]; oversized { // no label key is empty: trimSelector's mark
		return "", false
	}
	return labels.SelectorFromSet(pub.Spec.Selector).String(), true
}

// closed is a channel closed from the start: listed for no view.
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Join implements PodView.
func (v *InformerPodView) Join(svc ServiceRef) (func(), <-chan struct{}) {
	sel, ok := v.selector(svc) // outside the lock: reads the informer cache
	if !ok || v.refusals.paused(time.Now()) {
		return func() {}, closed
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	w := v.views[svc]
	if w != nil && w.selector != sel && w.refs == 0 {
		v.stopLocked(w) // the Service selects other pods now: start over
		w = nil
	}
	if w == nil {
		if !v.roomLocked(svc.Namespace) {
			v.refused()
			return func() {}, closed
		}
		w = v.startLocked(svc, sel)
	}
	if w.linger != nil {
		w.linger.Stop()
		w.linger = nil
	}
	w.refs++
	return sync.OnceFunc(func() { v.leave(w) }), w.store.firstList()
}

// roomLocked reports whether a view for a Service of namespace fits the
// bounds. While fewer than MaxPodViews run it does, whatever the
// namespace's share. When they are full, a view that only lingers gives
// its place up (of any namespace to one within its share, of its own to
// one past it); failing that, a namespace within its share takes a view
// back from one that borrowed past its own (takeBackLocked).
func (v *InformerPodView) roomLocked(namespace string) bool {
	if len(v.views) < MaxPodViews {
		return true
	}
	withinShare := v.inNamespace[namespace] < MaxPodViewsPerNamespace
	for _, w := range v.views {
		if w.refs == 0 && (withinShare || w.svc.Namespace == namespace) {
			v.stopLocked(w)
			return true
		}
	}
	return withinShare && v.takeBackLocked()
}

// takeBackLocked stops a view that holds are using in the namespace with
// the most views past its share, if any is past it, and reports whether
// it did. Its holds go on without it, vouched for by reads as past the
// bounds; only the namespace that borrowed past its share pays for it.
func (v *InformerPodView) takeBackLocked() bool {
	var most string
	for ns, n := range v.inNamespace {
		if n > MaxPodViewsPerNamespace && n > v.inNamespace[most] {
			most = ns
		}
	}
	if most == "" {
		return false
	}
	for _, w := range v.views {
		if w.svc.Namespace == most {
			v.logger.V(2).Info("Gave a borrowed pod view back: its namespace is past its share and another needs one",
				"service", w.svc.KRef(), "views", v.inNamespace[most], "share", MaxPodViewsPerNamespace)
			v.stopLocked(w)
			return true
		}
	}
	return false
}

func (v *InformerPodView) startLocked(svc ServiceRef, sel string) *podWatch {
	ctx, cancel := context.WithCancel(v.ctx)
	w := &podWatch{svc: svc, selector: sel, cancel: cancel, store: newPodStore(MaxViewPods, func() { v.b.Broadcast(svc) })}
	v.views[svc] = w
	v.inNamespace[svc.Namespace]++
	logger := v.logger.WithValues("service", svc.KRef())
	lw := v.forbiddenEnds(v.listWatch(svc.Namespace, sel), func() { v.refusedBy(w) }, logger)
	r := cache.NewReflectorWithOptions(lw, &corev1.Pod{}, w.store, cache.ReflectorOptions{Name: "pods of " + svc.String(), Logger: &logger})
	v.wg.Add(1)
	go func() {
		defer v.wg.Done()
		r.RunWithContext(ctx)
	}()
	logger.V(4).Info("Watching the service's pods", "selector", sel)
	return w
}

func (v *InformerPodView) stopLocked(w *podWatch) {
	w.cancel()
	w.store.endListing() // a Join still waiting on its first list goes on without it
	if w.linger != nil {
		w.linger.Stop()
	}
	delete(v.views, w.svc)
	if v.inNamespace[w.svc.Namespace]--; v.inNamespace[w.svc.Namespace] <= 0 {
		delete(v.inNamespace, w.svc.Namespace)
	}
	v.b.Broadcast(w.svc)
}

func (v *InformerPodView) leave(w *podWatch) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if w.refs--; w.refs > 0 || v.views[w.svc] != w {
		return
	}
	w.linger = time.AfterFunc(v.linger, func() {
		v.mu.Lock()
		defer v.mu.Unlock()
		if w.refs == 0 && v.views[w.svc] == w {
			v.stopLocked(w)
		}
	})
}

// refusedBy ends w, whose list or watch was refused (no view starts for
// the refusals' pause). w leaves the views at once: its store stopped
// following the pods, and a view kept whole with what it last had would
// withhold every Ready address the slices list for a pod it lacks, for as
// long as anything is held for the Service. Its holds go on without a
// view (vouchByName), as past the bounds.
func (v *InformerPodView) refusedBy(w *podWatch) {
	v.mu.Lock()
	if v.views[w.svc] == w {
		v.stopLocked(w)
	}
	v.mu.Unlock()
	w.cancel() // stopLocked's too, if it was still a view
	w.store.endListing()
}

// Pods implements PodView.
func (v *InformerPodView) Pods(svc ServiceRef) ([]*corev1.Pod, bool) {
	v.mu.Lock()
	w := v.views[svc]
	v.mu.Unlock()
	if w == nil {
		return nil, false
	}
	pods, whole := w.store.list()
	if sel, ok := v.selector(svc); !ok || sel != w.selector {
		whole = false
	}
	return pods, whole
}

// Read implements PodView. A Service whose selector the cache did not
// keep (maxCachedSelector) has its pods read by name and UID alone.
func (v *InformerPodView) Read(svc ServiceRef, names []string) ([]*corev1.Pod, bool) {
	sel, _ := v.selector(svc) // "" when the cache did not keep it
	return v.reads.get(svc, sel, names)
}

// Watch implements PodView.
func (v *InformerPodView) Watch(svc ServiceRef) (<-chan struct{}, func()) { return v.b.Watch(svc) }

// HasView implements PodView.
func (v *InformerPodView) HasView(svc ServiceRef) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.views[svc] != nil
}

// Viewing returns the Services whose pods are watched now.
func (v *InformerPodView) Viewing() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.views)
}

// Close stops every watch; ctx's end does too. It waits for them.
func (v *InformerPodView) Close() {
	v.mu.Lock()
	for _, w := range v.views {
		v.stopLocked(w)
	}
	v.mu.Unlock()
	v.wg.Wait()
	v.reads.wait()
}

// forbiddenEnds wraps lw so that a refusal (the resolver may not list or
// watch pods: an install from before the view, or an apiserver whose
// authorizer is still starting) ends the view (refusedBy) with one log
// line instead of a reflector retrying forever; the Service's holds go on
// without it. The first such refusal is logged at the default level, the
// rest at 2.
func (v *InformerPodView) forbiddenEnds(lw cache.ListerWatcherWithContext, end func(), logger klog.Logger) cache.ListerWatcher {
	return &refusalEnds{inner: lw, refused: func(err error) {
		level := v.refusals.refuse(time.Now())
		logger.V(level).Info("May not list or watch the service's pods; its holds go on without a pod view, and no view starts for a while (grant list and watch on pods)", "pause", v.refusals.pause, "err", err)
		end()
	}}
}

// refusalEnds is forbiddenEnds' ListerWatcher.
type refusalEnds struct {
	inner   cache.ListerWatcherWithContext
	refused func(error)
}

func (r *refusalEnds) check(err error) {
	if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
		r.refused(err)
	}
}

func (r *refusalEnds) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	obj, err := r.inner.ListWithContext(ctx, opts)
	r.check(err)
	return obj, err
}

func (r *refusalEnds) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := r.inner.WatchWithContext(ctx, opts)
	r.check(err)
	return w, err
}

// List and Watch are cache.ListerWatcher's; the reflector calls the
// context versions.
func (r *refusalEnds) List(opts metav1.ListOptions) (runtime.Object, error) {
	return r.ListWithContext(context.Background(), opts)
}

func (r *refusalEnds) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return r.WatchWithContext(context.Background(), opts)
}

// IsWatchListSemanticsUnSupported passes on what the inner ListerWatcher
// says of streaming lists (a test's fake says it has none).
func (r *refusalEnds) IsWatchListSemanticsUnSupported() bool {
	u, ok := r.inner.(interface{ IsWatchListSemanticsUnSupported() bool })
	return ok && u.IsWatchListSemanticsUnSupported()
}
