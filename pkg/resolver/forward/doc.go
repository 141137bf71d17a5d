// Package forward is the forward layer: it sends a request or a
// connection whose Service has a Ready endpoint on to a pod, HTTP
// reverse-proxied (proxy.go) and other TCP spliced byte for byte
// (splice.go), both through the one connect strategy (connect.go:
// connect rounds over the endpoints as they are now, each connect given
// a fresh attempt soon when a SYN is lost). It holds nothing: what it is
// given has somewhere to go.
package forward
