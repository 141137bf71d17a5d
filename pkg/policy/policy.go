// Package policy evaluates decisions written as chains of small functions,
// after cert-manager's certificate trigger policies: each function reads
// the facts gathered so far and returns nil to let the caller go on, or a
// verdict that ends it. The controller's readiness checks and the idle
// poller's gates are such chains.
package policy

// Chain is evaluated in order; the first verdict wins.
type Chain[F, V any] []func(F) *V

// First returns the first verdict of c on facts, or nil when every
// function lets the caller go on.
func (c Chain[F, V]) First(facts F) *V {
	for _, decide := range c {
		if v := decide(facts); v != nil {
			return v
		}
	}
	return nil
}
