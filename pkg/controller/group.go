package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/directory"
	"github.com/elasti-dev/elasti/pkg/group"
	"github.com/elasti-dev/elasti/pkg/scaletarget"
)

// Event reasons of a group wake (spec.wakeWith).
const (
	// ReasonDependencyScaled: a dependency was scaled up, its turn in the
	// group's order come.
	ReasonDependencyScaled = "DependencyScaled"
	// ReasonDependencyScaleFailed: scaling a dependency up failed; the
	// sync is retried.
	ReasonDependencyScaleFailed = "DependencyScaleFailed"
	// ReasonGroupTargetWoken: every dependency became Ready, and the
	// target was scaled up.
	ReasonGroupTargetWoken = "GroupTargetWoken"
)

// groupConditionKey carries a sync's DependenciesReady condition from
// advanceGroup to writeStatus, as targetObservationKey does the target.
type groupConditionKey struct{}

// wakePending reports whether a wake of es's group is under way.
func (g *groupWaker) wakePending(es *elastiv1alpha1.ElastiService) bool {
	return g.replicas.Pending(es.Key(), &es.Status)
}

// advanceGroup carries a wake of es's group on by one step: the group is
// wanted up while its target is above zero or a wake is under way (the
// wake server recorded one). Then the first dependency below what it wants
// is scaled, once every one before it is Ready, and the target once all
// are; each step's scale brings an informer event, and with it the next
// step. It never scales anything down (the idle poller sleeps the
// dependencies, after the target). It returns ctx carrying the
// DependenciesReady condition for the sync's status write, and the error
// of a failed scale, which the caller returns after routing, so the key is
// retried with backoff.
func (g *groupWaker) advanceGroup(ctx context.Context, es *elastiv1alpha1.ElastiService, target scaletarget.State) (context.Context, error) {
	if len(es.Spec.WakeWith) == 0 {
		return ctx, nil
	}
	logger := klog.FromContext(ctx)
	members := group.Members(es.Namespace, es.Spec.WakeWith, g.scaler.Get)
	step := group.Next(members)
	wanted := target.Replicas > 0 || g.wakePending(es)
	cond := metav1.Condition{Type: elastiv1alpha1.ConditionDependenciesReady}
	var err error
	switch {
	case !wanted:
		cond.Status, cond.Reason = metav1.ConditionFalse, elastiv1alpha1.ReasonGroupAsleep
		cond.Message = "The target is asleep and no wake is under way; the next request wakes the dependencies in order"
	case step.Action == group.WakeTarget:
		cond.Status, cond.Reason = metav1.ConditionTrue, elastiv1alpha1.ReasonDependenciesReady
		cond.Message = fmt.Sprintf("All %d dependencies have their replicas ready", len(members))
		if target.Replicas == 0 {
			err = g.wakeGroupTarget(ctx, es)
		}
	default:
		cond.Status, cond.Reason = metav1.ConditionFalse, elastiv1alpha1.ReasonDependencyNotReady
		if step.Action == group.Missing {
			cond.Reason = elastiv1alpha1.ReasonDependencyMissing
		}
		cond.Message = "Waking in order, the target waits: " + group.Blocking(members, step)
		if step.Action == group.ScaleUp {
			m := members[step.Index]
			if err = g.scaler.Scale(ctx, m.Ref, m.Wanted); err != nil {
				g.recorder.Eventf(es, corev1.EventTypeWarning, ReasonDependencyScaleFailed, "Scaling dependency %s %q up failed: %v", m.Ref.Kind, m.Ref.Name, err)
			} else {
				logger.V(2).Info("Scaled up a dependency", "dependency", m.Ref.String(), "replicas", m.Wanted, "position", step.Index+1)
				g.recorder.Eventf(es, corev1.EventTypeNormal, ReasonDependencyScaled, "Scaled dependency %d of %d, %s %q, to %d",
					step.Index+1, len(members), m.Ref.Kind, m.Ref.Name, m.Wanted)
			}
		}
	}
	return context.WithValue(ctx, groupConditionKey{}, cond), err
}

// wakeGroupTarget scales the target of a group whose dependencies are all
// Ready (see scaletarget.Wake for the error policy).
func (g *groupWaker) wakeGroupTarget(ctx context.Context, es *elastiv1alpha1.ElastiService) error {
	ref := scaletarget.RefFor(es)
	replicas := scaletarget.GoalFor(g.scaler, ref, directory.EntryFor(es).MinTargetReplicas, es.Spec.Autoscaler).Replicas
	err := scaletarget.Wake(ctx, g.scaler, ref, replicas, es.Spec.Autoscaler)
	if !scaletarget.Woken(err) {
		return err
	}
	klog.FromContext(ctx).V(2).Info("Dependencies ready: scaled up the target", "target", ref.String(), "replicas", replicas)
	g.recorder.Eventf(es, corev1.EventTypeNormal, ReasonGroupTargetWoken, "All %d dependencies are ready: scaled %s %q to %d",
		len(es.Spec.WakeWith), ref.Kind, ref.Name, replicas)
	return err
}

// setGroupCondition is writeStatus's hook: it sets the DependenciesReady
// condition the sync decided on, or removes it from an ElastiService
// without dependencies.
func (w *statusWriter) setGroupCondition(ctx context.Context, es *elastiv1alpha1.ElastiService, next *elastiv1alpha1.ElastiServiceStatus) {
	if len(es.Spec.WakeWith) == 0 {
		meta.RemoveStatusCondition(&next.Conditions, elastiv1alpha1.ConditionDependenciesReady)
		return
	}
	cond, ok := ctx.Value(groupConditionKey{}).(metav1.Condition)
	if !ok {
		return
	}
	cond.ObservedGeneration = es.Generation
	cond.LastTransitionTime = metav1.NewTime(w.clock.Now())
	meta.SetStatusCondition(&next.Conditions, cond)
}

// restoreDependencies scales every dependency of es below what it wants up
// to it, in list order, without waiting: an ElastiService that lets go
// (deletion, uninstall) leaves its whole group up, as it leaves its target.
func (g *groupWaker) restoreDependencies(ctx context.Context, es *elastiv1alpha1.ElastiService) error {
	for _, m := range group.Members(es.Namespace, es.Spec.WakeWith, g.scaler.Get) {
		if m.Err != nil || m.Replicas >= m.Wanted {
			continue // a missing dependency has nothing to restore
		}
		if err := g.scaler.Scale(ctx, m.Ref, m.Wanted); err != nil {
			return err
		}
		klog.FromContext(ctx).V(2).Info("Restored dependency", "dependency", m.Ref.String(), "replicas", m.Wanted)
		g.recorder.Eventf(es, corev1.EventTypeNormal, ReasonTargetRestored,
			"Scaled dependency %s %q to %d replicas before elasti lets go of it", m.Ref.Kind, m.Ref.Name, m.Wanted)
	}
	return nil
}
