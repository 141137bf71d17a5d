// Package directory is the "CRD directory": an in-memory map from a public
// Service to the ElastiService that manages it. The controller writes it on
// every sync; the scale-from-zero server reads it on every request, so reads
// take a shared lock and return copies.
package directory

import (
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/nsbudget"
)

// Entry is what a request path needs to wake a service without an API read.
type Entry struct {
	// ElastiService is the owning ElastiService's namespace/name.
	ElastiService types.NamespacedName
	// Target is the scale target with legacy kinds canonicalised.
	Target            elastiv1alpha1.ScaleTargetRef
	MinTargetReplicas int32
	// Autoscaler is nil when none is configured.
	Autoscaler *elastiv1alpha1.AutoscalerSpec
	// WakeWith are the workloads woken before the target, in order
	// (spec.wakeWith); nil for most.
	WakeWith []elastiv1alpha1.Dependency
}

// Directory is safe for concurrent use.
type Directory struct {
	mu      sync.RWMutex
	entries map[types.NamespacedName]Entry
	// held indexes entries by ElastiService. Every sync calls ReleaseAll,
	// which would otherwise scan every entry: quadratic over a fleet. An
	// ElastiService holds one Service, two while it moves: a slice costs a
	// tenth of a map per ElastiService.
	held map[types.NamespacedName][]types.NamespacedName
	// budget holds every ElastiService's weight, per namespace: an
	// ElastiService past its namespace's budget is never claimed (see
	// pkg/nsbudget).
	budget *nsbudget.Tracker
}

// New returns an empty directory that admits, per namespace, the
// ElastiServices within budget.
func New(budget nsbudget.Limits) *Directory {
	return &Directory{entries: map[types.NamespacedName]Entry{}, held: map[types.NamespacedName][]types.NamespacedName{},
		budget: nsbudget.NewTracker(budget)}
}

// Budget is the directory's per-namespace budget. The ElastiService
// informer's transform feeds it (Observe, on the spec as the apiserver
// sent it, before the cache trims it) and its delete handler empties it
// (Forget).
func (d *Directory) Budget() *nsbudget.Tracker { return d.budget }

// EntryFor builds the directory entry for an ElastiService.
func EntryFor(es *elastiv1alpha1.ElastiService) Entry {
	e := Entry{
		ElastiService:     es.Key(),
		Target:            es.Spec.ScaleTargetRef.Canonical(),
		MinTargetReplicas: es.Spec.MinTargetReplicas,
	}
	if e.MinTargetReplicas < 1 {
		e.MinTargetReplicas = elastiv1alpha1.DefaultMinTargetReplicas
	}
	if es.Spec.Autoscaler != nil {
		a := *es.Spec.Autoscaler
		e.Autoscaler = &a
	}
	e.WakeWith = slices.Clone(es.Spec.WakeWith)
	return e
}

// Claim records that the entry's ElastiService manages service. If another
// ElastiService already holds the service, nothing changes and the holder is
// returned with ok=false.
func (d *Directory) Claim(service types.NamespacedName, e Entry) (holder types.NamespacedName, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if cur, exists := d.entries[service]; exists && cur.ElastiService != e.ElastiService {
		return cur.ElastiService, false
	}
	d.entries[service] = e
	if held := d.held[e.ElastiService]; !slices.Contains(held, service) {
		d.held[e.ElastiService] = append(held, service)
	}
	return e.ElastiService, true
}

// deleteLocked forgets service, which es holds.
func (d *Directory) deleteLocked(service, es types.NamespacedName) {
	delete(d.entries, service)
	held := slices.DeleteFunc(d.held[es], func(s types.NamespacedName) bool { return s == service })
	if len(held) == 0 {
		delete(d.held, es)
	} else {
		d.held[es] = held
	}
}

// Release forgets service if es holds it.
func (d *Directory) Release(service, es types.NamespacedName) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if cur, ok := d.entries[service]; ok && cur.ElastiService == es {
		d.deleteLocked(service, es)
	}
}

// ReleaseAll forgets every service es holds; used when the ElastiService is
// gone or now names a different service.
func (d *Directory) ReleaseAll(es types.NamespacedName, except ...types.NamespacedName) {
	d.mu.Lock()
	defer d.mu.Unlock()
	held := d.held[es]
	kept := held[:0]
	for _, svc := range held {
		if slices.Contains(except, svc) {
			kept = append(kept, svc)
		} else {
			delete(d.entries, svc)
		}
	}
	if len(kept) == 0 {
		delete(d.held, es)
	} else {
		d.held[es] = kept
	}
}

// Lookup returns the entry for a public Service.
func (d *Directory) Lookup(service types.NamespacedName) (Entry, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	e, ok := d.entries[service]
	if ok && e.Autoscaler != nil {
		a := *e.Autoscaler
		e.Autoscaler = &a
	}
	return e, ok
}

// Len is the number of services in the directory.
func (d *Directory) Len() int {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return len(d.entries)
}
