package clusterview

import "k8s.io/utils/clock"

// SetDrainClock runs e's drains on clk, which the test moves. Call it
// before any resolver slice goes.
func SetDrainClock(e *InformerEndpoints, clk clock.Clock) { e.drains = newDrains(e.drains.drain, clk) }

// Draining reports whether e still counts the resolver in front of svc
// only because its slice went less than the drain ago.
func Draining(e *InformerEndpoints, svc ServiceRef) bool { return e.drains.draining(svc) }
