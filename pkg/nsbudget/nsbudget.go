// Package nsbudget bounds what one namespace's ElastiServices may take of
// a cache that every namespace shares: a count and a byte total per
// namespace. The operator and the resolver both keep every ElastiService
// of the cluster in memory; without a bound, one namespace's thousands of
// maximal specs would fill either process and leave every other
// namespace without wakes.
//
// Past the budget, the newest objects of the namespace are refused, by
// creationTimestamp, then name, so both processes refuse the same ones and
// the choice does not move while nothing is added or deleted: admission
// is the longest run of the namespace's objects, oldest first, that fits
// both limits. Nothing a namespace does changes another's admissions.
package nsbudget

import (
	"cmp"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

// Defaults of the operator's and the resolver's flags. A namespace of
// 1,000 ElastiServices with the largest probeResponse the CRD accepts is
// within both: that is what one resolver holds within manifests/' 256Mi
// beside a held burst (TestElastiWithinManifestLimitsOnTheRealNode), and a
// KubeElasti fleet of that size moves over unchanged. One namespace then
// takes at most about 40% of a resolver (about 2,600 maximal specs fill
// it), where before it could take all of it.
const (
	DefaultCount = 1000
	DefaultBytes = 32 << 20
)

// Reason is the reason of the Ready condition the operator sets on an
// ElastiService its namespace's budget refuses.
const Reason = "NamespaceBudgetExceeded"

// Limits bound one namespace. A limit of zero or less is no limit.
type Limits struct {
	// Count is how many ElastiServices one namespace may have admitted.
	Count int
	// Bytes is the total of their spec sizes (see Size).
	Bytes int64
}

// past reports whether count items of total bytes exceed either limit;
// items that do not refuse nothing (Refused).
func (l Limits) past(count int, total int64) bool {
	return (l.Count > 0 && count > l.Count) || (l.Bytes > 0 && total > l.Bytes)
}

// Defaults are DefaultCount and DefaultBytes.
func Defaults() Limits { return Limits{Count: DefaultCount, Bytes: DefaultBytes} }

// Item is one object of a namespace as the budget sees it.
type Item struct {
	Name    string
	Created time.Time
	Bytes   int64
	// UID and Generation say which spec Bytes weighs; Refused ignores them.
	UID        types.UID
	Generation int64
}

// Size is what an ElastiService weighs against the byte budget: its spec
// as JSON, as the apiserver hands it over, before either cache trims it,
// so that the operator and the resolver weigh it alike.
func Size(es *elastiv1alpha1.ElastiService) int64 {
	b, err := json.Marshal(&es.Spec)
	if err != nil {
		// A spec that does not marshal came from no apiserver; it weighs
		// all the budget, so it is never admitted alongside anything.
		return 1 << 62
	}
	return int64(len(b))
}

// ItemOf is es as the budget sees it.
func ItemOf(es *elastiv1alpha1.ElastiService) Item {
	return Item{Name: es.Name, Created: es.CreationTimestamp.Time, Bytes: Size(es), UID: es.UID, Generation: es.Generation}
}

// older orders items oldest first, then by name.
func older(a, b Item) int {
	if c := a.Created.Compare(b.Created); c != 0 {
		return c
	}
	return cmp.Compare(a.Name, b.Name)
}

// Refused returns the names of the items of one namespace past l: the
// longest run, oldest first, that fits both limits is admitted, and every
// item after it is refused, even one small enough to fit on its own, so
// that a deletion admits the oldest refused item first. items is not
// modified.
func Refused(items []Item, l Limits) map[string]bool {
	sorted := slices.Clone(items)
	slices.SortFunc(sorted, older)
	var total int64
	for i, it := range sorted {
		total += it.Bytes
		if l.past(i+1, total) {
			refused := make(map[string]bool, len(sorted)-i)
			for _, r := range sorted[i:] {
				refused[r.Name] = true
			}
			return refused
		}
	}
	return nil
}

// Tracker keeps the items of every namespace and which are refused. It is
// fed from an ElastiService informer (Observe on add and update, Forget on
// delete) and safe for concurrent use.
type Tracker struct {
	limits Limits
	mu     sync.RWMutex
	items  map[string]map[string]Item // namespace -> name -> item
	// bytes is the total of each namespace's item sizes, so a namespace
	// within both limits is known to refuse nothing without sorting it.
	bytes map[string]int64
	// refused is Refused of each namespace's items, kept up to date.
	refused map[string]map[string]bool
	// changed holds the keys whose admission changed since the last
	// TakeChanged, at most one entry per object tracked.
	changed map[types.NamespacedName]bool
}

// NewTracker returns an empty Tracker with limits.
func NewTracker(limits Limits) *Tracker {
	return &Tracker{limits: limits, items: map[string]map[string]Item{}, bytes: map[string]int64{},
		refused: map[string]map[string]bool{}, changed: map[types.NamespacedName]bool{}}
}

// Limits returns the Tracker's limits.
func (t *Tracker) Limits() Limits { return t.limits }

// Observe records es as it is now. An object seen before with the same
// UID and a generation, which only a spec change moves, is not weighed
// again: a status write costs nothing, and a copy the cache already
// trimmed (an informer may transform its own objects again on a resync)
// keeps the weight of the spec the apiserver sent.
func (t *Tracker) Observe(es *elastiv1alpha1.ElastiService) {
	t.mu.RLock()
	old, seen := t.items[es.Namespace][es.Name]
	t.mu.RUnlock()
	if seen && es.Generation != 0 && old.UID == es.UID && old.Generation == es.Generation && old.Created.Equal(es.CreationTimestamp.Time) {
		return
	}
	it := ItemOf(es)
	t.mu.Lock()
	defer t.mu.Unlock()
	ns := t.items[es.Namespace]
	if ns == nil {
		ns = map[string]Item{}
		t.items[es.Namespace] = ns
	}
	old, ok := ns[it.Name]
	if ok && old == it {
		return
	}
	ns[it.Name] = it
	t.bytes[es.Namespace] += it.Bytes - old.Bytes
	t.updateLocked(es.Namespace)
}

// Forget drops the ElastiService key.
func (t *Tracker) Forget(key types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ns := t.items[key.Namespace]
	old, ok := ns[key.Name]
	if !ok {
		return
	}
	delete(ns, key.Name)
	delete(t.changed, key)
	t.bytes[key.Namespace] -= old.Bytes
	if len(ns) == 0 {
		delete(t.items, key.Namespace)
		delete(t.bytes, key.Namespace)
	}
	t.updateLocked(key.Namespace)
}

// updateLocked recomputes namespace's refusals and notes the keys whose
// admission changed. A namespace within both limits refuses nothing, and
// costs no sort: it runs on every add, spec change and deletion the
// informer delivers (Observe is in its transform, ahead of the watch's
// next event), and sorting a namespace of 1,000 maximal specs on each of
// them took about 1 ms, so the deletion of that namespace held the
// operator's and the resolvers' watches behind for seconds on a loaded
// node, until the apiserver cut them as too slow
// (docs/development/ci.md, the 17:43 failure).
func (t *Tracker) updateLocked(namespace string) {
	ns := t.items[namespace]
	var after map[string]bool
	if t.limits.past(len(ns), t.bytes[namespace]) {
		items := make([]Item, 0, len(ns))
		for _, it := range ns {
			items = append(items, it)
		}
		after = Refused(items, t.limits)
	}
	before := t.refused[namespace]
	for name := range before {
		if _, tracked := ns[name]; tracked && !after[name] {
			t.changed[types.NamespacedName{Namespace: namespace, Name: name}] = true
		}
	}
	for name := range after {
		if !before[name] {
			t.changed[types.NamespacedName{Namespace: namespace, Name: name}] = true
		}
	}
	if len(after) > 0 {
		t.refused[namespace] = after
	} else {
		delete(t.refused, namespace)
	}
}

// TakeChanged returns, and forgets, the keys whose admission changed since
// the last call: a controller syncs them again, so that one pushed past the
// budget gets its condition and one let back in loses it.
func (t *Tracker) TakeChanged() []types.NamespacedName {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.changed) == 0 {
		return nil
	}
	out := make([]types.NamespacedName, 0, len(t.changed))
	for k := range t.changed {
		out = append(out, k)
	}
	clear(t.changed)
	return out
}

// Admitted reports whether the ElastiService key is within its
// namespace's budget. One never observed is: the budget refuses only
// what it has seen push a namespace past it.
func (t *Tracker) Admitted(key types.NamespacedName) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return !t.refused[key.Namespace][key.Name]
}
