// Package resolver is the data plane that stands in for a target scaled to
// zero.
//
// While an ElastiService is in proxy mode the operator points the public
// Service's EndpointSlice at resolver pods. A connection passes four
// layers, each in its own file with one owner:
//
//   - identify (identify.go, listeners.go): which Service and port. On a
//     resolver port of its own (per-port routing, the ports the operator
//     records in status.resolverPorts, see [RouteTable] and
//     [PortListeners]) the local port alone names it; on the shared proxy
//     port the Host does, as a Service DNS name or ClusterIP.
//   - admit (admit.go, wakerate.go): per-Service and global bounds on
//     what waits, and per client address a bound on the wakes it starts.
//   - hold (hold.go): one waiter per Service that owns the loop asking the
//     operator to wake it (coalesced, with capped exponential backoff),
//     woken by the EndpointSource the moment the Service's own
//     EndpointSlices list a Ready pod.
//   - forward (proxy.go, splice.go, connect.go): HTTP reverse-proxied
//     straight to a pod IP:port, or any other TCP spliced byte for byte.
//
// There is no DNS and no ClusterIP on the way: endpoints come from
// EndpointSlice and Service informers.
//
// A held request's body is read into memory before it waits when its
// Content-Length is at most 64 KiB: only then does Go's HTTP/1.1 server
// notice a client that disconnects, freeing the slot at once, and only then
// can the body be resent if connecting to the first pod fails. Larger and
// chunked bodies are not buffered; they stream to the pod once it is
// Ready, and a client that leaves while such a request is held keeps its
// slot until the request timeout.
//
// The pieces the command wires together are:
//
//   - [Config] and [DefaultConfig]: timeouts, queue bounds, operator URL.
//   - [NewInformerEndpoints]: an [EndpointSource] fed by shared Service and
//     EndpointSlice informers.
//   - [NewProbeIndex]: a [ProbeMatcher] fed by the ElastiService informer.
//   - [NewInformerRouteTable] and [NewPortListeners]: the resolver ports.
//   - [New]: the [Resolver], an http.Handler, plus [Resolver.Healthz] and
//     [Resolver.Readyz].
//   - [NewServer]: an HTTP/1.1 and h2c server for proxied traffic.
package resolver
