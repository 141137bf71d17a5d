package identify

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	elastiinformers "github.com/elasti-dev/elasti/pkg/generated/informers/externalversions/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/portalloc"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
	"github.com/elasti-dev/elasti/pkg/tombstone"
)

// Route is what a resolver port stands for: one port of one Service.
type Route struct {
	Service clusterview.ServiceRef
	// Port is the Service port's number.
	Port int32
	// PortName is the Service port's name.
	PortName string
}

// RouteTable maps resolver ports to Service ports, as the operator
// recorded them in the ElastiServices' status.resolverPorts. The operator
// allocates without collisions; should two ElastiServices still claim one
// port (say, after a restore from backup, before the operator reassigns
// one), the older ElastiService keeps it, as the operator decides.
type RouteTable struct {
	// rng bounds the ports taken from a status: only the operator's range
	// is ever listened on.
	rng    portalloc.Range
	mu     sync.RWMutex
	claims map[int32][]routeClaim           // every claim on a port, winner first
	byES   map[types.NamespacedName][]int32 // the ports each ElastiService claims
	// changed receives a token whenever the set of ports changes.
	changed chan struct{}
	synced  []cache.InformerSynced
	logger  klog.Logger
}

type routeClaim struct {
	port    int32 // the resolver port claimed
	owner   types.NamespacedName
	created int64 // the owner's creationTimestamp, Unix seconds
	route   Route
}

// NewRouteTable returns an empty RouteTable, fed through Upsert and
// Delete, that takes only resolver ports inside rng.
func NewRouteTable(ctx context.Context, rng portalloc.Range) *RouteTable {
	return &RouteTable{
		rng:     rng,
		claims:  map[int32][]routeClaim{},
		byES:    map[types.NamespacedName][]int32{},
		changed: make(chan struct{}, 1),
		logger:  klog.FromContext(ctx).WithName("routes"),
	}
}

// NewInformerRouteTable returns a RouteTable kept up to date by the
// ElastiService informer. Call it before the informer factory is started.
// ctx only carries the logger.
func NewInformerRouteTable(ctx context.Context, informer elastiinformers.ElastiServiceInformer, rng portalloc.Range) (*RouteTable, error) {
	t := NewRouteTable(ctx, rng)
	reg, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if es, ok := obj.(*elastiv1alpha1.ElastiService); ok {
				t.Upsert(es)
			}
		},
		UpdateFunc: func(_, cur any) {
			if es, ok := cur.(*elastiv1alpha1.ElastiService); ok {
				t.Upsert(es)
			}
		},
		DeleteFunc: func(obj any) {
			if es, ok := tombstone.Object[*elastiv1alpha1.ElastiService](obj); ok {
				t.Delete(es.Namespace, es.Name)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("adding ElastiService handler: %w", err)
	}
	t.synced = []cache.InformerSynced{informer.Informer().HasSynced, reg.HasSynced}
	return t, nil
}

// HasSynced reports whether the ElastiService informer has synced.
func (t *RouteTable) HasSynced() bool {
	return clusterview.AllSynced(t.synced)
}

// Changed receives a token after the set of ports changed.
func (t *RouteTable) Changed() <-chan struct{} { return t.changed }

// Upsert records es's resolver ports. es is only read. A port outside the
// table's range is left out: a status is written by whoever may update
// ElastiServices, and must not make the resolver listen on, say, a port
// another process of its pod uses.
func (t *RouteTable) Upsert(es *elastiv1alpha1.ElastiService) {
	owner := es.Key()
	var claims []routeClaim
	for _, p := range es.Status.ResolverPorts {
		if !t.rng.Contains(p.ResolverPort) || p.Service == "" {
			continue
		}
		claims = append(claims, routeClaim{port: p.ResolverPort, owner: owner, created: es.CreationTimestamp.Unix(), route: Route{
			Service: clusterview.ServiceRef{Namespace: es.Namespace, Name: p.Service}, Port: p.Port, PortName: p.Name,
		}})
	}
	t.set(owner, claims)
}

// Delete forgets the ElastiService's ports.
func (t *RouteTable) Delete(namespace, name string) {
	t.set(types.NamespacedName{Namespace: namespace, Name: name}, nil)
}

func (t *RouteTable) set(owner types.NamespacedName, claims []routeClaim) {
	t.mu.Lock()
	defer t.mu.Unlock()
	// toggled counts, per port, the times it left or joined the table: a
	// port removed and re-added (the usual update, an unchanged status)
	// nets to zero.
	toggled := map[int32]int{}
	for _, port := range t.byES[owner] {
		cs := slices.DeleteFunc(t.claims[port], func(c routeClaim) bool { return c.owner == owner })
		if len(cs) == 0 {
			delete(t.claims, port)
			toggled[port]--
		} else {
			t.claims[port] = cs
		}
	}
	delete(t.byES, owner)
	for _, c := range claims {
		port := c.port
		cs := append(t.claims[port], c)
		if len(cs) == 1 {
			toggled[port]++
		}
		slices.SortFunc(cs, func(a, b routeClaim) int {
			return cmp.Or(cmp.Compare(a.created, b.created), cmp.Compare(a.owner.Namespace, b.owner.Namespace), cmp.Compare(a.owner.Name, b.owner.Name))
		})
		if len(cs) > 1 {
			t.logger.Info("Two ElastiServices claim one resolver port; the older keeps it",
				"port", port, "kept", klog.KRef(cs[0].owner.Namespace, cs[0].owner.Name), "claimant", klog.KRef(owner.Namespace, owner.Name))
		}
		t.claims[port] = cs
		t.byES[owner] = append(t.byES[owner], port)
	}
	// Only the set of ports matters to the listeners.
	for _, n := range toggled {
		if n != 0 {
			select {
			case t.changed <- struct{}{}:
			default: // a change is already pending
			}
			return
		}
	}
}

// Lookup returns the route of a resolver port.
func (t *RouteTable) Lookup(port int32) (Route, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	cs := t.claims[port]
	if len(cs) == 0 {
		return Route{}, false
	}
	return cs[0].route, true
}

// Ports returns every routed resolver port, sorted.
func (t *RouteTable) Ports() []int32 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return slices.Sorted(maps.Keys(t.claims))
}

// Snapshot returns every route by resolver port.
func (t *RouteTable) Snapshot() map[int32]Route {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make(map[int32]Route, len(t.claims))
	for p, cs := range t.claims {
		out[p] = cs[0].route
	}
	return out
}

// RouteStatus is one line of the route table as the routes endpoint shows
// it.
type RouteStatus struct {
	ResolverPort int32  `json:"resolverPort"`
	Namespace    string `json:"namespace"`
	Service      string `json:"service"`
	Port         int32  `json:"port"`
	PortName     string `json:"portName,omitempty"`
	Listening    bool   `json:"listening"`
}

// RoutesHandler serves the route table as JSON, sorted by resolver port:
// which Service port each resolver port stands for, and whether it is open.
// It is what an operator or a person reads to see per-port routing work.
func RoutesHandler(routes *RouteTable, ports *PortListeners) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		open := map[int32]bool{}
		for _, p := range ports.Listening() {
			open[p] = true
		}
		snap := routes.Snapshot()
		out := make([]RouteStatus, 0, len(snap))
		for port, r := range snap {
			out = append(out, RouteStatus{ResolverPort: port, Namespace: r.Service.Namespace, Service: r.Service.Name,
				Port: r.Port, PortName: r.PortName, Listening: open[port]})
		}
		slices.SortFunc(out, func(a, b RouteStatus) int { return cmp.Compare(a.ResolverPort, b.ResolverPort) })
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	}
}
