package clusterview

import (
	"fmt"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// The broadcaster's entry for a key lives while it has a watch: stop in
// any order, twice, or after a broadcast, and the map is empty; a stop of
// an old watch does not remove a newer one.
func TestBroadcasterCountsItsWatches(t *testing.T) {
	b := NewBroadcaster[string]()
	_, stop1 := b.Watch("a")
	ch2, stop2 := b.Watch("a")
	if n := b.watching(); n != 1 {
		t.Fatalf("two watches of one key: %d keys, want 1", n)
	}
	stop1()
	stop1()
	if n := b.watching(); n != 1 {
		t.Fatalf("one watch left (the first stopped twice): %d keys, want 1", n)
	}
	b.Broadcast("a")
	select {
	case <-ch2:
	default:
		t.Fatal("broadcast did not close the watch's channel")
	}
	ch3, stop3 := b.Watch("a")
	stop2() // the watch from before the broadcast
	if n := b.watching(); n != 1 {
		t.Fatalf("a stale stop removed a newer watch: %d keys, want 1", n)
	}
	stop3()
	if n := b.watching(); n != 0 {
		t.Fatalf("every watch stopped: %d keys, want 0", n)
	}
	select {
	case <-ch3:
		t.Fatal("a stopped watch's channel was closed without a broadcast")
	default:
	}
}

// The drain map holds a Service from the moment the resolver leaves its
// front until the drain ends, and is swept by the next leave after that.
func TestDrainsAreSwept(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	d := newDrains(time.Minute, clk)
	svc := func(i int) ServiceRef { return ServiceRef{Namespace: "team", Name: fmt.Sprintf("svc-%d", i)} }
	for i := range 1000 {
		d.leave(svc(i))
	}
	clk.Step(time.Minute - time.Nanosecond)
	if !d.draining(svc(0)) {
		t.Fatal("the first resolvertest.Service no longer drains before the drain ended")
	}
	clk.Step(time.Nanosecond)
	if d.draining(svc(0)) || d.draining(svc(999)) {
		t.Fatal("a resolvertest.Service still drains after the drain")
	}
	d.leave(svc(1000))
	if n := d.left.Len(); n != 1 {
		t.Fatalf("%d Services remembered after the others' drains ended, want the one that just left", n)
	}
}
