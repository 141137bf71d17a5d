package workloop

import (
	"sync"

	"k8s.io/apimachinery/pkg/util/sets"
)

// lanes is a loop's queue storage: keys marked urgent are handed to the
// workers before all others. Within a lane, tenants (namespaces, for the
// controller's queues) take turns, each tenant's keys in arrival order: a
// namespace with a thousand keys waiting costs another namespace's new
// key one turn, not a thousand syncs. The workqueue keeps its guarantees
// (a key is queued once and never synced twice at a time); lanes only
// choose which queued key goes next.
//
// The workqueue calls Push, Touch, Len and Pop under its own lock; mark
// comes from outside it, so the lanes have a lock of their own, always taken
// after the workqueue's and never held while calling out.
type lanes[T comparable] struct {
	mu       sync.Mutex
	marked   sets.Set[T] // to go in the urgent lane when pushed or touched
	inUrgent sets.Set[T] // waiting in the urgent lane
	urgent   *turns[T]
	normal   *turns[T]
	// Keys moved from normal to urgent by Touch are left in normal, where
	// they sit ahead of any later copy, and skipped when reached: moved
	// counts them per key, staleTotal in all.
	moved      map[T]int
	staleTotal int
}

func newLanes[T comparable](tenantOf func(T) string) *lanes[T] {
	return &lanes[T]{
		marked: sets.New[T](), inUrgent: sets.New[T](), moved: map[T]int{},
		urgent: newTurns(tenantOf), normal: newTurns(tenantOf),
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
	l.normal.push(key)
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
	l.urgent.push(key)
	l.inUrgent.Insert(key)
}

func (l *lanes[T]) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.urgent.total + l.normal.total - l.staleTotal
}

// Pop is only called when Len is above zero.
func (l *lanes[T]) Pop() T {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.urgent.total > 0 {
		key := l.urgent.pop()
		l.inUrgent.Delete(key)
		return key
	}
	for {
		key := l.normal.pop()
		if n := l.moved[key]; n > 0 {
			if n == 1 {
				delete(l.moved, key)
			} else {
				l.moved[key] = n - 1
			}
			l.staleTotal--
			continue
		}
		return key
	}
}

// turns is one lane: a FIFO per tenant, and the tenants with keys waiting
// in the order they take their turns. Its maps hold only tenants with a
// key waiting, so they are bounded by the queue's own length.
type turns[T comparable] struct {
	tenantOf func(T) string
	waiting  map[string][]T
	order    []string // each tenant of waiting once, the next to pop first
	total    int
}

func newTurns[T comparable](tenantOf func(T) string) *turns[T] {
	return &turns[T]{tenantOf: tenantOf, waiting: map[string][]T{}}
}

func (t *turns[T]) push(key T) {
	tenant := t.tenantOf(key)
	q, ok := t.waiting[tenant]
	if !ok {
		t.order = append(t.order, tenant)
	}
	t.waiting[tenant] = append(q, key)
	t.total++
}

// pop takes the first key of the tenant whose turn it is; a tenant with
// more waiting goes to the back of the order.
func (t *turns[T]) pop() T {
	tenant := popFront(&t.order)
	q := t.waiting[tenant]
	key := popFront(&q)
	if len(q) == 0 {
		delete(t.waiting, tenant)
	} else {
		t.waiting[tenant] = q
		t.order = append(t.order, tenant)
	}
	t.total--
	return key
}

func popFront[T any](s *[]T) T {
	key := (*s)[0]
	var zero T
	(*s)[0] = zero // let the backing array drop its reference
	*s = (*s)[1:]
	return key
}
