package kubectlelasti

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/scaletarget"
)

func notFound(name string) error {
	return apierrors.NewNotFound(elastiv1alpha1.Resource("elastiservices"), name)
}

// getElastiService reads name in the command's namespace.
func getElastiService(ctx context.Context, c *Clients, name string) (*elastiv1alpha1.ElastiService, error) {
	es, err := c.Elasti.ElastiV1alpha1().ElastiServices(c.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, apiCall{verb: "get", resource: "elastiservices", kind: "elastiservice", name: name, namespace: c.Namespace}.explain(err)
	}
	return es, nil
}

// targetCall is the API call verb makes on ref's scale subresource.
func targetCall(verb string, ref scaletarget.Ref) apiCall {
	kind := strings.ToLower(ref.Kind)
	return apiCall{verb: verb, resource: kind + "s/scale", kind: kind, name: ref.Name, namespace: ref.Namespace}
}

// targetReplicas reads the target's replicas from its scale subresource.
func targetReplicas(ctx context.Context, d *scaletarget.Direct, ref scaletarget.Ref) (int32, error) {
	r, err := d.Replicas(ctx, ref)
	return r, targetCall("get", ref).explain(err)
}

// patchSleepRequest sets (at non-nil) or removes es's sleep request.
func patchSleepRequest(ctx context.Context, c *Clients, es *elastiv1alpha1.ElastiService, at *time.Time) error {
	value := "null"
	if at != nil {
		value = fmt.Sprintf("%q", at.UTC().Format(time.RFC3339))
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%s}}}`, elastiv1alpha1.AnnotationSleepRequestedAt, value)
	_, err := c.Elasti.ElastiV1alpha1().ElastiServices(es.Namespace).Patch(ctx, es.Name, "application/merge-patch+json", patch,
		metav1.PatchOptions{FieldManager: FieldManager})
	return apiCall{verb: "patch", resource: "elastiservices", kind: "elastiservice", name: es.Name, namespace: es.Namespace}.explain(err)
}

// serverNow is the apiserver's clock as c estimates it.
func serverNow(c *Clients) time.Time {
	if c.ServerNow == nil {
		return time.Now()
	}
	return c.ServerNow()
}

// waitFor reads name until done says so, printing each new state it
// reports, for at most timeout. The reads run under ctx, not the timeout:
// a read cut short by the deadline would report the cut instead of what
// the wait saw last.
func (a *App) waitFor(ctx context.Context, c *Clients, name string, timeout time.Duration, goal string,
	done func(es *elastiv1alpha1.ElastiService, replicas int32) (bool, string)) error {
	direct := scaletarget.NewDirect(c.Kube, c.Dynamic)
	start := a.Now()
	last := ""
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	ticker := time.NewTicker(a.PollInterval)
	defer ticker.Stop()
	for {
		es, err := getElastiService(ctx, c, name)
		if err != nil {
			return err
		}
		replicas, err := targetReplicas(ctx, direct, scaletarget.RefFor(es))
		if err != nil {
			return err
		}
		ok, state := done(es, replicas)
		if state != last {
			fmt.Fprintf(a.Out, "  %s: %s\n", elapsed(a.Now().Sub(start)), state)
			last = state
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("timed out after %s waiting for elastiservice %q to %s (last seen: %s); see kubectl elasti explain %s -n %s",
				timeout, name, goal, last, name, c.Namespace)
		case <-ticker.C:
		}
	}
}

// state is one line of --wait's progress.
func state(es *elastiv1alpha1.ElastiService, replicas int32) string {
	return fmt.Sprintf("mode %s, %s at %d replicas", orNone(es.Status.Mode), targetName(es), replicas)
}

// targetName is Kind/name of es's target.
func targetName(es *elastiv1alpha1.ElastiService) string {
	t := es.Spec.ScaleTargetRef.Canonical()
	return t.Kind + "/" + t.Name
}

func elapsed(d time.Duration) string { return d.Round(100 * time.Millisecond).String() }
