// Package resolver is the data plane that stands in for a target scaled to
// zero.
//
// While an ElastiService is in proxy mode the operator points the public
// Service's EndpointSlice at resolver pods. This is the one map of the
// layers a connection passes, and of the files that hold them:
//
//   - limit (connlimit.go): one bound on the client connections open on
//     every listener together.
//   - identify: which Service and port. On the shared proxy port the Host
//     names it, as a Service DNS name or ClusterIP ([Resolver.ServeHTTP],
//     identify.go, host.go). On a resolver port of its own (per-port
//     routing, the ports the operator records in status.resolverPorts) the
//     local port alone does ([PortListeners] in listeners.go, [RouteTable]
//     in routes.go).
//   - front (resolver.go, front.go, named.go): whether the resolver is in
//     front of that Service; a request for one it is not in front of is
//     answered 404, after a short grace when an ElastiService names it.
//     A probe rule (probes.go) answers a health checker while no pod is
//     Ready.
//   - admit (admit.go, wakerate.go): per-Service and global bounds on
//     what waits and the bytes it holds, and per client address a bound
//     on the wakes it starts.
//   - hold: one waiter per Service (hold.go) owns the loop asking the
//     operator to wake it (notify.go; coalesced, with capped exponential
//     backoff), woken by the EndpointSource the moment the Service's own
//     EndpointSlices list a Ready pod. The per-request step that admits,
//     joins and waits is holdHTTP (resolver.go) for HTTP and holdConn
//     (splice.go) for TCP.
//   - forward: HTTP reverse-proxied straight to a pod IP:port (proxy.go),
//     any other TCP spliced byte for byte (splice.go), both connecting
//     through connect.go's attempts.
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
