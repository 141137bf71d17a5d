package workloop

import (
	"sync"

	"k8s.io/apimachinery/pkg/util/sets"
)

// urgentPerPlain is how many urgent keys go before a plain key while both
// wait. Urgent keys keep traffic flowing (a Service whose pods are gone
// needs the resolver in front now); plain ones are status writes and
// follow-ups. Urgent first across tenants: when another tool scaled 100
// namespaces of a fleet of 10,000 to zero, urgency inside a namespace's own
// turn left the last namespaces' fronting waiting behind every other
// namespace's status writes, and a Service dark for 9 s
// (docs/benchmarks/2026-11-21-fleet.md). A share for plain keys, not none:
// a namespace whose keys are all urgent and come back as fast as they are
// taken (a fleet at zero whose namespace's deletion removes its resolver
// slices) must not starve another namespace's first sync, as one urgent
// lane served before the plain one did (docs/development/ci.md, the 13:14
// failure). So a plain key waits at most urgentPerPlain urgent syncs for
// its lane's turn, and a namespace's urgent stream slows the others' plain
// keys by at most 1 + urgentPerPlain times.
const urgentPerPlain = 3

// lanes is a loop's queue storage: an urgent lane and a plain one. In each
// lane the tenants (namespaces, for the controller's queues) with keys
// waiting take turns, one key a turn, so a namespace with a thousand keys
// waiting costs another namespace's key one turn, not a thousand syncs;
// a tenant's keys keep their arrival order. The urgent lane goes first, up
// to urgentPerPlain keys for each plain one. The workqueue keeps its
// guarantees (a key is queued once and never synced twice at a time);
// lanes only choose which queued key goes next.
//
// The workqueue calls Push, Touch, Len and Pop under its own lock; mark
// comes from outside it, so the lanes have a lock of their own, always taken
// after the workqueue's and never held while calling out.
type lanes[T comparable] struct {
	mu       sync.Mutex
	tenantOf func(T) string
	marked   sets.Set[T] // to go in the urgent lane when pushed or touched
	inUrgent sets.Set[T] // waiting in the urgent lane
	urgent   turns[T]
	plain    turns[T]
	// Keys moved from plain to urgent by Touch are left in the plain lane,
	// where they sit ahead of any later copy, and skipped when reached:
	// moved counts them per key, stale in all.
	moved map[T]int
	stale int
	// urgentRun counts the urgent keys taken while plain ones waited since
	// the last plain key.
	urgentRun int
}

// turns is one lane: each tenant's waiting keys in arrival order, and the
// tenants in the order of their turns. It holds only tenants with a key
// waiting, so its map is bounded by the queue's own length.
type turns[T comparable] struct {
	keys  map[string][]T
	order []string // each tenant of keys once, the next to take its turn first
	n     int      // keys waiting, stale copies included
}

func newLanes[T comparable](tenantOf func(T) string) *lanes[T] {
	return &lanes[T]{
		tenantOf: tenantOf, marked: sets.New[T](), inUrgent: sets.New[T](),
		urgent: newTurns[T](), plain: newTurns[T](), moved: map[T]int{},
	}
}

func newTurns[T comparable]() turns[T] { return turns[T]{keys: map[string][]T{}} }

// mark makes the key's next push, or a touch while it waits, put it in the
// urgent lane.
func (l *lanes[T]) mark(key T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.marked.Insert(key)
}

func (l *lanes[T]) Push(key T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.marked.Has(key) {
		l.marked.Delete(key)
		l.toUrgent(key)
		return
	}
	l.plain.push(l.tenantOf(key), key)
}

// Touch is called for a key added again while it waits.
func (l *lanes[T]) Touch(key T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.marked.Has(key) {
		return
	}
	l.marked.Delete(key)
	if l.inUrgent.Has(key) {
		return
	}
	l.toUrgent(key)
	l.moved[key]++
	l.stale++
}

func (l *lanes[T]) toUrgent(key T) {
	l.urgent.push(l.tenantOf(key), key)
	l.inUrgent.Insert(key)
}

func (l *lanes[T]) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.urgent.n + l.plainWaiting()
}

// plainWaiting is the plain lane's keys, less the stale copies.
func (l *lanes[T]) plainWaiting() int { return l.plain.n - l.stale }

// Pop is only called when Len is above zero.
func (l *lanes[T]) Pop() T {
	l.mu.Lock()
	defer l.mu.Unlock()
	plain := l.plainWaiting()
	if plain == 0 && l.plain.n > 0 {
		// Only stale copies wait there: forget them now, or a key moved
		// again and again while no plain key waits would pile them up.
		l.plain, l.stale = newTurns[T](), 0
		clear(l.moved)
	}
	if l.urgent.n > 0 && (plain == 0 || l.urgentRun < urgentPerPlain) {
		if plain > 0 {
			l.urgentRun++
		}
		key := l.urgent.pop(func(T) bool { return false })
		l.inUrgent.Delete(key)
		return key
	}
	l.urgentRun = 0
	return l.plain.pop(l.dropIfStale)
}

// dropIfStale reports whether key, at the front of its tenant's plain
// keys, is a copy Touch left behind, and forgets that copy if so: a moved
// key's stale copy is ahead of any later copy of it, so a stale copy never
// costs its tenant a turn.
func (l *lanes[T]) dropIfStale(key T) bool {
	n := l.moved[key]
	if n == 0 {
		return false
	}
	if n == 1 {
		delete(l.moved, key)
	} else {
		l.moved[key] = n - 1
	}
	l.stale--
	return true
}

func (t *turns[T]) push(tenant string, key T) {
	keys, ok := t.keys[tenant]
	if !ok {
		t.order = append(t.order, tenant)
	}
	t.keys[tenant] = append(keys, key)
	t.n++
}

// pop takes the first key of the tenant whose turn it is, after the keys at
// its front that stale drops; a tenant with more waiting goes to the back
// of the order. It is only called with a key waiting that stale keeps.
func (t *turns[T]) pop(stale func(T) bool) T {
	for {
		name := popFront(&t.order)
		keys := t.keys[name]
		for len(keys) > 0 && stale(keys[0]) {
			popFront(&keys)
			t.n--
		}
		if len(keys) == 0 { // only stale copies waited
			delete(t.keys, name)
			continue
		}
		key := popFront(&keys)
		t.n--
		if len(keys) > 0 {
			t.keys[name] = keys
			t.order = append(t.order, name)
		} else {
			delete(t.keys, name)
		}
		return key
	}
}

func popFront[T any](s *[]T) T {
	key := (*s)[0]
	var zero T
	(*s)[0] = zero // let the backing array drop its reference
	*s = (*s)[1:]
	return key
}
