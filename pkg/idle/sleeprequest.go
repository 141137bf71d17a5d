package idle

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/scaletarget"
)

// sleepOnRequest honours a pending sleep request (`kubectl elasti sleep`,
// see AnnotationSleepRequestedAt): the target is idle now, whatever its
// triggers say and however much of its cooldown is left. It is called
// only inside the enabled period, for a managed target above zero, so the
// request changes what decides idleness and nothing else: the scale-down
// is the ordinary one, resolver in front first. It reports whether a
// request was pending, and if so the outcome.
func (p *Poller) sleepOnRequest(ctx context.Context, es *elastiv1alpha1.ElastiService, ref scaletarget.Ref, now time.Time) (string, bool) {
	at, pending := elastiv1alpha1.SleepRequest(es, p.lastWake(es))
	if !pending {
		return "", false
	}
	outcome := p.scaleToZero(ctx, es, ref, now)
	if outcome == OutcomeScaledToZero {
		klog.FromContext(ctx).V(2).Info("Scaled to zero on request", "elastiService", klog.KObj(es), "target", ref.String(), "requestedAt", at)
		p.recorder.Eventf(es, corev1.EventTypeNormal, ReasonScaledToZero, "Sleep requested at %s: scaled %s %q to 0",
			at.UTC().Format(time.RFC3339), ref.Kind, ref.Name)
	}
	return outcome, true
}
