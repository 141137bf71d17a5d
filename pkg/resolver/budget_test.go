package resolver

import "testing"

// Held bodies share one memory budget; a body that does not fit streams
// instead of being buffered.
func TestHeldBodyBudget(t *testing.T) {
	r := &Resolver{cfg: DefaultConfig()}
	perBody := r.cfg.MaxBufferedBody
	for i := range r.cfg.MaxBufferedBodies / perBody {
		if !r.reserveBuffer(perBody) {
			t.Fatalf("reservation %d refused within the budget", i)
		}
	}
	if r.reserveBuffer(1) {
		t.Fatal("a reservation past the budget was granted")
	}
	r.buffered.Add(-perBody)
	if !r.reserveBuffer(perBody) {
		t.Fatal("released budget was not reusable")
	}
}
