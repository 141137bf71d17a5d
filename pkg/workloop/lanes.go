package workloop

import (
	"sync"

	"k8s.io/apimachinery/pkg/util/sets"
)

// lanes is a loop's queue storage. Tenants (namespaces, for the
// controller's queues) with keys waiting take turns, one key a turn: a
// namespace with a thousand keys waiting costs another namespace's key one
// turn, not a thousand syncs. Within a tenant's turn its keys marked
// urgent go before its others, each kind in arrival order. Urgency orders
// a tenant's own keys only: a namespace whose keys are all urgent (a fleet
// at zero whose resolver slices its deletion removes) must not starve
// another namespace's first sync, as one lane for all tenants before the
// other did (docs/development/ci.md, the 13:14 failure). The workqueue
// keeps its guarantees (a key is queued once and never synced twice at a
// time); lanes only choose which queued key goes next.
//
// The workqueue calls Push, Touch, Len and Pop under its own lock; mark
// comes from outside it, so the lanes have a lock of their own, always taken
// after the workqueue's and never held while calling out.
type lanes[T comparable] struct {
	mu       sync.Mutex
	tenantOf func(T) string
	marked   sets.Set[T] // to go in the urgent lane when pushed or touched
	inUrgent sets.Set[T] // waiting in its tenant's urgent lane
	waiting  map[string]*tenantLanes[T]
	order    []string // each tenant of waiting once, the next to take its turn first
	total    int      // keys in every tenant's lanes, stale copies included
	// Keys moved from normal to urgent by Touch are left in normal, where
	// they sit ahead of any later copy, and skipped when reached: moved
	// counts them per key, staleTotal in all.
	moved      map[T]int
	staleTotal int
}

// tenantLanes are one tenant's waiting keys. lanes holds only tenants with
// a key waiting, so its maps are bounded by the queue's own length.
type tenantLanes[T comparable] struct {
	urgent, normal []T
}

func newLanes[T comparable](tenantOf func(T) string) *lanes[T] {
	return &lanes[T]{
		tenantOf: tenantOf, marked: sets.New[T](), inUrgent: sets.New[T](),
		waiting: map[string]*tenantLanes[T]{}, moved: map[T]int{},
	}
}

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
	t := l.tenant(key)
	t.normal = append(t.normal, key)
	l.total++
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
	l.staleTotal++
}

func (l *lanes[T]) toUrgent(key T) {
	t := l.tenant(key)
	t.urgent = append(t.urgent, key)
	l.inUrgent.Insert(key)
	l.total++
}

// tenant is the lanes of key's tenant, which takes its turns from now if
// it had no key waiting.
func (l *lanes[T]) tenant(key T) *tenantLanes[T] {
	name := l.tenantOf(key)
	t, ok := l.waiting[name]
	if !ok {
		t = &tenantLanes[T]{}
		l.waiting[name] = t
		l.order = append(l.order, name)
	}
	return t
}

func (l *lanes[T]) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total - l.staleTotal
}

// Pop is only called when Len is above zero. The tenant whose turn it is
// gives its first urgent key, or else its first other one; a tenant with
// more waiting goes to the back of the order.
func (l *lanes[T]) Pop() T {
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		name := popFront(&l.order)
		t := l.waiting[name]
		l.dropStale(t)
		if len(t.urgent)+len(t.normal) == 0 { // only stale copies waited
			delete(l.waiting, name)
			continue
		}
		var key T
		if len(t.urgent) > 0 {
			key = popFront(&t.urgent)
			l.inUrgent.Delete(key)
		} else {
			key = popFront(&t.normal)
		}
		l.total--
		if len(t.urgent)+len(t.normal) > 0 {
			l.order = append(l.order, name)
		} else {
			delete(l.waiting, name)
		}
		return key
	}
}

// dropStale drops the copies at the front of t's normal lane whose key
// Touch moved to the urgent lane: a moved key's stale copy is ahead of any
// later copy of it, so a stale copy never costs its tenant a turn.
func (l *lanes[T]) dropStale(t *tenantLanes[T]) {
	for len(t.normal) > 0 {
		key := t.normal[0]
		n := l.moved[key]
		if n == 0 {
			return
		}
		popFront(&t.normal)
		if n == 1 {
			delete(l.moved, key)
		} else {
			l.moved[key] = n - 1
		}
		l.staleTotal--
		l.total--
	}
}

func popFront[T any](s *[]T) T {
	key := (*s)[0]
	var zero T
	(*s)[0] = zero // let the backing array drop its reference
	*s = (*s)[1:]
	return key
}
