package kubectlelasti

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

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

// waitFor follows name by a watch until done says so, printing each new
// state it reports, for at most timeout. Each change of the ElastiService
// reads its target's scale once: the operator writes the status when the
// target's replicas change, so no change goes unseen. Those reads run
// under ctx, not the timeout: a read cut short by the deadline would
// report the cut instead of what the wait saw last.
func (a *App) waitFor(ctx context.Context, c *Clients, name string, timeout time.Duration, goal string,
	done func(es *elastiv1alpha1.ElastiService, replicas int32) (bool, string)) error {
	direct := scaletarget.NewDirect(c.Kube, c.Dynamic)
	start := a.Now()
	last := ""
	see := func(es *elastiv1alpha1.ElastiService) (bool, error) {
		replicas, err := targetReplicas(ctx, direct, scaletarget.RefFor(es))
		if err != nil {
			return false, err
		}
		ok, state := done(es, replicas)
		if state != last {
			fmt.Fprintf(a.Out, "  %s: %s\n", elapsed(a.Now().Sub(start)), state)
			last = state
		}
		return ok, nil
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	list := func(ctx context.Context) (string, bool, error) {
		l, err := listElastiServices(ctx, c, c.Namespace, name)
		if err != nil {
			return "", false, err
		}
		for i := range l.Items {
			if ok, err := see(&l.Items[i]); ok || err != nil {
				return "", ok, err
			}
		}
		if len(l.Items) == 0 {
			return "", false, apiCall{kind: "elastiservice", name: name, namespace: c.Namespace}.explain(notFound(name))
		}
		return l.ResourceVersion, false, nil
	}
	err := followElastiServices(wctx, c, c.Namespace, name, list, func(t watch.EventType, es *elastiv1alpha1.ElastiService) (bool, error) {
		if t == watch.Deleted {
			return false, fmt.Errorf("elastiservice %q was deleted while waiting for it to %s", name, goal)
		}
		return see(es)
	})
	if err != nil && ctx.Err() == nil && wctx.Err() != nil {
		return fmt.Errorf("timed out after %s waiting for elastiservice %q to %s (last seen: %s); see kubectl elasti explain %s -n %s",
			timeout, name, goal, last, name, c.Namespace)
	}
	return err
}

// listElastiServices lists the ElastiServices in ns (every namespace when
// empty), only name's when it is not empty.
func listElastiServices(ctx context.Context, c *Clients, ns, name string) (*elastiv1alpha1.ElastiServiceList, error) {
	opts := metav1.ListOptions{}
	if name != "" {
		opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	}
	l, err := c.Elasti.ElastiV1alpha1().ElastiServices(ns).List(ctx, opts)
	if err != nil {
		return nil, apiCall{verb: "list", resource: "elastiservices", namespace: ns}.explain(err)
	}
	if name != "" {
		// The selector is the server's filter; this is for a server (or a
		// fake) that ignores it.
		l.Items = slices.DeleteFunc(l.Items, func(es elastiv1alpha1.ElastiService) bool { return es.Name != name })
	}
	return l, nil
}

// followElastiServices calls list, then watches the ElastiServices in ns
// (only name's when not empty) from the version list returned, calling
// handle with each change until list or handle returns true or an error,
// or ctx ends. A watch the server closes is resumed from the last version
// seen; one too old to resume (410 Gone) starts over with list, as a
// reflector does.
func followElastiServices(ctx context.Context, c *Clients, ns, name string,
	list func(context.Context) (resourceVersion string, done bool, err error),
	handle func(watch.EventType, *elastiv1alpha1.ElastiService) (bool, error)) error {
	rv, done, err := list(ctx)
	if done || err != nil {
		return err
	}
	opts := metav1.ListOptions{AllowWatchBookmarks: true}
	if name != "" {
		opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	}
	for {
		opts.ResourceVersion = rv
		began := time.Now()
		w, err := c.watcher().ElastiV1alpha1().ElastiServices(ns).Watch(ctx, opts)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return apiCall{verb: "watch", resource: "elastiservices", namespace: ns}.explain(err)
		}
		var gone bool
		rv, gone, done, err = drainWatch(ctx, w, rv, name, handle)
		w.Stop()
		if done || err != nil {
			return err
		}
		if gone {
			if rv, done, err = list(ctx); done || err != nil {
				return err
			}
		}
		// A server that closes every watch at once is not asked again
		// in a tight loop.
		if time.Since(began) < time.Second {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Second):
			}
		}
	}
}

// drainWatch hands w's events to handle until the watch ends, and returns
// the last resource version seen, and whether it is too old to watch from.
func drainWatch(ctx context.Context, w watch.Interface, rv, name string,
	handle func(watch.EventType, *elastiv1alpha1.ElastiService) (bool, error)) (string, bool, bool, error) {
	for {
		var ev watch.Event
		var open bool
		select {
		case <-ctx.Done():
			return rv, false, false, ctx.Err()
		case ev, open = <-w.ResultChan():
		}
		if !open {
			return rv, false, false, nil
		}
		if ev.Type == watch.Error {
			err := apierrors.FromObject(ev.Object)
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				return rv, true, false, nil
			}
			return rv, false, false, apiCall{verb: "watch", resource: "elastiservices"}.explain(err)
		}
		es, ok := ev.Object.(*elastiv1alpha1.ElastiService)
		if !ok {
			continue
		}
		if es.ResourceVersion != "" {
			rv = es.ResourceVersion
		}
		if ev.Type == watch.Bookmark || (name != "" && es.Name != name) {
			continue
		}
		if done, err := handle(ev.Type, es); done || err != nil {
			return rv, false, done, err
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
