// Package resolver is the data plane that stands in for a target scaled to
// zero.
//
// While an ElastiService is in proxy mode the operator points the public
// Service's EndpointSlice at resolver pods. There is no DNS and no
// ClusterIP on the way: endpoints come from EndpointSlice and Service
// informers.
//
// # Layers and files
//
// This is the one map of the layers a connection passes, in order, and of
// the packages and files that hold them. This package is the assembly:
// resolver.go holds only the order of the layers, serveService and
// holdRequest for HTTP, serveConn for TCP, and each layer is a package of
// its own below it (docs/development/layout.md draws them).
//
//   - limit (connlimit.go, pkg/connlimit): one bound on the client
//     connections open on every listener together, and one per client
//     address. server.go builds the HTTP server, its HTTP/2 streams capped
//     to what the request budget holds.
//   - identify (package identify): which Service and port. On the shared
//     proxy port the Host names it, as a Service DNS name or ClusterIP
//     (identify.go, host.go; ServeHTTP in server.go). On a resolver port
//     of its own (the ports the operator records in status.resolverPorts)
//     the local port alone does (listeners.go, which tells HTTP from other
//     TCP with sniff.go, and routes.go); the listeners serve through the
//     resolver (server.go: NewPortListeners).
//   - charge (package admission; what a request costs, cost.go): every
//     HTTP request, held or not, is charged to the request budget, within
//     its namespace's share, until it is answered; past it 503.
//   - front (package clusterview: front.go, named.go): whether the
//     resolver is in front of that Service; one it is not in front of is
//     answered 404, after a short grace when an ElastiService names it.
//   - endpoints (package clusterview: endpoints.go, informer_endpoints.go,
//     backends.go, trim.go): a Service's Ready pod addresses, and a
//     channel closed when they change, each address vouched for by the
//     pod that holds it (podview.go, podreads.go, vouch.go).
//   - probe (package proberules; answered by package answer, answer.go):
//     while no pod is Ready, a health checker's request matching a probe
//     rule is answered without waking the target.
//   - hold (package hold): Try (try.go) is the one hold step of HTTP and
//     TCP. It admits (package admission: per-Service, per-namespace,
//     per-client and global bounds, and per client a bound on the wakes it
//     starts), joins the Service's waiter (hold.go), whose wake loop
//     (wakeloop.go) asks the operator to wake the Service (wake.go;
//     coalesced, with capped exponential backoff), and waits for a Ready
//     endpoint, or, with direct probing (package directprobe, which runs
//     package podcheck's checks), for a starting pod that passes its own
//     readiness probes, run by the resolver; the operator is told how long
//     the released ones waited (heldreport.go). HTTP reads a small body in
//     first (body.go, where body buffering is explained); a browser
//     navigation for a Service with the waiting page on leaves the hold
//     after a delay (waitpage.go) with that page (package answer,
//     waitpage.go). A Service's own spec.hold sets how long and how many
//     are held, and what a client past them is told (holdbounds.go).
//   - forward (package forward): HTTP reverse-proxied to a pod IP:port
//     (proxy.go), other TCP spliced byte for byte (splice.go), both through
//     the one connect strategy (connect.go: connect rounds over the
//     endpoints as they are now). A request or connection whose Service's
//     Ready pods all went away before one accepted it is held after all
//     (rehold.go).
//
// What the resolver answers itself (400, 404, 429, 502, 503, 504, the
// probe rules' answers and the waiting page) is package answer. health.go
// answers /healthz and /readyz, config.go holds the settings and their
// defaults and hands each layer its own, and metrics.go names each
// layer's metrics and registers them; each layer declares its own
// (its metrics.go).
//
// Imports point one way, down: clusterview imports none of the others;
// admission, proberules and directprobe import only clusterview; answer
// imports those below it but directprobe; forward imports answer (a 502
// is one of its answers) and admission (its metrics' protocol labels);
// hold (admission, directprobe) and identify (forward, answer) import
// neither the other; this package imports them
// all. A layer that calls up is given what it calls at construction, as
// an interface or a func: identify serves through an identify.Server,
// hold wakes through Options.Wake.
//
// # Names
//
// One name per concept, in code, logs and comments:
//
//   - wake: asking the operator to scale a Service's target up, as
//     pkg/wakeapi names it: hold.WakeClient, the holder's wake loop,
//     Metrics.Hold.WakeRequests. The wire path
//     (/informer/incoming-request), the metric
//     elasti_resolver_operator_notifications_total, flags and env vars keep
//     their names: they are contracts.
//   - hold: a request or connection waiting for a Ready endpoint. The
//     holder (hold.Holder) is the hold layer and nothing else; a waiter is
//     one Service's entry in it; a hold is one request's or connection's
//     place there.
//   - admission, slot, refusal: the bounds on what is held (package
//     admission).
//   - in front: the operator's resolver EndpointSlice points the Service at
//     the resolver. named: an ElastiService names the Service.
//   - route: a resolver port and the Service port it stands for.
//   - connect rounds: the retries over a Service's endpoints (package
//     forward, connect.go).
//   - forward: HTTP to a pod; splice: TCP to a pod.
//
// # Wiring
//
// The pieces the command wires together are:
//
//   - [Config] and [DefaultConfig]: timeouts, queue bounds, operator URL.
//   - [clusterview.NewInformerEndpoints]: a [clusterview.EndpointSource]
//     fed by shared Service and EndpointSlice informers, and
//     [clusterview.NewInformerPodView], the pods of the Services held.
//   - [proberules.NewIndex]: a [proberules.Matcher] fed by the ElastiService informer.
//   - [clusterview.NewNamedIndex]: which Services an ElastiService names,
//     and what a wake group's wake waits on ([clusterview.NamedIndex.WaitingOn]).
//   - [identify.NewInformerRouteTable] and [Resolver.NewPortListeners]:
//     the resolver ports.
//   - [New]: the [Resolver], an http.Handler, plus [Resolver.Healthz] and
//     [Resolver.Readyz].
//   - [Resolver.NewServer]: an HTTP/1.1 and h2c server for proxied traffic.
package resolver
