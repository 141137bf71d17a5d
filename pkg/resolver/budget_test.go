package resolver

import "testing"

// Held bodies share one memory budget; a body that does not fit streams
// instead of being buffered.
func TestHeldBodyBudget(t *testing.T) {
	r := &Resolver{}
	for i := range maxBufferedBodies / maxBufferedBody {
		if !r.reserveBuffer(maxBufferedBody) {
			t.Fatalf("reservation %d refused within the budget", i)
		}
	}
	if r.reserveBuffer(1) {
		t.Fatal("a reservation past the budget was granted")
	}
	r.buffered.Add(-maxBufferedBody)
	if !r.reserveBuffer(maxBufferedBody) {
		t.Fatal("released budget was not reusable")
	}
}
