package kubectlelasti

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/scaletarget"
	"github.com/elasti-dev/elasti/pkg/schedule"
)

func (s *session) sleepCommand() *cobra.Command {
	var w waitFlags
	cmd := s.subcommand("sleep NAME", "Have the operator scale an ElastiService's target to zero now, make-before-break", `Does not scale the target itself: it asks the operator to, by stamping the
ElastiService with the annotation `+elastiv1alpha1.AnnotationSleepRequestedAt+`.
At its next poll the operator treats the target as idle, whatever its
triggers say and however much cooldown is left, and scales it down its
usual way: the resolver in front of the Service first, then the target to
zero. The request holds only until the next scale-up from zero, and only
inside spec.enabledPeriod (outside it elasti keeps the target up, so sleep
refuses). It needs an operator that honours it (this release or later).

Needs: get elastiservices; patch elastiservices; get <kind>s/scale; list
and watch elastiservices with --wait.

Examples:
  kubectl elasti sleep web -n shop
  kubectl elasti sleep web --timeout=2m
`, noName, func(ctx context.Context, c *Clients, args []string) error {
		name, err := oneName(args)
		if err != nil {
			return err
		}
		return s.app.sleep(ctx, c, name, w)
	})
	w.bind(cmd.Flags(), "the resolver is in front (status.mode proxy) and the target is at 0 replicas")
	return cmd
}

func (a *App) sleep(ctx context.Context, c *Clients, name string, w waitFlags) error {
	es, err := getElastiService(ctx, c, name)
	if err != nil {
		return err
	}
	window, err := schedule.FromSpec(es.Spec.EnabledPeriod)
	if err != nil {
		return fmt.Errorf("elastiservice %q has an invalid spec.enabledPeriod, so the operator scales nothing down: %v", name, err)
	}
	if now := serverNow(c); !window.Active(now) {
		return fmt.Errorf("elastiservice %q is outside its enabled period %s: elasti keeps its target up until the window opens", name, window)
	}
	direct := scaletarget.NewDirect(c.Kube, c.Dynamic)
	replicas, err := targetReplicas(ctx, direct, scaletarget.RefFor(es))
	if err != nil {
		return err
	}
	if replicas == 0 && es.Status.Mode == elastiv1alpha1.ModeProxy {
		fmt.Fprintf(a.Out, "elastiservice/%s is asleep already: %s at 0 replicas, the resolver in front\n", name, targetName(es))
		return nil
	}
	if ready := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionReady); ready == nil || ready.Status != metav1.ConditionTrue {
		fmt.Fprintf(a.Err, "warning: elastiservice %q is not Ready%s: the operator scales it down only once it is\n", name, conditionDetail(ready))
	}
	// The apiserver's time, rounded up: the request is newer than any
	// wake the operator stamped before it was made.
	at := serverNow(c).Add(time.Second)
	if err := patchSleepRequest(ctx, c, es, &at); err != nil {
		return err
	}
	fmt.Fprintf(a.Out, "elastiservice/%s: sleep requested; at its next poll the operator puts the resolver in front, then scales %s to 0\n", name, targetName(es))
	if !w.wait {
		return nil
	}
	start := a.Now()
	err = a.waitFor(ctx, c, name, w.timeout, "sleep", func(es *elastiv1alpha1.ElastiService, replicas int32) (bool, string) {
		return es.Status.Mode == elastiv1alpha1.ModeProxy && replicas == 0, state(es, replicas)
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(a.Out, "elastiservice/%s is asleep: the resolver in front, %s at 0 replicas after %s\n", name, targetName(es), elapsed(a.Now().Sub(start)))
	return nil
}

// conditionDetail is " (Reason: message)" for c, or nothing.
func conditionDetail(c *metav1.Condition) string {
	if c == nil {
		return " (no Ready condition yet)"
	}
	return fmt.Sprintf(" (%s: %s)", c.Reason, c.Message)
}
