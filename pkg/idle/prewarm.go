package idle

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/elasti-dev/elasti/pkg/outcome"
	"github.com/elasti-dev/elasti/pkg/scaletarget"
)

// ReasonPreWarmed is the event of a wake in the pre-warm lead of
// enabledPeriod.
const ReasonPreWarmed = "PreWarmed"

// preWarm holds the target up in the lead before the window closes
// (schedule.Window.PreWarming): a target at zero is woken the way every
// wake is (scaletarget.Wake: scale, then resume KEDA), and the controller
// keeps the resolver in front until a pod is Ready, as for a request.
// Inside the lead the window is still open, so without this the poller
// would leave a sleeping target asleep, and scale an awake one down, until
// the window closed.
func (p *Poller) preWarm(ctx context.Context, f *facts) outcome.Idle {
	es, ref, window, closes := f.es, f.ref, f.window, f.closes
	if f.replicas > 0 {
		return outcome.IdlePreWarm
	}
	wake := scaletarget.GoalFor(p.scaler, ref, f.minReplicas, es.Spec.Autoscaler).Replicas
	err := scaletarget.Wake(ctx, p.scaler, ref, wake, es.Spec.Autoscaler)
	if !scaletarget.Woken(err) {
		p.recorder.Eventf(es, corev1.EventTypeWarning, ReasonScaleFailed, "Pre-warming before the enabled period closes failed: %v", err)
		return outcome.IdleScaleFailed
	}
	if err != nil {
		p.recorder.Eventf(es, corev1.EventTypeWarning, ReasonScaleFailed, "Pre-warmed, but resuming KEDA failed: %v", err)
	}
	klog.FromContext(ctx).V(2).Info("Pre-warmed before the enabled period closes", "elastiService", klog.KObj(es),
		"target", ref.String(), "closes", closes)
	p.recorder.Eventf(es, corev1.EventTypeNormal, ReasonPreWarmed, "The enabled period closes at %s (%s): scaled %s %q to %d",
		closes.UTC().Format(time.RFC3339), window, ref.Kind, ref.Name, wake)
	return outcome.IdlePreWarm
}
