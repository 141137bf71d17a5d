// Package portalloc hands out resolver ports: one port of a configured range
// for every TCP port of every Service the operator fronts, so a resolver can
// tell Services apart by the port a connection arrived on.
//
// The allocator is memory only. The operator records each assignment in
// the ElastiService's status.resolverPorts and seeds a new allocator from
// those records before it acts (see Seed), which makes assignments survive
// restarts and leader changes. Ports are recorded rather than derived (say,
// by hashing the Service's name into the range) because any derivation must
// resolve collisions, and whichever Service is seen first would win: the
// port a Service got would depend on the order in which an operator
// happened to see the fleet, and could change on the next restart.
package portalloc

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// Range is an inclusive range of TCP ports.
type Range struct {
	First, Last int32
}

// DefaultRange is the default --resolver-port-range. It stays clear of the
// well-known ports (below 1024) and the ones applications commonly use
// (8000-8999 for HTTP, 9000-9999 for metrics and admin endpoints, among
// them the resolver's own 8012-8014), of Istio's sidecar ports
// (15000-15090), of the NodePort range (30000-32767) and of Linux's
// ephemeral range (32768-60999), from which the resolver's own outgoing
// connections take their source ports. It holds 10,000 ports: one per
// Service port for a fleet of that size.
var DefaultRange = Range{First: 20000, Last: 29999}

// MaxPort is the highest TCP port; the lowest a listener or a Service can
// use is 1.
const MaxPort = 65535

// IsPort reports whether p is a TCP port a listener or a Service can use,
// 1-MaxPort. Every port check in elasti asks it.
func IsPort[T ~int | ~int32 | ~int64](p T) bool { return p >= 1 && p <= MaxPort }

// ParseRange parses "FIRST-LAST", both TCP ports, FIRST <= LAST.
func ParseRange(s string) (Range, error) {
	first, last, ok := strings.Cut(strings.TrimSpace(s), "-")
	if !ok {
		return Range{}, fmt.Errorf("port range %q is not of the form FIRST-LAST (e.g. %s)", s, DefaultRange)
	}
	f, err1 := strconv.ParseInt(strings.TrimSpace(first), 10, 32)
	l, err2 := strconv.ParseInt(strings.TrimSpace(last), 10, 32)
	switch {
	case err1 != nil || err2 != nil:
		return Range{}, fmt.Errorf("port range %q is not of the form FIRST-LAST (e.g. %s)", s, DefaultRange)
	case f < 1 || l > MaxPort:
		return Range{}, fmt.Errorf("port range %q is not within 1-65535", s)
	case f > l:
		return Range{}, fmt.Errorf("port range %q ends before it starts", s)
	}
	return Range{First: int32(f), Last: int32(l)}, nil
}

// DefaultProxyPort is the resolver's shared proxy port, where Host-routed
// traffic arrives, unless the operator and resolver are told another.
const DefaultProxyPort = 8012

// ResolverOwnPorts are the ports elasti's resolver listens on for itself:
// Host-routed traffic (DefaultProxyPort), health, metrics and the route
// table (8013), and the port that declares per-port routing (8014). A
// resolver port must never be one of them.
var ResolverOwnPorts = []int32{DefaultProxyPort, 8013, 8014}

// ValidateForResolver reports why r cannot hold resolver ports beside a
// resolver whose proxy port is proxyPort. The operator checks the range it
// assigns from, and the resolver the range it listens in.
func (r Range) ValidateForResolver(proxyPort int32) error {
	switch {
	case !r.Valid():
		return fmt.Errorf("resolver port range %s is not a range of TCP ports (1-65535)", r)
	case r.Contains(proxyPort):
		return fmt.Errorf("resolver port range %s contains the resolver proxy port %d; choose a range without it", r, proxyPort)
	case slices.ContainsFunc(ResolverOwnPorts, r.Contains):
		return fmt.Errorf("resolver port range %s contains one of the resolver's own ports %v; choose a range without them", r, ResolverOwnPorts)
	}
	return nil
}

// Valid reports whether r is a range of TCP ports: both ends ports, in order.
func (r Range) Valid() bool { return IsPort(r.First) && IsPort(r.Last) && r.First <= r.Last }

// String formats r as ParseRange reads it.
func (r Range) String() string { return fmt.Sprintf("%d-%d", r.First, r.Last) }

// Size is the number of ports in r.
func (r Range) Size() int { return int(r.Last-r.First) + 1 }

// Contains reports whether p is in r.
func (r Range) Contains(p int32) bool { return p >= r.First && p <= r.Last }

// Port is one port of a Service, in the owner's namespace.
type Port struct {
	Service string
	Port    int32
}

// Assignment is a resolver port held for a Service port.
type Assignment struct {
	Service      string
	Port         int32
	ResolverPort int32
}

func (a Assignment) key() Port { return Port{Service: a.Service, Port: a.Port} }

// Owner is the ElastiService that holds ports.
type Owner = types.NamespacedName

// ExhaustedError says the range had too few free ports.
type ExhaustedError struct {
	Range  Range
	Wanted int // ports the owner needed
	Free   int // ports free for it
}

func (e *ExhaustedError) Error() string {
	return fmt.Sprintf("resolver port range %s is exhausted: %d ports needed, %d free", e.Range, e.Wanted, e.Free)
}

// Quota bounds what one owner, and all owners of one namespace, may hold,
// so that no Service with thousands of ports, and no namespace with many
// ElastiServices, takes the whole range from the others. Zero means no
// bound.
type Quota struct {
	PerOwner     int
	PerNamespace int
}

// DefaultQuota is the default of --resolver-ports-per-elastiservice and
// --resolver-ports-per-namespace. 100 ports is far more than a Service
// serving HTTP has, with room for a spec.service move, during which an
// owner holds the ports of both Services. 1,000 ports is a tenth of
// DefaultRange: a namespace of 1,000 single-port Services gets per-port
// routing for all of them, and ten namespaces at their quota leave other
// namespaces ports still.
var DefaultQuota = Quota{PerOwner: 100, PerNamespace: 1000}

// QuotaError says owner would hold more ports than its quota allows.
type QuotaError struct {
	// PerNamespace is set for the namespace's quota, unset for the owner's.
	PerNamespace bool
	Limit        int
	Wanted       int // ports the owner needed
	Free         int // ports its quota leaves it
}

func (e *QuotaError) Error() string {
	scope := "per ElastiService"
	if e.PerNamespace {
		scope = "per namespace"
	}
	return fmt.Sprintf("resolver port quota of %d %s exceeded: %d ports needed, %d free", e.Limit, scope, e.Wanted, e.Free)
}

// Allocator holds the assignments. It is safe for concurrent use.
type Allocator struct {
	r     Range
	quota Quota

	mu      sync.Mutex
	holder  map[int32]Owner        // resolver port → its owner
	held    map[Owner][]Assignment // owner → what it holds
	waiting map[Owner]struct{}     // owners whose last Assign found too few ports
	inNS    map[string]int         // namespace → ports its owners hold
	// next is where the search for a free port starts. It moves on past
	// every port handed out, so a port just released is the last to be
	// reused: connections still in flight to a deleted Service's old port
	// must not reach a Service that took it a moment later.
	next int32
}

// New returns an empty allocator over r, bounded by quota.
func New(r Range, quota Quota) *Allocator {
	a := &Allocator{r: r, quota: quota}
	a.Reset()
	return a
}

// Range is the range ports come from.
func (a *Allocator) Range() Range { return a.r }

// Quota is the bound on what an owner and a namespace may hold.
func (a *Allocator) Quota() Quota { return a.quota }

// Reset forgets every assignment, as before Seed.
func (a *Allocator) Reset() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.holder = map[int32]Owner{}
	a.held = map[Owner][]Assignment{}
	a.waiting = map[Owner]struct{}{}
	a.inNS = map[string]int{}
	a.next = a.r.First
}

// Seed records assignments read back from owner's status. Seed owners in
// priority order: a recorded port that an earlier owner already holds, that
// lies outside the range (the flag changed), or that repeats a Service port,
// is not kept and is returned; owner's next Assign gives those Service ports
// new resolver ports.
func (a *Allocator) Seed(owner Owner, recorded []Assignment) (lost []Assignment) {
	a.mu.Lock()
	defer a.mu.Unlock()
	seen := map[Port]bool{}
	for _, as := range a.held[owner] {
		seen[as.key()] = true
	}
	for _, as := range recorded {
		if _, taken := a.holder[as.ResolverPort]; taken || seen[as.key()] || !a.r.Contains(as.ResolverPort) {
			lost = append(lost, as)
			continue
		}
		seen[as.key()] = true
		a.holder[as.ResolverPort] = owner
		a.held[owner] = append(a.held[owner], as)
		// Kept even past a quota (one lowered since they were recorded):
		// owner's next Assign enforces it.
		a.inNS[owner.Namespace]++
		// Continue after the highest port in use, as the last leader did.
		if as.ResolverPort >= a.next {
			a.next = a.wrap(as.ResolverPort + 1)
		}
	}
	return lost
}

// Assign makes owner hold one resolver port for each Service port in want,
// and nothing else. A port owner already holds is kept; else the port
// recorded for it is taken back if no one else holds it; else a free port
// is handed out. It is all or nothing: if the range cannot give owner a
// port for every one of want, owner holds none, is remembered as waiting
// (see Waiting), and an *ExhaustedError is returned. Past the quota it is
// the same, with a *QuotaError; only an owner refused by its namespace's
// quota waits, since only the namespace's other owners can make room for
// it. The result follows the order of want. freed reports whether owner
// let go of any port, which may let a waiting owner in.
func (a *Allocator) Assign(owner Owner, want []Port, recorded []Assignment) (got []Assignment, freed bool, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()

	got, chosen, missing := a.keepLocked(owner, want, recorded)

	// Quotas first: they hold however many ports the range has free.
	if q := a.quota.PerOwner; q > 0 && len(got) > q {
		freed = a.releaseLocked(owner)
		delete(a.waiting, owner)
		return nil, freed, &QuotaError{Limit: q, Wanted: len(got), Free: q}
	}
	if q := a.quota.PerNamespace; q > 0 {
		others := a.inNS[owner.Namespace] - len(a.held[owner])
		if others+len(got) > q {
			freed = a.releaseLocked(owner)
			a.waiting[owner] = struct{}{}
			return nil, freed, &QuotaError{PerNamespace: true, Limit: q, Wanted: len(got), Free: max(0, q-others)}
		}
	}

	// Ports owner holds but will not keep are free for its new ones too.
	free := a.r.Size() - len(a.holder)
	for _, as := range a.held[owner] {
		if !chosen[as.ResolverPort] {
			free++
		}
	}
	if len(missing) > free {
		freed = a.releaseLocked(owner)
		a.waiting[owner] = struct{}{}
		return nil, freed, &ExhaustedError{Range: a.r, Wanted: len(got), Free: free + len(got) - len(missing)}
	}

	for _, i := range missing {
		got[i].ResolverPort = a.freePortLocked(owner, chosen)
		chosen[got[i].ResolverPort] = true
	}
	for _, as := range a.held[owner] {
		if !chosen[as.ResolverPort] {
			delete(a.holder, as.ResolverPort)
			freed = true
		}
	}
	for p := range chosen {
		a.holder[p] = owner
	}
	a.inNS[owner.Namespace] += len(got) - len(a.held[owner])
	if a.inNS[owner.Namespace] == 0 {
		delete(a.inNS, owner.Namespace)
	}
	if len(got) == 0 {
		delete(a.held, owner)
	} else {
		a.held[owner] = slices.Clone(got)
	}
	delete(a.waiting, owner)
	return got, freed, nil
}

// keepLocked lists want without duplicates, each with the port owner
// holds for it, else the port recorded for it if still usable. chosen are
// the ports so kept; missing indexes the entries of got still without one.
func (a *Allocator) keepLocked(owner Owner, want []Port, recorded []Assignment) (got []Assignment, chosen map[int32]bool, missing []int) {
	current := map[Port]int32{}
	for _, as := range a.held[owner] {
		current[as.key()] = as.ResolverPort
	}
	fromStatus := map[Port]int32{}
	for _, as := range recorded {
		if _, dup := fromStatus[as.key()]; !dup {
			fromStatus[as.key()] = as.ResolverPort
		}
	}
	// usable reports whether owner may have port p: it is in range and free,
	// or owner holds it already (for a Service port it may no longer want).
	usable := func(p int32) bool {
		h, taken := a.holder[p]
		return a.r.Contains(p) && (!taken || h == owner)
	}

	got = make([]Assignment, 0, len(want))
	seen := map[Port]bool{}
	for _, w := range want {
		if !seen[w] {
			seen[w] = true
			got = append(got, Assignment{Service: w.Service, Port: w.Port})
		}
	}
	// What owner holds comes first, then what its status recorded, so a
	// stale record can never take a port from a Service port that has it.
	chosen = map[int32]bool{}
	for i := range got {
		if p, ok := current[got[i].key()]; ok {
			got[i].ResolverPort = p
			chosen[p] = true
		}
	}
	for i := range got {
		if got[i].ResolverPort != 0 {
			continue
		}
		if p, ok := fromStatus[got[i].key()]; ok && usable(p) && !chosen[p] {
			got[i].ResolverPort = p
			chosen[p] = true
			continue
		}
		missing = append(missing, i)
	}
	return got, chosen, missing
}

// freePortLocked finds a port neither held by another owner nor chosen
// already, starting at the cursor. The caller has checked one exists.
func (a *Allocator) freePortLocked(owner Owner, chosen map[int32]bool) int32 {
	p := a.next
	for range a.r.Size() {
		h, taken := a.holder[p]
		if (!taken || h == owner) && !chosen[p] {
			a.next = a.wrap(p + 1)
			return p
		}
		p = a.wrap(p + 1)
	}
	panic("portalloc: no free port although one was counted")
}

func (a *Allocator) wrap(p int32) int32 {
	if p > a.r.Last || p < a.r.First {
		return a.r.First
	}
	return p
}

// Release drops every port owner holds and forgets that it waits. It
// reports whether any port was freed.
func (a *Allocator) Release(owner Owner) (freed bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.waiting, owner)
	return a.releaseLocked(owner)
}

func (a *Allocator) releaseLocked(owner Owner) bool {
	held := a.held[owner]
	for _, as := range held {
		if a.holder[as.ResolverPort] == owner {
			delete(a.holder, as.ResolverPort)
		}
	}
	delete(a.held, owner)
	if a.inNS[owner.Namespace] -= len(held); a.inNS[owner.Namespace] <= 0 {
		delete(a.inNS, owner.Namespace)
	}
	return len(held) > 0
}

// Held returns what owner holds, ordered by Service and port.
func (a *Allocator) Held(owner Owner) []Assignment {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := slices.Clone(a.held[owner])
	slices.SortFunc(out, func(x, y Assignment) int {
		return cmp.Or(cmp.Compare(x.Service, y.Service), cmp.Compare(x.Port, y.Port))
	})
	return out
}

// Waiting lists the owners whose last Assign found the range exhausted and
// that have not been released since, ordered by namespace and name.
func (a *Allocator) Waiting() []Owner {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]Owner, 0, len(a.waiting))
	for o := range a.waiting {
		out = append(out, o)
	}
	slices.SortFunc(out, func(x, y Owner) int {
		return cmp.Or(cmp.Compare(x.Namespace, y.Namespace), cmp.Compare(x.Name, y.Name))
	})
	return out
}

// InUse is the number of ports held.
func (a *Allocator) InUse() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.holder)
}
