package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/portalloc"
)

// portStatus is what a sync found for status.resolverPorts and the
// ResolverPortsAssigned condition; writeStatus writes it with the rest of
// the status, in the same update.
type portStatus struct {
	assigned []elastiv1alpha1.ResolverPort
	// condition is ResolverPortsAssigned without its type and times; nil
	// removes the condition.
	condition *metav1.Condition
}

// noPorts clears both: the ElastiService fronts no Service (it is missing,
// or another ElastiService claims it), so there is nothing to assign.
var noPorts = &portStatus{}

// assignPorts gives every TCP port of public a resolver port (see
// pkg/portalloc), taking back what status recorded. It runs in serve mode
// too, so a resolver serving per-port routing is listening long before the
// Service is switched to it. The old Services of a move keep the ports
// they hold until they are let go of (move.go); public is nil while
// spec.service names no Service.
func (r *resolverFront) assignPorts(ctx context.Context, es *elastiv1alpha1.ElastiService, public *corev1.Service, old []leaving) *portStatus {
	var want []portalloc.Port
	names := map[portalloc.Port]string{}
	var services []*corev1.Service
	if public != nil {
		services = append(services, public)
	}
	for _, l := range old {
		services = append(services, l.svc)
	}
	for _, svc := range services {
		for _, p := range svc.Spec.Ports {
			if p.Protocol != "" && p.Protocol != corev1.ProtocolTCP {
				continue
			}
			want = append(want, portalloc.Port{Service: svc.Name, Port: p.Port})
			names[want[len(want)-1]] = p.Name
		}
	}
	recorded := make([]portalloc.Assignment, 0, len(es.Status.ResolverPorts))
	for _, rp := range es.Status.ResolverPorts {
		recorded = append(recorded, portalloc.Assignment{Service: rp.Service, Port: rp.Port, ResolverPort: rp.ResolverPort})
	}

	got, freed, err := r.ports.Assign(es.Key(), want, recorded)
	if freed {
		r.enqueuePortWaiters(ctx, es.Key())
	}
	if err != nil {
		// The messages name no free count, which moves with every other
		// ElastiService and would rewrite this status each time.
		reason := ReasonResolverPortRangeExhausted
		msg := fmt.Sprintf("--resolver-port-range %s has too few free ports for the TCP ports of Service %q (%d); "+
			"it is reached through Host routing on the resolver's proxy port %d until ports are freed or the range is widened",
			r.ports.Range(), es.Spec.Service, len(want), r.cfg.ResolverProxyPort)
		var quota *portalloc.QuotaError
		if errors.As(err, &quota) {
			reason = ReasonResolverPortQuotaExceeded
			if quota.PerNamespace {
				msg = fmt.Sprintf("namespace %q holds too many of its --resolver-ports-per-namespace %d for the TCP ports of Service %q (%d); "+
					"it is reached through Host routing on the resolver's proxy port %d until the namespace's other ElastiServices free ports",
					es.Namespace, quota.Limit, es.Spec.Service, len(want), r.cfg.ResolverProxyPort)
			} else {
				msg = fmt.Sprintf("Service %q has more TCP ports (%d) than --resolver-ports-per-elastiservice %d; "+
					"it is reached through Host routing on the resolver's proxy port %d",
					es.Spec.Service, len(want), quota.Limit, r.cfg.ResolverProxyPort)
			}
		}
		if !hasCondition(es, elastiv1alpha1.ConditionResolverPortsAssigned, metav1.ConditionFalse, reason) {
			klog.FromContext(ctx).V(2).Info("No resolver ports", "reason", reason, "range", r.ports.Range().String(),
				"service", klog.KRef(es.Namespace, es.Spec.Service), "err", err)
			r.recorder.Event(es, corev1.EventTypeWarning, reason, msg)
		}
		return &portStatus{condition: &metav1.Condition{Status: metav1.ConditionFalse, Reason: reason, Message: msg}}
	}

	ps := &portStatus{condition: &metav1.Condition{
		Status: metav1.ConditionTrue, Reason: elastiv1alpha1.ReasonResolverPortsAssigned,
		Message: fmt.Sprintf("Every TCP port of Service %q has a resolver port of its own (see status.resolverPorts)", es.Spec.Service),
	}}
	for _, a := range got {
		ps.assigned = append(ps.assigned, elastiv1alpha1.ResolverPort{
			Service: a.Service, Name: names[portalloc.Port{Service: a.Service, Port: a.Port}], Port: a.Port, ResolverPort: a.ResolverPort,
		})
	}
	if !slices.Equal(ps.assigned, es.Status.ResolverPorts) {
		klog.FromContext(ctx).V(2).Info("Assigned resolver ports", "service", klog.KRef(es.Namespace, es.Spec.Service),
			"resolverPorts", ps.assigned, "recorded", es.Status.ResolverPorts)
	}
	return ps
}

// releasePorts lets go of every port es holds, and lets in whoever waited.
func (r *resolverFront) releasePorts(ctx context.Context, es types.NamespacedName) {
	if r.ports.Release(es) {
		r.enqueuePortWaiters(ctx, es)
	}
}

// enqueuePortWaiters re-syncs the ElastiServices that found the range
// exhausted, since a port was freed; except the one that freed it.
func (r *resolverFront) enqueuePortWaiters(ctx context.Context, freedBy portalloc.Owner) {
	for _, w := range r.ports.Waiting() {
		if w != freedBy {
			klog.FromContext(ctx).V(4).Info("Resolver port freed; retrying a waiting ElastiService", "waiting", klog.KRef(w.Namespace, w.Name))
			r.queue.Add(w)
		}
	}
}

// perPortRoutes maps each port of service to the resolver port its slice
// port should name, or returns nil for Host routing on the proxy port. A port
// is routed per port only once status records it: the resolver learns its
// ports from status, so the slice never sends traffic to a port before a
// resolver can know of it. A port newly assigned in this sync goes through
// the proxy port until our status write comes back through the informer,
// which brings the ElastiService back here.
func perPortRoutes(es *elastiv1alpha1.ElastiService, ps *portStatus, service string, perPortRouting bool) map[int32]int32 {
	if !perPortRouting || ps == nil || len(ps.assigned) == 0 {
		return nil
	}
	routes := map[int32]int32{}
	for _, a := range ps.assigned {
		if a.Service != service {
			// During a move ps holds the old Service's ports too.
			continue
		}
		for _, r := range es.Status.ResolverPorts {
			if r.Service == a.Service && r.Port == a.Port && r.ResolverPort == a.ResolverPort {
				routes[a.Port] = a.ResolverPort
			}
		}
	}
	return routes
}

// seedResolverPorts rebuilds the port allocator from every ElastiService's
// status.resolverPorts, so a new leader (or a restarted operator) keeps
// every assignment its predecessors recorded. Run it before the workers
// start. Where two ElastiServices recorded the same port (after a restore
// from backup, say) the older one keeps it, then the first by
// namespace/name, so every replica decides the same; the other is given a
// new port when it syncs.
func (r *resolverFront) seedResolverPorts(ctx context.Context) {
	logger := klog.FromContext(ctx)
	all, err := r.elastiServices.List(labels.Everything())
	if err != nil {
		logger.Error(err, "Cannot list ElastiServices to seed the resolver ports")
		return
	}
	slices.SortFunc(all, func(a, b *elastiv1alpha1.ElastiService) int {
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			if a.CreationTimestamp.Before(&b.CreationTimestamp) {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	r.ports.Reset()
	for _, es := range all {
		recorded := make([]portalloc.Assignment, 0, len(es.Status.ResolverPorts))
		for _, rp := range es.Status.ResolverPorts {
			recorded = append(recorded, portalloc.Assignment{Service: rp.Service, Port: rp.Port, ResolverPort: rp.ResolverPort})
		}
		for _, l := range r.ports.Seed(es.Key(), recorded) {
			logger.V(2).Info("Recorded resolver port not kept; it will be reassigned",
				"elastiService", klog.KObj(es), "service", l.Service, "port", l.Port, "resolverPort", l.ResolverPort,
				"range", r.ports.Range().String())
		}
	}
	logger.V(2).Info("Resolver ports seeded", "inUse", r.ports.InUse(), "range", r.ports.Range().String())
}

// SeedResolverPorts rebuilds the port allocator from every
// ElastiService's status (see resolverFront.seedResolverPorts). Run it
// before the workers start.
func (c *Controller) SeedResolverPorts(ctx context.Context) { c.front.seedResolverPorts(ctx) }

// ResolverPorts reports how many resolver ports are held and how many the
// range has, for metrics.
func (c *Controller) ResolverPorts() (inUse, size int) {
	return c.front.ports.InUse(), c.front.ports.Range().Size()
}
