package resolver

import "testing"

// A request held again after every earlier one was released, while the
// notification loop still waits between POSTs, must wake that loop: the
// target went back to zero and the operator has to hear of it at once.
func TestHoldAfterAllReleasedKicksTheWaitingNotifier(t *testing.T) {
	q := newHoldQueue(10, 100)
	svc := ServiceRef{Namespace: "shop", Name: "web"}
	if _, start := q.acquire(svc); !start {
		t.Fatal("the first hold must start a notifier")
	}
	kick := q.kicks(svc)
	q.release(svc) // the target woke; the loop is still waiting out its timer

	if _, start := q.acquire(svc); start {
		t.Fatal("a notifier still runs; a second must not start")
	}
	select {
	case <-kick:
	default:
		t.Fatal("the waiting notifier was not kicked")
	}

	// While requests are held, more holds do not kick: the loop re-asks
	// on its own schedule.
	q.acquire(svc)
	select {
	case <-kick:
		t.Fatal("a hold while others are held kicked the notifier")
	default:
	}
}

func TestKicksOfAnUnknownServiceNeverFire(t *testing.T) {
	q := newHoldQueue(10, 100)
	if ch := q.kicks(ServiceRef{Namespace: "a", Name: "b"}); ch != nil {
		t.Fatalf("kicks of an unknown service = %v, want nil", ch)
	}
}
