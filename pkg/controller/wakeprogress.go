package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/wakestage"
)

// ReasonWakeStage: a waking target's pods reached a new stage (package
// wakestage: waiting for a node, pulling its image, started but not
// ready...), or a problem keeps them in one (a Warning then: Unschedulable,
// ImagePullBackOff, CrashLoopBackOff...). The Woke event ends the wake.
const ReasonWakeStage = "WakeStage"

const (
	// stageRecheck is how often a waking ElastiService's pods are read for
	// their stage. The events are for people reading kubectl describe;
	// the waiting page follows the resolver's own view of the pods.
	stageRecheck = 2 * time.Second
	// stageReadsPerSecond bounds the pod lists of every wake together: a
	// wake of a thousand Services at once reads their stages less often,
	// never the apiserver harder.
	stageReadsPerSecond = 20
	// maxStagePods bounds the pods one read lists: a wake from zero starts
	// a few.
	maxStagePods = 100
	// maxStageEvents bounds the events of one wake: a pod that crashes in
	// a loop flips between two stages on every restart.
	maxStageEvents = 10
	// stageReadTimeout bounds one list.
	stageReadTimeout = 5 * time.Second
)

// wakeProgress follows waking targets' pods and records an event each time
// their stage changes, the same stages the waiting page and kubectl elasti
// status show. The operator watches no pods (that would cost a cache of
// every pod in every namespace it serves), so it lists a waking Service's
// pods, each wake every stageRecheck at most, while the wake lasts.
type wakeProgress struct {
	kubeClient kubernetes.Interface
	recorder   record.EventRecorder
	queue      delayingAdder
	clock      clock.PassiveClock
	reads      flowcontrol.RateLimiter
	forbidden  sync.Once

	mu sync.Mutex
	// seen is what the last read of each waking ElastiService's pods
	// found; an entry is dropped when its wake ends or its ElastiService
	// goes, so it holds no more entries than there are ElastiServices.
	seen map[types.NamespacedName]stageSeen
	// noList is set once pods cannot be listed (no RBAC for it): the
	// wakes then have only their Woke event.
	noList bool
}

// delayingAdder queues a key after a delay: the ElastiService queue.
type delayingAdder interface {
	AddAfter(key types.NamespacedName, d time.Duration)
}

type stageSeen struct {
	// wake is when the wake the entry belongs to began.
	wake    time.Time
	readAt  time.Time
	stage   wakestage.Stage
	problem string
	events  int
}

func newWakeProgress(kube kubernetes.Interface, recorder record.EventRecorder, queue delayingAdder, clk clock.PassiveClock) *wakeProgress {
	return &wakeProgress{
		kubeClient: kube, recorder: recorder, queue: queue, clock: clk,
		reads: flowcontrol.NewTokenBucketRateLimiter(stageReadsPerSecond, stageReadsPerSecond),
		seen:  map[types.NamespacedName]stageSeen{},
	}
}

// observe reads the stage of es's waking pods, those svc selects, unless
// it read them less than stageRecheck ago, records an event when the stage
// changed, and queues es again so the next stage is seen without any event
// of the pods themselves. It is called for an ElastiService in proxy mode
// whose target is scaled up from a sleep.
func (w *wakeProgress) observe(ctx context.Context, es *elastiv1alpha1.ElastiService, svc *corev1.Service) {
	key := es.Key()
	now := w.clock.Now()
	wake := now
	if t := es.Status.LastScaledUpTime; es.Status.Waking() {
		wake = t.Time
	}
	w.mu.Lock()
	if w.noList || len(svc.Spec.Selector) == 0 {
		w.mu.Unlock()
		return
	}
	s, ok := w.seen[key]
	if !ok || (es.Status.Waking() && !s.wake.Equal(wake)) {
		s = stageSeen{wake: wake}
	}
	if wait := s.readAt.Add(stageRecheck).Sub(now); wait > 0 {
		w.mu.Unlock()
		w.queue.AddAfter(key, wait)
		return
	}
	w.mu.Unlock()
	defer w.queue.AddAfter(key, stageRecheck)
	if !w.reads.TryAccept() {
		return
	}
	p, err := w.read(ctx, es.Namespace, svc.Spec.Selector)
	if err != nil {
		w.readFailed(ctx, err)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	s.readAt = now
	if (p.Stage != s.stage || p.Problem != s.problem) && p.Stage != wakestage.Ready && s.events < maxStageEvents {
		s.events++
		eventType := corev1.EventTypeNormal
		if p.Problem != "" {
			eventType = corev1.EventTypeWarning
		}
		w.recorder.Event(es, eventType, ReasonWakeStage, stageMessage(p, now, s.wake))
	}
	s.stage, s.problem = p.Stage, p.Problem
	w.seen[key] = s
}

// stageMessage says p for a person: "Waking: pulling its image (for 4s,
// 6s into the wake)".
func stageMessage(p wakestage.Progress, now, wake time.Time) string {
	msg := "Waking: " + p.Stage.Words()
	if p.Problem != "" {
		msg += ": " + p.Problem
	}
	if p.Restarts > 0 {
		msg += fmt.Sprintf(", %d restarts", p.Restarts)
	}
	into := now.Sub(wake).Round(time.Second)
	if !p.Since.IsZero() {
		return msg + fmt.Sprintf(" (for %s, %s into the wake)", now.Sub(p.Since).Round(time.Second), into)
	}
	return msg + fmt.Sprintf(" (%s into the wake)", into)
}

// read lists the pods selector selects in namespace, at most maxStagePods,
// and returns how far the furthest is.
func (w *wakeProgress) read(ctx context.Context, namespace string, selector map[string]string) (wakestage.Progress, error) {
	ctx, cancel := context.WithTimeout(ctx, stageReadTimeout)
	defer cancel()
	list, err := w.kubeClient.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(selector).String(), Limit: maxStagePods})
	if err != nil {
		return wakestage.Progress{}, err
	}
	pods := make([]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		pods[i] = &list.Items[i]
	}
	return wakestage.Of(pods), nil
}

// readFailed logs a failed read. Without the right to list pods no wake
// will have its stages; that is said once, and no list is tried again.
func (w *wakeProgress) readFailed(ctx context.Context, err error) {
	logger := klog.FromContext(ctx)
	if apierrors.IsForbidden(err) {
		w.forbidden.Do(func() {
			logger.Info("Cannot list pods, so wakes get no WakeStage events; grant the operator list on pods", "err", err)
		})
		w.mu.Lock()
		w.noList = true
		w.mu.Unlock()
		return
	}
	logger.V(2).Info("Reading the wake's stage failed", "err", err)
}

// forget drops what is remembered of key's wake: it ended, or its
// ElastiService is gone.
func (w *wakeProgress) forget(key types.NamespacedName) {
	w.mu.Lock()
	delete(w.seen, key)
	w.mu.Unlock()
}
