package directprobe

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/elasti-dev/elasti/pkg/podcheck"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
)

// planOrErr is what a direct probe checks, the pod's own probes (read
// from the pod view or else the apiserver, once per pod and address), or
// why it cannot check them; Prober.plans remembers it.
type planOrErr struct {
	plan *podcheck.Plan
	err  error
}

// podAt is a pod, by UID and name, at one address: what a probe target
// and a plan are for. A plan checks the pod at the address it was made
// for, which its pod's status said was its own; keyed by UID alone, a
// forged endpoint naming a genuine pod at another address reused that
// pod's plan, passed its checks, and had the held requests sent to the
// forged address (issue 38, hole 2), and the two endpoints restarted each
// other's probe on every look.
type podAt struct {
	uid types.UID
	pod string
	ip  string
}

// plan returns the checks of ep's pod at ep's address, made once per pod
// and address, from the pod view's copy of the pod or else a read.
func (p *Prober) plan(ctx context.Context, svc clusterview.ServiceRef, ep clusterview.UnreadyEndpoint) (*podcheck.Plan, error) {
	key := podAtOf(ep)
	if v, ok := p.plans.Get(key); ok {
		got := v.(planOrErr)
		return got.plan, got.err
	}
	if pod := p.viewPod(svc, ep); pod != nil {
		return p.planFor(key, pod, ep)
	}
	namespace := svc.Namespace
	if err := p.readLimits.Limiter(namespace).Wait(ctx); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &podcheck.FallbackError{Reason: FallbackPodUnreadable, Detail: "pod reads of the namespace past their rate: " + err.Error()}
	}
	rctx, cancel := context.WithTimeout(ctx, clusterview.PodReadTimeout)
	pod, err := p.pods.Pod(rctx, namespace, ep.Pod)
	cancel()
	if err != nil {
		// Not the pod's fault (the hold ended, the apiserver failed, the
		// resolver lacks the right): remember nothing, so the next hold
		// reads it again.
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &podReadError{err}
	}
	return p.planFor(key, pod, ep)
}

// planFor makes and remembers the checks of pod at ep's address.
func (p *Prober) planFor(key podAt, pod *corev1.Pod, ep clusterview.UnreadyEndpoint) (*podcheck.Plan, error) {
	plan, err := podcheck.PlanFor(pod, podcheck.Endpoint(ep))
	if errors.Is(err, podcheck.ErrNotStarted) {
		return nil, err // the next read may show the container running
	}
	// A plan's notBefore stays that of the container's first start: a
	// container that restarts before it passes may be checked before its
	// new initialDelaySeconds are over, by its own probe.
	p.plans.Add(key, planOrErr{plan, err}, podPlanTTL)
	return plan, err
}

// viewPod returns ep's pod as the pod view has it, with its spec, or nil.
func (p *Prober) viewPod(svc clusterview.ServiceRef, ep clusterview.UnreadyEndpoint) *corev1.Pod {
	if p.view == nil {
		return nil
	}
	pods, _ := p.view.Pods(svc)
	for _, pod := range pods {
		if pod.Name == ep.Pod && pod.UID == ep.UID && pod.Annotations[clusterview.SpecDroppedAnnotation] == "" {
			return pod
		}
	}
	return nil
}

// nextPause is the pause before ep's pod is read again: doubling up to
// podRereadMax, as reads cost the apiserver, but podRereadInitial while
// the pod view has the pod, whose copy is read for free and kept up to
// date by its watch.
func (p *Prober) nextPause(svc clusterview.ServiceRef, ep clusterview.UnreadyEndpoint, pause time.Duration) time.Duration {
	if p.viewPod(svc, ep) != nil {
		return podRereadInitial
	}
	return min(2*pause, podRereadMax)
}

// podReadError is a failed read of a pod. One that may pass if tried
// again (a timeout, the apiserver throttling or failing, a lost
// connection) is tried again while the hold lasts; one that will not (the
// pod is gone, the resolver may not read pods) leaves the pod to the
// kubelet's Ready (FallbackPodUnreadable).
type podReadError struct{ err error }

func (e *podReadError) Error() string { return "reading the pod: " + e.err.Error() }
func (e *podReadError) Unwrap() error { return e.err }

// readAgain reports whether the probe reads its pod again after err: its
// container is not shown running yet (podcheck.ErrNotStarted), or the
// read failed in a way that may pass.
func readAgain(err error) bool {
	if errors.Is(err, podcheck.ErrNotStarted) {
		return true
	}
	var re *podReadError
	if !errors.As(err, &re) {
		return false
	}
	return !apierrors.IsNotFound(re.err) && !apierrors.IsForbidden(re.err) && !apierrors.IsUnauthorized(re.err)
}
