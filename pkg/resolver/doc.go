// Package resolver is the data plane that stands in for a target scaled to
// zero.
//
// While an ElastiService is in proxy mode the operator points the public
// Service's EndpointSlice at resolver pods. The resolver parses the service
// from the request's Host, holds the request, asks the operator to scale the
// target up (coalesced per service, with capped exponential backoff), and the
// moment the private Service gains a Ready endpoint it forwards the held
// request straight to a pod IP:port. There is no DNS and no ClusterIP on the
// way: endpoints come from EndpointSlice and Service informers.
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
//   - [New]: the [Resolver], an http.Handler, plus [Resolver.Healthz] and
//     [Resolver.Readyz].
//   - [ConfigureServer]: enables HTTP/1.1 and h2c on the listening server.
package resolver
