// Package controller is the operator's control loop. Four rate-limited
// queues, each drained by its own workers, turn informer events into
// ElastiService syncs:
//
//   - ElastiService keys: the sync itself (finalizer, proxy/serve mode,
//     status, and in front of a Service the resolver EndpointSlice with
//     the private Service it needs).
//   - scale-target keys (Deployment, StatefulSet, Rollout): mapped to the
//     ElastiServices that name them through an index, as their target or
//     as a dependency in spec.wakeWith.
//   - Service keys from EndpointSlice events: a public Service's endpoints
//     decide the mode; the resolver's endpoints feed every proxy slice.
//   - ElastiService keys whose private Service is wanted: created apart
//     from the sync, since a Service create (its ClusterIP allocation) can
//     take seconds on a loaded apiserver and must not hold up the switches.
//
// All watches are shared and cluster- (or --watch-namespace-) wide, so the
// number of watches does not grow with the number of ElastiServices.
//
// # Names
//
// One name for each concept, here and in the packages around it:
//
//   - key: an ElastiService's types.NamespacedName, always es.Key().
//   - mode: proxy (the resolver is in front of the Service: its resolver
//     slice routes the traffic) or serve (the target's pods take it alone).
//   - claim, claimant: the directory maps each Service to the one
//     ElastiService that drives it, its claimant; another that names the
//     same Service is in conflict. (The resolver's "hold" is something
//     else: a request held until the target wakes.)
//   - wake: scaling a target up from zero, always through scaletarget.Wake.
//     The resolver asks for one through pkg/wakeserver; the controller
//     wakes for a move, the finalizer restores the target before delete.
//   - handoff: a scale to zero by the idle poller, which waits until the
//     resolver is in front (make before break).
//   - fence: pods of a scale-down whose endpoints still look ready; they
//     are not trusted to serve.
//   - move: a change of spec.service; the old Services are leaving, first
//     fronted, then draining.
//   - readiness checks: the not-Ready exits of a sync, each the reason and
//     message of the Ready condition.
//   - resolver ports: one resolver port per Service port, for per-port
//     routing.
//   - group: an ElastiService's dependencies (spec.wakeWith), in order,
//     then its target. A group wake scales them one at a time, each
//     Ready before the next (pkg/group decides; the wake server takes the
//     first step, the controller the rest, on each dependency's events);
//     the idle poller sleeps the dependencies after the target.
//
// # Files
//
//   - controller.go: [Controller], [New], the queues and informer handlers.
//   - index.go: the informer indexes.
//   - sync.go: the ElastiService sync in three steps, after
//     kube-controller-manager's controllers: gather every fact from the
//     caches once, plan, apply; then one status write (statusWriter.record).
//   - plan.go: the plan, pure functions of the facts: how far a sync goes
//     (its stage) and what its status says.
//   - readiness.go: the facts, and the readiness checks in the order a
//     sync meets them.
//   - status.go, statuswriter.go: the statusWriter, the Ready condition
//     and mode-switch events.
//   - front.go: the resolverFront, which the next three files make up.
//   - collaborators.go: the Controller's other parts (groupWaker,
//     podLiveness, claimer).
//   - claims.go: claims and claimants, and the directory
//     ([Controller.PrimeDirectory], [Controller.Manages]).
//   - finalize.go: the finalizer, which restores the target before delete.
//   - move.go: moves, and waking the target for one.
//   - handoff.go: the scale-down handoff with the idle poller
//     ([Controller.FrontForScaleDown]).
//   - live.go, fence.go: whether ready endpoints may be trusted to serve.
//   - selector.go: the selector checks, refusing a Service that does not
//     select the target's pods.
//   - resolverslice.go: the resolver EndpointSlice in front of a Service.
//   - privateservice.go: the private Service and its queue.
//   - ports.go: resolver ports.
//   - ownership.go: owner references on generated objects, and deleting
//     those left behind.
//   - targetsync.go, slicesync.go: the scale-target and EndpointSlice
//     queues, mapping their events to ElastiServices.
//   - group.go: the next step of a group wake, the DependenciesReady
//     condition, and the dependencies a deletion or release restores.
//
// A new not-Ready exit is a check in readiness.go; a new reaction to an
// object's events starts in controller.go's handlers or the two *sync.go
// queues; a new generated object needs an owner reference (ownership.go)
// and a place in the operator's cache trim (pkg/operator).
package controller
