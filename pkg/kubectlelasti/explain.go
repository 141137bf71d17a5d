package kubectlelasti

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/directory"
	"github.com/elasti-dev/elasti/pkg/scaletarget"
	"github.com/elasti-dev/elasti/pkg/schedule"
)

func (s *session) explainCommand() *cobra.Command {
	return s.subcommand("explain NAME", "Say why an ElastiService is not sleeping, or not waking", `Reads the ElastiService and its target and lists what holds it where it is:
its conditions (Ready, TriggersEvaluated, ResolverPortsAssigned,
DependenciesReady), a pending
sleep request, spec.enabledPeriod, the cooldown left since the last wake,
and its triggers. The operator does not record the triggers' verdict, only
a failure to evaluate them: when nothing else blocks a sleep, the triggers
are above their thresholds.

Needs: get elastiservices; get <kind>s/scale of the target.

Examples:
  kubectl elasti explain web -n shop
`, noName, func(ctx context.Context, c *Clients, args []string) error {
		name, err := oneName(args)
		if err != nil {
			return err
		}
		es, err := getElastiService(ctx, c, name)
		if err != nil {
			return err
		}
		replicas, err := targetReplicas(ctx, scaletarget.NewDirect(c.Kube, c.Dynamic), scaletarget.RefFor(es))
		if err != nil {
			return err
		}
		Explain(s.app.Out, es, replicas, serverNow(c))
		return nil
	})
}

// Explain writes why es, whose target has replicas, is where it is at now.
func Explain(w io.Writer, es *elastiv1alpha1.ElastiService, replicas int32, now time.Time) {
	min := directory.EntryFor(es).MinTargetReplicas
	fmt.Fprintf(w, "Name:        %s\nNamespace:   %s\nService:     %s\n", es.Name, es.Namespace, es.Spec.Service)
	fmt.Fprintf(w, "Target:      %s at %d replicas (wakes to %d)\n", targetName(es), replicas, min)
	fmt.Fprintf(w, "Mode:        %s\n", orNone(es.Status.Mode))
	fmt.Fprintf(w, "State:       %s\n", stateOf(es, replicas))

	fmt.Fprintln(w, "\nConditions:")
	if len(es.Status.Conditions) == 0 {
		fmt.Fprintln(w, "  none yet: is an operator running and watching this namespace?")
	}
	for _, c := range es.Status.Conditions {
		fmt.Fprintf(w, "  %s=%s (%s) since %s: %s\n", c.Type, c.Status, c.Reason, agoText(c.LastTransitionTime.Time, now), c.Message)
	}

	if replicas > 0 {
		blockers, notes := sleepBlockers(es, now)
		if len(blockers) == 0 {
			fmt.Fprintln(w, "\nNothing but the triggers keeps it from sleeping:")
		} else {
			fmt.Fprintln(w, "\nWhy it is not sleeping:")
		}
		for _, b := range blockers {
			fmt.Fprintf(w, "  - %s\n", b)
		}
		for _, n := range notes {
			fmt.Fprintf(w, "  - %s\n", n)
		}
	} else {
		fmt.Fprintln(w, "\nWaking:")
		for _, b := range wakeBlockers(es) {
			fmt.Fprintf(w, "  - %s\n", b)
		}
	}

	fmt.Fprintln(w, "\nTriggers:")
	if len(es.Spec.Triggers) == 0 {
		fmt.Fprintln(w, "  none")
	}
	for i, t := range es.Spec.Triggers {
		fmt.Fprintf(w, "  %d. %s %s\n", i+1, t.Type, triggerText(t.Metadata))
	}
}

// stateOf names where es stands, from its mode and its target's replicas.
func stateOf(es *elastiv1alpha1.ElastiService, replicas int32) string {
	mode := es.Status.Mode
	switch {
	case es.DeletionTimestamp != nil:
		return "being deleted: the operator restores serving, then lets it go"
	case mode == "":
		return "not reconciled yet: is an operator running and watching this namespace?"
	case replicas > 0 && mode == elastiv1alpha1.ModeServe:
		return "awake: the Service routes to the target's pods"
	case replicas > 0:
		return "waking: the target is scaled up and the resolver holds requests until a pod is Ready"
	case mode == elastiv1alpha1.ModeProxy:
		return "asleep: the resolver is in front and the target at zero"
	}
	return "scaled to zero: the operator has not put the resolver in front yet"
}

// sleepBlockers lists what keeps es's target, which is up, from sleeping,
// in the order the operator's idle poller checks it, and notes on what
// does not block.
func sleepBlockers(es *elastiv1alpha1.ElastiService, now time.Time) (blockers, notes []string) {
	if es.DeletionTimestamp != nil {
		return []string{"it is being deleted"}, nil
	}
	if ready := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionReady); ready == nil || ready.Status != metav1.ConditionTrue {
		blockers = append(blockers, "not Ready"+conditionDetail(ready)+": the operator scales down only the ElastiServices it routes")
	}
	window, err := schedule.FromSpec(es.Spec.EnabledPeriod)
	switch {
	case err != nil:
		blockers = append(blockers, fmt.Sprintf("spec.enabledPeriod is invalid (%v): nothing is scaled down", err))
	case !window.Active(now):
		blockers = append(blockers, fmt.Sprintf("outside the enabled period %s: elasti holds the target up until it opens", window))
	case es.Spec.EnabledPeriod != nil:
		notes = append(notes, fmt.Sprintf("inside the enabled period %s", window))
	}
	if at, pending := elastiv1alpha1.SleepRequest(es, lastWake(es)); pending {
		notes = append(notes, fmt.Sprintf("a sleep request from %s is pending: the operator scales it down at its next poll, whatever the triggers and the cooldown say",
			agoText(at, now)))
		return blockers, notes
	}
	cooldown := time.Duration(es.Spec.CooldownPeriod) * time.Second
	if left := es.CreationTimestamp.Add(cooldown).Sub(now); left > 0 {
		blockers = append(blockers, fmt.Sprintf("cooldown: created %s, so %s of the %s cooldown remain", agoText(es.CreationTimestamp.Time, now), short(left), short(cooldown)))
	}
	if last := lastWake(es); !last.IsZero() {
		// The cooldown counts from the wake's first Ready pod once it has
		// one (the operator's idle poller does the same).
		from, what := last, "last woken"
		if served, ok := es.Status.WakeServedAt(); ok && served.After(last) {
			from, what = served, "the last wake's first pod Ready"
		}
		if left := from.Add(cooldown).Sub(now); left > 0 {
			blockers = append(blockers, fmt.Sprintf("cooldown: %s %s, so %s of the %s cooldown remain", what, agoText(from, now), short(left), short(cooldown)))
		} else {
			notes = append(notes, fmt.Sprintf("the cooldown (%s) since %s %s is over", short(cooldown), what, agoText(from, now)))
		}
		if es.Status.ColdStartUnderWay() {
			notes = append(notes, fmt.Sprintf("a wake is under way (woken %s, no Ready pod yet): it is not scaled down while the resolver holds a request for it", agoText(last, now)))
		}
	}
	if c := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionTriggersEvaluated); c != nil && c.Status != metav1.ConditionTrue {
		blockers = append(blockers, fmt.Sprintf("the triggers cannot be evaluated (%s: %s): a target is never scaled down on a failed evaluation", c.Reason, c.Message))
	}
	if len(es.Spec.Triggers) == 0 {
		blockers = append(blockers, "spec.triggers is empty: nothing ever finds it idle; only kubectl elasti sleep puts it to sleep")
	} else if len(blockers) == 0 {
		notes = append(notes, fmt.Sprintf("it sleeps once every trigger stays below its threshold for the cooldown (%s); until then, the triggers say it is busy", short(cooldown)))
	}
	return blockers, notes
}

// wakeBlockers says how es's target, at zero, wakes, and what would stop it.
func wakeBlockers(es *elastiv1alpha1.ElastiService) []string {
	var out []string
	if ready := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionReady); ready == nil || ready.Status != metav1.ConditionTrue {
		out = append(out, "not Ready"+conditionDetail(ready)+": a request may not reach the resolver, and nothing may wake the target")
	}
	if c := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionResolverPortsAssigned); c != nil && c.Status != metav1.ConditionTrue {
		out = append(out, fmt.Sprintf("no resolver port of its own (%s: %s): requests reach the resolver only by their Host header", c.Reason, c.Message))
	}
	if c := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionDependenciesReady); c != nil &&
		c.Status != metav1.ConditionTrue && c.Reason != elastiv1alpha1.ReasonGroupAsleep {
		out = append(out, fmt.Sprintf("its wake group waits on a dependency (%s: %s): the target is scaled only once every dependency in spec.wakeWith is Ready", c.Reason, c.Message))
	}
	if n := len(es.Spec.WakeWith); n > 0 {
		out = append(out, fmt.Sprintf("a wake first scales its %d dependencies in spec.wakeWith, in order, each Ready before the next", n))
	}
	if window, err := schedule.FromSpec(es.Spec.EnabledPeriod); err == nil && es.Spec.EnabledPeriod != nil {
		out = append(out, fmt.Sprintf("outside the enabled period %s the operator wakes it by itself", window))
	}
	out = append(out, fmt.Sprintf("the next request to Service %q wakes it, as does kubectl elasti wake %s", es.Spec.Service, es.Name))
	return out
}

// triggerText shows a trigger's metadata, but for headers, which may hold
// credentials.
func triggerText(raw json.RawMessage) string {
	var md map[string]any
	if err := json.Unmarshal(raw, &md); err != nil {
		return string(raw)
	}
	var parts []string
	for _, k := range []string{"query", "threshold", "serverAddress", "uptimeFilter"} {
		if v, ok := md[k]; ok {
			parts = append(parts, fmt.Sprintf("%s=%v", k, v))
		}
	}
	return strings.Join(parts, " ")
}

// agoText is "5m ago", or "in 5m" for a time ahead of now.
func agoText(t, now time.Time) string {
	if d := now.Sub(t); d >= 0 {
		return duration.HumanDuration(d) + " ago"
	}
	return "in " + duration.HumanDuration(t.Sub(now))
}

// short is a duration to the second.
func short(d time.Duration) string { return d.Round(time.Second).String() }
