package workloop

import (
	"sync"

	"k8s.io/apimachinery/pkg/util/sets"
)

// lanes is a loop's queue storage: keys marked urgent are handed to the
// workers before all others, each lane in arrival order. The workqueue keeps
// its guarantees (a key is queued once and never synced twice at a time);
// lanes only choose which queued key goes next.
//
// The workqueue calls Push, Touch, Len and Pop under its own lock; mark
// comes from outside it, so the lanes have a lock of their own, always taken
// after the workqueue's and never held while calling out.
type lanes[T comparable] struct {
	mu       sync.Mutex
	marked   sets.Set[T] // to go in the urgent lane when pushed or touched
	inUrgent sets.Set[T] // waiting in the urgent lane
	urgent   []T
	normal   []T
	// Keys moved from normal to urgent by Touch are left in normal, where
	// they sit ahead of any later copy, and skipped when reached: moved
	// counts them per key, staleTotal in all.
	moved      map[T]int
	staleTotal int
}

func newLanes[T comparable]() *lanes[T] {
	return &lanes[T]{marked: sets.New[T](), inUrgent: sets.New[T](), moved: map[T]int{}}
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
	l.normal = append(l.normal, key)
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
	l.urgent = append(l.urgent, key)
	l.inUrgent.Insert(key)
}

func (l *lanes[T]) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.urgent) + len(l.normal) - l.staleTotal
}

// Pop is only called when Len is above zero.
func (l *lanes[T]) Pop() T {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.urgent) > 0 {
		key := popFront(&l.urgent)
		l.inUrgent.Delete(key)
		return key
	}
	for {
		key := popFront(&l.normal)
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

func popFront[T any](s *[]T) T {
	key := (*s)[0]
	var zero T
	(*s)[0] = zero // let the backing array drop its reference
	*s = (*s)[1:]
	return key
}
