package kubectlelasti

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/directory"
	"github.com/elasti-dev/elasti/pkg/scaletarget"
)

// defaultWaitTimeout bounds --wait unless --timeout says otherwise.
const defaultWaitTimeout = 5 * time.Minute

// waitFlags are wake's and sleep's.
type waitFlags struct {
	wait    bool
	timeout time.Duration
}

func (w *waitFlags) bind(fs *pflag.FlagSet, what string) {
	fs.BoolVar(&w.wait, "wait", true, "Wait until "+what+", printing progress; by a watch, not by polling.")
	fs.DurationVar(&w.timeout, "timeout", defaultWaitTimeout, "How long --wait waits before giving up with an error.")
}

func (s *session) wakeCommand() *cobra.Command {
	var w waitFlags
	cmd := s.subcommand("wake NAME", "Scale an ElastiService's target up now, make-before-break", `Scales the target up through its scale subresource to spec.minTargetReplicas,
unless it already has that many, and resumes a KEDA ScaledObject the
scale-down paused, as a request's wake does. The operator takes it as any
scale-up from zero: the resolver stays in front until a pod is Ready, and
the cooldown starts. A sleep request still pending is withdrawn first.

Needs: get elastiservices; get and patch <kind>s/scale of the target;
patch elastiservices when a sleep request is pending; list and watch
elastiservices with --wait.

Examples:
  kubectl elasti wake web -n shop
  kubectl elasti wake web --wait=false
`, noName, func(ctx context.Context, c *Clients, args []string) error {
		name, err := oneName(args)
		if err != nil {
			return err
		}
		return s.app.wake(ctx, c, name, w)
	})
	w.bind(cmd.Flags(), "the operator serves from the target's pods (status.mode serve)")
	return cmd
}

func (a *App) wake(ctx context.Context, c *Clients, name string, w waitFlags) error {
	es, err := getElastiService(ctx, c, name)
	if err != nil {
		return err
	}
	ref := scaletarget.RefFor(es)
	direct := scaletarget.NewDirect(c.Kube, c.Dynamic)
	replicas, err := targetReplicas(ctx, direct, ref)
	if err != nil {
		return err
	}
	// A pending request would have the poller scale the target straight
	// back down if it is up already; a scale-up from zero ends one anyway.
	if _, pending := elastiv1alpha1.SleepRequest(es, lastWake(es)); pending {
		if err := patchSleepRequest(ctx, c, es, nil); err != nil {
			return err
		}
		fmt.Fprintf(a.Out, "elastiservice/%s: withdrew the pending sleep request\n", name)
	}
	want := directory.EntryFor(es).MinTargetReplicas
	if replicas >= want {
		fmt.Fprintf(a.Out, "elastiservice/%s: %s already has %d replicas\n", name, targetName(es), replicas)
	} else {
		err := scaletarget.Wake(ctx, direct, ref, want, es.Spec.Autoscaler)
		if !scaletarget.Woken(err) {
			return targetCall("patch", ref).explain(err)
		}
		if err != nil {
			fmt.Fprintf(a.Err, "warning: %v\n", err)
		}
		fmt.Fprintf(a.Out, "elastiservice/%s: scaled %s from %d to %d replicas\n", name, targetName(es), replicas, want)
	}
	if !w.wait {
		return nil
	}
	start := a.Now()
	err = a.waitFor(ctx, c, name, w.timeout, "serve", func(es *elastiv1alpha1.ElastiService, replicas int32) (bool, string) {
		return es.Status.Mode == elastiv1alpha1.ModeServe && replicas > 0, state(es, replicas)
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(a.Out, "elastiservice/%s is awake: serving from %s after %s\n", name, targetName(es), elapsed(a.Now().Sub(start)))
	return nil
}
