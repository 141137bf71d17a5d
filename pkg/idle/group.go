package idle

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/group"
	"github.com/elasti-dev/elasti/pkg/scaletarget"
)

// ReasonDependencyScaledToZero is the event of a dependency put to sleep
// after its group's target.
const ReasonDependencyScaledToZero = "DependencyScaledToZero"

func (p *Poller) wakePending(es *elastiv1alpha1.ElastiService) bool {
	return p.wakes.Pending(es.Key(), &es.Status)
}

// awake reports whether es counts as awake for a dependency it shares: its
// target is above zero (or cannot be read, so nothing is assumed), a wake
// of its group is under way, or it is being deleted (its finalizer brings
// the whole group back up).
func (p *Poller) awake(es *elastiv1alpha1.ElastiService) bool {
	if es.DeletionTimestamp != nil {
		return true
	}
	state, err := p.scaler.Get(scaletarget.RefFor(es))
	return err != nil || state.Replicas > 0 || p.wakePending(es)
}

// sleepDependencies scales es's dependencies to zero once its target is
// asleep, last first, each only if no other ElastiService of the namespace
// keeps it (group.Keeper): one that names it too and is awake, or one whose
// target it is, which alone decides when it sleeps. sleptAt is the scale to
// zero the poller just made, or zero for a target found asleep; a wake
// recorded since, or under way, leaves the group alone. Failures are
// events and are retried at the next poll, which finds the target asleep.
func (p *Poller) sleepDependencies(ctx context.Context, es *elastiv1alpha1.ElastiService, sleptAt time.Time) {
	if len(es.Spec.WakeWith) == 0 {
		return
	}
	if sleptAt.IsZero() && p.wakePending(es) || !sleptAt.IsZero() && p.lastWake(es).After(sleptAt) {
		return
	}
	logger := klog.FromContext(ctx).WithValues("elastiService", klog.KObj(es))
	all, err := p.lister.ElastiServices(es.Namespace).List(labels.Everything())
	if err != nil {
		logger.Error(err, "Cannot list the namespace's ElastiServices; leaving the dependencies up")
		return
	}
	var peers []group.Peer
	for _, other := range all {
		if other.Name != es.Name {
			peers = append(peers, group.PeerOf(other, p.awake(other)))
		}
	}
	members := group.Members(es.Namespace, es.Spec.WakeWith, p.scaler.Get)
	for i := len(members) - 1; i >= 0; i-- {
		m := members[i]
		if m.Err != nil || m.Replicas == 0 {
			continue
		}
		if why := group.Keeper(m.Ref, peers); why != "" {
			logger.V(4).Info("Dependency stays up", "dependency", m.Ref.String(), "because", why)
			continue
		}
		if err := p.scaler.Scale(ctx, m.Ref, 0); err != nil {
			p.recorder.Eventf(es, corev1.EventTypeWarning, ReasonScaleFailed, "Scaling dependency %s %q to zero failed: %v", m.Ref.Kind, m.Ref.Name, err)
			return
		}
		logger.V(2).Info("Scaled a dependency to zero", "dependency", m.Ref.String())
		p.recorder.Eventf(es, corev1.EventTypeNormal, ReasonDependencyScaledToZero, "The target is asleep: scaled dependency %s %q to 0", m.Ref.Kind, m.Ref.Name)
	}
}
