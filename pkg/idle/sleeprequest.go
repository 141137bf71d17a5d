package idle

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/outcome"
	"github.com/elasti-dev/elasti/pkg/scaletarget"
)

// sleepOnRequest honours a pending sleep request (`kubectl elasti sleep`,
// see AnnotationSleepRequestedAt) made at at: the target is idle now,
// whatever its triggers say and however much of its cooldown is left. The
// gates call it only inside the enabled period, for a managed target above
// zero, so the request changes what decides idleness and nothing else: the
// scale-down is the ordinary one, resolver in front first.
func (p *Poller) sleepOnRequest(ctx context.Context, es *elastiv1alpha1.ElastiService, ref scaletarget.Ref, at, now time.Time) outcome.Idle {
	result := p.scaleToZero(ctx, es, ref, now)
	if result == outcome.IdleScaledToZero {
		klog.FromContext(ctx).V(2).Info("Scaled to zero on request", "elastiService", klog.KObj(es), "target", ref.String(), "requestedAt", at)
		p.recorder.Eventf(es, corev1.EventTypeNormal, ReasonScaledToZero, "Sleep requested at %s: scaled %s %q to 0",
			at.UTC().Format(time.RFC3339), ref.Kind, ref.Name)
		p.sleepDependencies(ctx, es, now)
	}
	return result
}
