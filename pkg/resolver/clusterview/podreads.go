package clusterview

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

const (
	// PodReadRate and podReadBurst bound the pod reads of one namespace
	// (per second, and at once), so pods that never start, or slices
	// that name many pods, cannot spend the resolver's apiserver budget
	// (--kube-api-qps, 100 a second by default): a namespace gets a
	// quarter of it, as it is sure of a quarter of the pod views
	// (MaxPodViewsPerNamespace). Each Service held past the view's bounds
	// needs a read once its pod is Ready, and again every readPodFresh
	// while it is looked up, so a wake of a namespace's 120 Services at
	// once (the soak's) needs about 60 reads at once and 10 a second
	// after: at 5 a second, burst 10, the last of them would wait seconds
	// for a read after their pod was Ready.
	PodReadRate  = 25
	PodReadBurst = 32
	// maxReadLimiters bounds the namespaces whose read rate is tracked, and
	// readLimiterIdle how long one is kept unused. A limiter dropped early
	// starts again with a full burst: at most podReadBurst reads more.
	maxReadLimiters = 1024
	readLimiterIdle = 10 * time.Minute
	// PodReadTimeout bounds one GET of a pod.
	PodReadTimeout = 2 * time.Second
)

// NamespaceLimits holds one rate limiter of pod reads per namespace.
type NamespaceLimits struct{ cache *utilcache.LRUExpireCache }

func NewNamespaceLimits() NamespaceLimits {
	return NamespaceLimits{cache: utilcache.NewLRUExpireCache(maxReadLimiters)}
}

// Limiter is namespace's.
func (l NamespaceLimits) Limiter(namespace string) *rate.Limiter {
	v, ok := l.cache.Get(namespace)
	if !ok {
		// Two reads that miss together may each make one; one is kept.
		v = rate.NewLimiter(PodReadRate, PodReadBurst)
	}
	// Added again on every use, so it lives readLimiterIdle after its last.
	l.cache.Add(namespace, v, readLimiterIdle)
	return v.(*rate.Limiter)
}

const (
	// maxReadPods bounds the pods remembered from reads, and
	// maxReadsInFlight the reads under way at once: what the slices name
	// is a tenant's to write.
	maxReadPods      = 1024
	maxReadsInFlight = 32
	// maxReadsPerLookup bounds the pods one lookup has read: a Service
	// past the view's bounds is forwarded to at most that many of its
	// Ready addresses at a time.
	maxReadsPerLookup = 16
	// readPodFresh is how long a read vouches for a pod before it is
	// read again, in the background; readPodKeep how long a read is kept
	// at most, so a pod deleted and its address given to another is
	// vouched for by an old read for that long at worst, when the reads
	// that would say so fail.
	readPodFresh = 5 * time.Second
	readPodKeep  = 30 * time.Second
	// readRefusalPause is how long nothing is read after a read was
	// refused (podReads.refusals): once in that time a resolver
	// without get on pods tries, and one refused by an apiserver that was
	// starting reads again soon after.
	readRefusalPause = 10 * time.Second
)

// refusals is what the pod view and the pod reads remember of the
// apiserver refusing them (403 or 401): nothing is tried again for pause
// after the last refusal, and the first refusal is logged at the default
// level, the rest at 2.
type refusals struct {
	pause  time.Duration
	until  atomic.Int64 // Unix nanoseconds
	logged atomic.Bool
}

// refuse records a refusal at now and returns the level to log it at.
func (r *refusals) refuse(now time.Time) (level int) {
	r.until.Store(now.Add(r.pause).UnixNano())
	if r.logged.Swap(true) {
		return 2
	}
	return 0
}

// paused reports whether now is within the pause after the last refusal.
func (r *refusals) paused(now time.Time) bool { return now.UnixNano() < r.until.Load() }

// podReads vouches for the pods a Service's slices name when the pod
// view cannot (PodView.Read): one GET per pod, remembered, at most
// podReadRate a second per namespace.
type podReads struct {
	pods    PodGetter
	limits  NamespaceLimits
	changed func(ServiceRef)
	ctx     context.Context
	logger  klog.Logger
	clock   clock.PassiveClock
	// refusals pause the reads after one was refused: the resolver may
	// not read pods (an install from before the view), or the
	// apiserver's authorizer is still starting. Meanwhile nothing is
	// vouched for by a read, and nothing is read.
	refusals refusals

	mu       sync.Mutex
	read     *utilcache.LRUExpireCache // readKey -> readPod
	inFlight map[readKey]bool
	wg       sync.WaitGroup
}

// readKey is one pod as one selector sees it: a read says whether the
// selector selects the pod, so a Service that selects anew reads again.
type readKey struct{ namespace, name, selector string }

// readPod is a read's answer: the pod, trimmed to what vouches (nil when
// it does not exist, or the selector does not select it), and when.
type readPod struct {
	pod *corev1.Pod
	at  time.Time
}

func newPodReads(ctx context.Context, pods PodGetter, changed func(ServiceRef), logger klog.Logger, clk clock.PassiveClock) *podReads {
	r := &podReads{pods: pods, limits: NewNamespaceLimits(), changed: changed, ctx: ctx, logger: logger, clock: clk,
		read: utilcache.NewLRUExpireCacheWithClock(maxReadPods, clk), inFlight: map[readKey]bool{}}
	r.refusals.pause = readRefusalPause
	return r
}

// get returns the pods of names in svc's namespace that selector
// selects, as reads found them, and reads in the background those not
// read within readPodFresh; changed(svc) says when one is in. ok is false
// once the resolver may not read pods.
func (r *podReads) get(svc ServiceRef, selector string, names []string) (pods []*corev1.Pod, ok bool) {
	now := r.clock.Now()
	if r.refusals.paused(now) {
		return nil, false
	}
	for _, name := range names[:min(len(names), maxReadsPerLookup)] {
		key := readKey{namespace: svc.Namespace, name: name, selector: selector}
		v, known := r.read.Get(key)
		if known && v.(readPod).pod != nil {
			pods = append(pods, v.(readPod).pod)
		}
		if !known || now.Sub(v.(readPod).at) >= readPodFresh {
			r.start(svc, key)
		}
	}
	return pods, true
}

// start reads key's pod in the background unless a read of it is under
// way, or maxReadsInFlight are.
func (r *podReads) start(svc ServiceRef, key readKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inFlight[key] || len(r.inFlight) >= maxReadsInFlight || r.ctx.Err() != nil {
		return
	}
	r.inFlight[key] = true
	r.wg.Go(func() {
		defer func() {
			r.mu.Lock()
			delete(r.inFlight, key)
			r.mu.Unlock()
		}()
		if r.readOne(key) {
			r.changed(svc)
		}
	})
}

// readOne reads key's pod and remembers the answer; it reports whether
// it has one.
func (r *podReads) readOne(key readKey) bool {
	ctx, cancel := context.WithTimeout(r.ctx, PodReadTimeout)
	defer cancel()
	if err := r.limits.Limiter(key.namespace).Wait(ctx); err != nil {
		// Past the namespace's rate: the hold looks again (hold.wait).
		r.logger.V(4).Info("Pod read deferred: past its namespace's read rate", "pod", klog.KRef(key.namespace, key.name))
		return false
	}
	pod, err := r.pods.Pod(ctx, key.namespace, key.name)
	switch {
	case apierrors.IsNotFound(err):
		pod = nil
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		level := r.refusals.refuse(r.clock.Now())
		r.logger.V(level).Info("May not read pods; the addresses of Services past the pod view's bounds are taken from their EndpointSlices as they are for a while (grant get on pods)",
			"pause", readRefusalPause, "err", err)
		return true
	case err != nil:
		r.logger.V(2).Info("Could not read a pod to vouch for its address", "pod", klog.KRef(key.namespace, key.name), "err", err)
		return false
	}
	vouching := vouchingPod(pod, key.selector)
	r.read.Add(key, readPod{pod: vouching, at: r.clock.Now()}, readPodKeep)
	r.logger.V(4).Info("Read a pod to vouch for its addresses", "pod", klog.KRef(key.namespace, key.name), "vouches", vouching != nil)
	return true
}

// vouchingPod is pod as a read vouches for it: its name, UID, addresses
// and whether it is going away; nil when it does not exist or selector
// (a Service's, as labels.Set's String; "" for one the cache did not
// keep, maxCachedSelector) does not select it.
func vouchingPod(pod *corev1.Pod, selector string) *corev1.Pod {
	if pod == nil {
		return nil
	}
	if selector != "" {
		sel, err := labels.Parse(selector)
		if err != nil || !sel.Matches(labels.Set(pod.Labels)) {
			return nil
		}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, DeletionTimestamp: pod.DeletionTimestamp},
		Spec:       corev1.PodSpec{HostNetwork: pod.Spec.HostNetwork},
		Status:     corev1.PodStatus{Phase: pod.Status.Phase, PodIP: pod.Status.PodIP, PodIPs: pod.Status.PodIPs[:min(len(pod.Status.PodIPs), 2)]},
	}
}

// wait blocks until the reads under way are over (Close).
func (r *podReads) wait() { r.wg.Wait() }

// PodGetter reads one pod. The command's reads the apiserver.
type PodGetter interface {
	Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error)
}
