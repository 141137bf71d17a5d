package proberules

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	elastiinformers "github.com/elasti-dev/elasti/pkg/generated/informers/externalversions/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
	"github.com/elasti-dev/elasti/pkg/tombstone"
)

// Answer is a canned reply to a matched probe.
type Answer struct {
	Status int
	Body   string
}

// Matcher answers health-checker requests for a Service whose target is
// at zero, so they do not wake it.
type Matcher interface {
	// MatchProbe returns the answer of the first rule of svc's
	// ElastiService that matches req.
	MatchProbe(svc clusterview.ServiceRef, req *http.Request) (Answer, bool)
}

// Index is a Matcher over ElastiServices, keyed by every Service
// an ElastiService fronts: spec.service, and during a move of spec.service
// the old Service too, which the resolver keeps fronting until the move
// completes (see clusterview.NamedIndex), so its health checks do not wake the
// target either. Rules are compiled once per ElastiService generation.
type Index struct {
	mu     sync.RWMutex
	byName map[types.NamespacedName]*probeEntry
	bySvc  map[clusterview.ServiceRef][]*probeEntry // sorted by ElastiService name
	synced []cache.InformerSynced
	logger klog.Logger
}

type probeEntry struct {
	name    string
	own     clusterview.ServiceRef   // spec.service
	svcs    []clusterview.ServiceRef // every Service it fronts (namedServices)
	version string
	rules   []compiledRule
}

// NewIndex returns a Index kept up to date by the ElastiService
// informer. Call it before the informer factory is started. ctx only
// carries the logger.
func NewIndex(ctx context.Context, informer elastiinformers.ElastiServiceInformer) (*Index, error) {
	p := NewStaticIndex(ctx)
	reg, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    p.onUpsert,
		UpdateFunc: func(_, cur any) { p.onUpsert(cur) },
		DeleteFunc: p.onDelete,
	})
	if err != nil {
		return nil, fmt.Errorf("adding ElastiService handler: %w", err)
	}
	p.synced = []cache.InformerSynced{informer.Informer().HasSynced, reg.HasSynced}
	return p, nil
}

// NewStaticIndex returns an empty Index fed only through Upsert
// and Delete.
func NewStaticIndex(ctx context.Context) *Index {
	return &Index{
		byName: map[types.NamespacedName]*probeEntry{},
		bySvc:  map[clusterview.ServiceRef][]*probeEntry{},
		logger: klog.FromContext(ctx).WithName("probes"),
	}
}

// HasSynced reports whether the ElastiService informer has synced.
func (p *Index) HasSynced() bool {
	return clusterview.AllSynced(p.synced)
}

func (p *Index) onUpsert(obj any) {
	if es, ok := obj.(*elastiv1alpha1.ElastiService); ok {
		p.Upsert(es)
	}
}

func (p *Index) onDelete(obj any) {
	if es, ok := tombstone.Object[*elastiv1alpha1.ElastiService](obj); ok {
		p.Delete(es.Namespace, es.Name)
	}
}

// Upsert indexes es's probe rules, compiling them unless this generation is
// already compiled: a move changes only the Services they are indexed
// under, through the status. es is only read.
func (p *Index) Upsert(es *elastiv1alpha1.ElastiService) {
	key := es.Key()
	own, svcs := clusterview.ServiceRef{Namespace: es.Namespace, Name: es.Spec.Service}, clusterview.NamedServices(es)
	version := string(es.UID) + "/" + strconv.FormatInt(es.Generation, 10)
	if es.Generation == 0 {
		// Objects that never went through an apiserver (tests, fakes) have
		// no generation; the resource version still changes with the spec.
		version += "/" + es.ResourceVersion
	}

	p.mu.RLock()
	old := p.byName[key]
	p.mu.RUnlock()
	if old != nil && old.version == version && slices.Equal(old.svcs, svcs) {
		return
	}

	var entry *probeEntry
	switch {
	case len(es.Spec.ProbeResponse) == 0:
	case old != nil && old.version == version:
		entry = &probeEntry{name: es.Name, own: own, svcs: svcs, version: version, rules: old.rules}
	default:
		logger := p.logger.WithValues("elastiService", klog.KObj(es), "generation", es.Generation)
		entry = &probeEntry{name: es.Name, own: own, svcs: svcs, version: version, rules: compileRules(logger, es.Spec.ProbeResponse)}
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	p.removeLocked(key)
	if entry == nil {
		return
	}
	p.byName[key] = entry
	// Copy on write: MatchProbe iterates a list after dropping the lock.
	for _, svc := range svcs {
		list := append(slices.Clone(p.bySvc[svc]), entry)
		slices.SortFunc(list, func(a, b *probeEntry) int { return compareForService(svc, a, b) })
		p.bySvc[svc] = list
	}
}

// compareForService orders the entries indexed under svc: first those whose
// spec.service is svc, then by name. An old Service of one ElastiService's
// move may already be another's spec.service, and then that other one's
// rules are the Service's own.
func compareForService(svc clusterview.ServiceRef, a, b *probeEntry) int {
	aOwn, bOwn := a.own == svc, b.own == svc
	if aOwn != bOwn {
		if aOwn {
			return -1
		}
		return 1
	}
	return strings.Compare(a.name, b.name)
}

// Delete forgets the ElastiService ns/name.
func (p *Index) Delete(ns, name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.removeLocked(types.NamespacedName{Namespace: ns, Name: name})
}

func (p *Index) removeLocked(key types.NamespacedName) {
	old, ok := p.byName[key]
	if !ok {
		return
	}
	delete(p.byName, key)
	for _, svc := range old.svcs {
		list := slices.DeleteFunc(slices.Clone(p.bySvc[svc]), func(e *probeEntry) bool { return e == old })
		if len(list) == 0 {
			delete(p.bySvc, svc)
		} else {
			p.bySvc[svc] = list
		}
	}
}

// MatchProbe implements Matcher.
func (p *Index) MatchProbe(svc clusterview.ServiceRef, req *http.Request) (Answer, bool) {
	p.mu.RLock()
	list := p.bySvc[svc]
	p.mu.RUnlock()
	// Entries are immutable once indexed, so matching needs no lock.
	var query map[string][]string
	for _, e := range list {
		for i := range e.rules {
			r := &e.rules[i]
			if r.invalid {
				continue
			}
			if query == nil && len(r.query) > 0 {
				query = req.URL.Query()
			}
			if r.matches(req, query) {
				return r.answer, true
			}
		}
	}
	return Answer{}, false
}
