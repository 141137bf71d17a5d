// Package nsinformer merges informers that each watch one namespace into one
// cache.SharedIndexInformer, so an operator that watches a list of
// namespaces (--watch-namespace=a,b) keeps one lister and one event handler
// per resource, as with a single namespace or all of them.
//
// One informer per namespace, not one cluster-wide informer with a filter:
// a namespace-scoped install grants the operator Roles in the watched
// namespaces only, and a cluster-wide list or watch would be forbidden. It
// also keeps other namespaces' objects out of memory. One ListerWatcher
// that merges the namespaces' watches would need their resourceVersions
// to be comparable, which the API does not promise; separate informers
// each resume their own watch.
package nsinformer

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// ErrReadOnly is returned by writes to a merged Indexer: only the
// namespaces' informers write their own stores.
var ErrReadOnly = errors.New("nsinformer: the merged store is read-only")

// OrAll is namespaces, or the one namespace "" (all) when there are none:
// what a list of watched namespaces means to informer factories.
func OrAll(namespaces []string) []string {
	if len(namespaces) == 0 {
		return []string{metav1.NamespaceAll}
	}
	return namespaces
}

// Merge returns the informers as one, each informer watching its own
// namespace, namespaces[i] for informers[i]. With one informer it is
// returned as it is.
func Merge(namespaces []string, informers []cache.SharedIndexInformer) cache.SharedIndexInformer {
	if len(namespaces) != len(informers) {
		panic("nsinformer.Merge: one namespace per informer")
	}
	if len(informers) == 1 {
		return informers[0]
	}
	m := &merged{byNamespace: make(map[string]cache.SharedIndexInformer, len(informers)), all: informers}
	for i, ns := range namespaces {
		m.byNamespace[ns] = informers[i]
	}
	return m
}

// merged implements cache.SharedIndexInformer (and cache.Controller, which
// GetController returns) over one informer per namespace.
type merged struct {
	byNamespace map[string]cache.SharedIndexInformer
	all         []cache.SharedIndexInformer
	synced      lazyDone
}

var (
	_ cache.SharedIndexInformer = (*merged)(nil)
	_ cache.Controller          = (*merged)(nil)
	_ cache.Indexer             = indexer{}
)

func (m *merged) add(add func(cache.SharedIndexInformer) (cache.ResourceEventHandlerRegistration, error)) (cache.ResourceEventHandlerRegistration, error) {
	regs := &registration{regs: make([]cache.ResourceEventHandlerRegistration, 0, len(m.all))}
	for _, inf := range m.all {
		r, err := add(inf)
		if err != nil {
			// Leave no handler half-added.
			_ = m.RemoveEventHandler(regs)
			return nil, err
		}
		regs.regs = append(regs.regs, r)
	}
	return regs, nil
}

// AddEventHandler adds handler to every namespace's informer: it sees the
// events of all of them.
func (m *merged) AddEventHandler(handler cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return m.add(func(inf cache.SharedIndexInformer) (cache.ResourceEventHandlerRegistration, error) {
		return inf.AddEventHandler(handler)
	})
}

func (m *merged) AddEventHandlerWithResyncPeriod(handler cache.ResourceEventHandler, resync time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return m.add(func(inf cache.SharedIndexInformer) (cache.ResourceEventHandlerRegistration, error) {
		return inf.AddEventHandlerWithResyncPeriod(handler, resync)
	})
}

func (m *merged) AddEventHandlerWithOptions(handler cache.ResourceEventHandler, options cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	return m.add(func(inf cache.SharedIndexInformer) (cache.ResourceEventHandlerRegistration, error) {
		return inf.AddEventHandlerWithOptions(handler, options)
	})
}

// RemoveEventHandler removes a handler AddEventHandler returned.
func (m *merged) RemoveEventHandler(handle cache.ResourceEventHandlerRegistration) error {
	regs, ok := handle.(*registration)
	if !ok {
		return errors.New("nsinformer: not a registration of this informer")
	}
	var errs []error
	for i, r := range regs.regs {
		errs = append(errs, m.all[i].RemoveEventHandler(r))
	}
	return errors.Join(errs...)
}

func (m *merged) GetStore() cache.Store           { return indexer{m} }
func (m *merged) GetIndexer() cache.Indexer       { return indexer{m} }
func (m *merged) GetController() cache.Controller { return m }

// Run runs every namespace's informer until stopCh closes. Informers from
// a factory are started by the factory instead.
func (m *merged) Run(stopCh <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-stopCh:
			cancel()
		case <-ctx.Done():
		}
	}()
	m.RunWithContext(ctx)
}

func (m *merged) RunWithContext(ctx context.Context) {
	var wg sync.WaitGroup
	for _, inf := range m.all {
		wg.Go(func() { inf.RunWithContext(ctx) })
	}
	wg.Wait()
}

// HasSynced: every namespace's informer has synced.
func (m *merged) HasSynced() bool {
	for _, inf := range m.all {
		if !inf.HasSynced() {
			return false
		}
	}
	return true
}

func (m *merged) HasSyncedChecker() cache.DoneChecker {
	return m.synced.get(func() []cache.DoneChecker {
		checkers := make([]cache.DoneChecker, len(m.all))
		for i, inf := range m.all {
			checkers[i] = inf.HasSyncedChecker()
		}
		return checkers
	})
}

// LastSyncResourceVersion is empty: resourceVersions of different watches
// are not comparable, so no single one stands for all namespaces.
func (m *merged) LastSyncResourceVersion() string { return "" }

func (m *merged) SetWatchErrorHandler(handler cache.WatchErrorHandler) error {
	return m.each(func(inf cache.SharedIndexInformer) error { return inf.SetWatchErrorHandler(handler) })
}

func (m *merged) SetWatchErrorHandlerWithContext(handler cache.WatchErrorHandlerWithContext) error {
	return m.each(func(inf cache.SharedIndexInformer) error { return inf.SetWatchErrorHandlerWithContext(handler) })
}

func (m *merged) SetTransform(handler cache.TransformFunc) error {
	return m.each(func(inf cache.SharedIndexInformer) error { return inf.SetTransform(handler) })
}

// IsStopped: every namespace's informer has stopped.
func (m *merged) IsStopped() bool {
	for _, inf := range m.all {
		if !inf.IsStopped() {
			return false
		}
	}
	return true
}

// AddIndexers adds indexers to every namespace's informer.
func (m *merged) AddIndexers(indexers cache.Indexers) error {
	return m.each(func(inf cache.SharedIndexInformer) error { return inf.AddIndexers(indexers) })
}

func (m *merged) each(f func(cache.SharedIndexInformer) error) error {
	var errs []error
	for _, inf := range m.all {
		errs = append(errs, f(inf))
	}
	return errors.Join(errs...)
}

// registration is one registration per namespace's informer, in m.all's
// order.
type registration struct {
	regs   []cache.ResourceEventHandlerRegistration
	synced lazyDone
}

func (r *registration) HasSynced() bool {
	for _, reg := range r.regs {
		if !reg.HasSynced() {
			return false
		}
	}
	return true
}

func (r *registration) HasSyncedChecker() cache.DoneChecker {
	return r.synced.get(func() []cache.DoneChecker {
		checkers := make([]cache.DoneChecker, len(r.regs))
		for i, reg := range r.regs {
			checkers[i] = reg.HasSyncedChecker()
		}
		return checkers
	})
}

// lazyDone makes one allDone on first use, so that asking again does not
// start another goroutine.
type lazyDone struct {
	once sync.Once
	done cache.DoneChecker
}

func (l *lazyDone) get(checkers func() []cache.DoneChecker) cache.DoneChecker {
	l.once.Do(func() { l.done = allDone(checkers()) })
	return l.done
}

// allDone is done when every checker is.
func allDone(checkers []cache.DoneChecker) cache.DoneChecker {
	names := make([]string, len(checkers))
	for i, c := range checkers {
		names[i] = c.Name()
	}
	done := make(chan struct{})
	go func() {
		// Ends when the last checker is done. One per merged informer or
		// registration (lazyDone); it outlives an informer that never
		// syncs, which only happens once the process stops it.
		for _, c := range checkers {
			<-c.Done()
		}
		close(done)
	}()
	return doneChecker{name: strings.Join(names, ","), done: done}
}

type doneChecker struct {
	name string
	done chan struct{}
}

func (d doneChecker) Name() string          { return d.name }
func (d doneChecker) Done() <-chan struct{} { return d.done }

// indexer reads the namespaces' stores as one: lookups by key or by the
// namespace index go to the namespace's own store, lists and other
// indexes ask every store.
type indexer struct{ m *merged }

func (x indexer) store(namespace string) (cache.Indexer, bool) {
	inf, ok := x.m.byNamespace[namespace]
	if !ok {
		return nil, false
	}
	return inf.GetIndexer(), true
}

func (x indexer) Add(any) error                        { return ErrReadOnly }
func (x indexer) Update(any) error                     { return ErrReadOnly }
func (x indexer) Delete(any) error                     { return ErrReadOnly }
func (x indexer) Replace([]any, string) error          { return ErrReadOnly }
func (x indexer) Resync() error                        { return nil }
func (x indexer) Bookmark(string)                      {}
func (x indexer) LastStoreSyncResourceVersion() string { return "" }

func (x indexer) List() []any {
	var out []any
	for _, inf := range x.m.all {
		out = append(out, inf.GetIndexer().List()...)
	}
	return out
}

func (x indexer) ListKeys() []string {
	var out []string
	for _, inf := range x.m.all {
		out = append(out, inf.GetIndexer().ListKeys()...)
	}
	return out
}

// Get looks obj up in its namespace's store; an object of a namespace not
// watched does not exist.
func (x indexer) Get(obj any) (any, bool, error) {
	o, err := meta.Accessor(obj)
	if err != nil {
		return nil, false, err
	}
	s, ok := x.store(o.GetNamespace())
	if !ok {
		return nil, false, nil
	}
	return s.Get(obj)
}

func (x indexer) GetByKey(key string) (any, bool, error) {
	ns, _, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil, false, err
	}
	s, ok := x.store(ns)
	if !ok {
		return nil, false, nil
	}
	return s.GetByKey(key)
}

func (x indexer) Index(indexName string, obj any) ([]any, error) {
	var out []any
	for _, inf := range x.m.all {
		items, err := inf.GetIndexer().Index(indexName, obj)
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
	}
	return out, nil
}

func (x indexer) IndexKeys(indexName, indexedValue string) ([]string, error) {
	if indexName == cache.NamespaceIndex {
		s, ok := x.store(indexedValue)
		if !ok {
			return nil, nil
		}
		return s.IndexKeys(indexName, indexedValue)
	}
	var out []string
	for _, inf := range x.m.all {
		keys, err := inf.GetIndexer().IndexKeys(indexName, indexedValue)
		if err != nil {
			return nil, err
		}
		out = append(out, keys...)
	}
	return out, nil
}

func (x indexer) ListIndexFuncValues(indexName string) []string {
	seen := map[string]bool{}
	var out []string
	for _, inf := range x.m.all {
		for _, v := range inf.GetIndexer().ListIndexFuncValues(indexName) {
			if !seen[v] {
				seen[v] = true
				out = append(out, v)
			}
		}
	}
	return out
}

// ByIndex by namespace (what a lister's Namespace(ns).List does) reads that
// namespace's store only; other indexes read every store.
func (x indexer) ByIndex(indexName, indexedValue string) ([]any, error) {
	if indexName == cache.NamespaceIndex {
		s, ok := x.store(indexedValue)
		if !ok {
			return nil, nil
		}
		return s.ByIndex(indexName, indexedValue)
	}
	var out []any
	for _, inf := range x.m.all {
		items, err := inf.GetIndexer().ByIndex(indexName, indexedValue)
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
	}
	return out, nil
}

// GetIndexers are the indexers every namespace's informer has (they are
// added to all of them alike).
func (x indexer) GetIndexers() cache.Indexers { return x.m.all[0].GetIndexer().GetIndexers() }

func (x indexer) AddIndexers(indexers cache.Indexers) error { return x.m.AddIndexers(indexers) }
