package workloop

import (
	"slices"
	"testing"
)

// drain takes every waiting key in the order workers would get them, each
// marked done at once.
func drain(t *testing.T, l *Loop[string]) []string {
	t.Helper()
	var got []string
	for l.Len() > 0 {
		key, quit := l.queue.Get()
		if quit {
			t.Fatal("queue shut down")
		}
		got = append(got, key)
		l.queue.Done(key)
	}
	return got
}

func TestUrgentKeysGoFirstInTheirOrder(t *testing.T) {
	l, _ := newTestLoop(t, noSync)
	l.Add("a")
	l.AddUrgent("u1")
	l.Add("b")
	l.AddUrgent("u2")
	if got, want := drain(t, l), []string{"u1", "u2", "a", "b"}; !slices.Equal(got, want) {
		t.Errorf("order = %v, want %v", got, want)
	}
}

func TestUrgentAddOfAWaitingKeyMovesItOnce(t *testing.T) {
	l, _ := newTestLoop(t, noSync)
	for _, k := range []string{"a", "b", "c"} {
		l.Add(k)
	}
	l.AddUrgent("b")
	l.AddUrgent("b") // already in the urgent lane: stays where it is
	l.Add("b")
	if n := l.Len(); n != 3 {
		t.Fatalf("Len = %d, want 3 (a key waits once)", n)
	}
	if got, want := drain(t, l), []string{"b", "a", "c"}; !slices.Equal(got, want) {
		t.Errorf("order = %v, want %v", got, want)
	}
}

// A key moved to the urgent lane leaves a copy behind in the normal one; a
// later plain add of the same key must come after the keys that were
// ahead of it then, and only once.
func TestKeyAddedAgainAfterAMoveIsSyncedOnce(t *testing.T) {
	l, _ := newTestLoop(t, noSync)
	l.Add("a")
	l.Add("b")
	l.AddUrgent("a")
	key, _ := l.queue.Get()
	if key != "a" {
		t.Fatalf("first key = %q, want a", key)
	}
	l.queue.Done(key)
	l.Add("a")
	l.Add("c")
	if got, want := drain(t, l), []string{"b", "a", "c"}; !slices.Equal(got, want) {
		t.Errorf("order = %v, want %v", got, want)
	}
}

// An urgent add while the key is being synced makes its next sync urgent.
func TestUrgentAddDuringASyncCountsForTheNext(t *testing.T) {
	l, _ := newTestLoop(t, noSync)
	l.Add("a")
	key, _ := l.queue.Get()
	l.Add("b")
	l.AddUrgent("a")
	l.queue.Done(key)
	if got, want := drain(t, l), []string{"a", "b"}; !slices.Equal(got, want) {
		t.Errorf("order = %v, want %v", got, want)
	}
}
