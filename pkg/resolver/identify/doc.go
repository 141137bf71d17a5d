// Package identify is the identify layer: which Service and port a
// request or connection is for. On the shared proxy port the Host names
// it, as a Service DNS name or a ClusterIP (Hosts, ParseHost); on a
// resolver port of its own, the ports the operator records in
// status.resolverPorts (RouteTable), the local port alone does
// (PortListeners, which also tell HTTP from other TCP). What is
// identified is served by the resolver, given to the listeners as a
// Server.
package identify
