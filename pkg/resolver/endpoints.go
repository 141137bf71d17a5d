package resolver

import (
	"errors"
	"slices"
	"sync"

	"k8s.io/klog/v2"
)

// ServiceRef names a public Service.
type ServiceRef struct {
	Namespace string
	Name      string
}

func (s ServiceRef) String() string { return s.Namespace + "/" + s.Name }

// kref is the structured-logging form of s.
func (s ServiceRef) kref() klog.ObjectRef { return klog.KRef(s.Namespace, s.Name) }

// ErrServiceNotFound is returned by an EndpointSource for a public Service
// it does not know.
var ErrServiceNotFound = errors.New("service not found")

// ErrServiceNotSelectable is returned by an EndpointSource for a public
// Service whose EndpointSlices Kubernetes does not keep: one without a
// selector or of type ExternalName (endpointready.Unkept). The resolver
// forwards only to addresses the Service's own controller wrote.
var ErrServiceNotSelectable = errors.New("service has no endpoints Kubernetes keeps")

// Backends is what an EndpointSource knows about one port of a public
// Service right now.
type Backends struct {
	// Addrs are the Ready endpoints as "ip:port", sorted, without
	// duplicates.
	Addrs []string
	// H2C is set when the Service port declares an HTTP/2 cleartext
	// appProtocol (kubernetes.io/h2c, h2c, grpc), so every request is
	// forwarded over h2c.
	H2C bool
	// AppProtocol is the protocol the Service port declares: its
	// appProtocol, or "http" for a port named http or http-<suffix>
	// (declaredProtocol); "" when it declares none. A resolver port uses
	// it to tell HTTP from other TCP traffic, sniffing only when it is "".
	AppProtocol string
	// Changed is closed when anything that may change the answer changes.
	// It is only set when Addrs is empty: a caller that needs to wait for a
	// Ready endpoint blocks on it and then asks again.
	Changed <-chan struct{}
}

// EndpointSource yields the Ready endpoints of the pods behind a public
// Service, and whether the resolver is in front of it. Unit tests feed one
// by hand (MemoryEndpoints); the command uses NewInformerEndpoints.
type EndpointSource interface {
	FrontSource
	// Lookup resolves the public Service svc. hostPort is the port from the
	// Host, or "" when it had none; it selects the Service port. An
	// unknown Service is ErrServiceNotFound.
	Lookup(svc ServiceRef, hostPort string) (Backends, error)
}

// broadcaster hands out one channel per key and closes it on the next
// broadcast for that key: every waiter sees it at once, nobody polls. A key is
// only in the map while someone asked to watch it since its last change.
type broadcaster[K comparable] struct {
	mu    sync.Mutex
	chans map[K]chan struct{}
}

func newBroadcaster[K comparable]() *broadcaster[K] {
	return &broadcaster[K]{chans: map[K]chan struct{}{}}
}

// watch returns the channel closed on the next broadcast(k).
func (b *broadcaster[K]) watch(k K) <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	ch, ok := b.chans[k]
	if !ok {
		ch = make(chan struct{})
		b.chans[k] = ch
	}
	return ch
}

// broadcast closes the channel every watcher of k holds.
func (b *broadcaster[K]) broadcast(k K) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ch, ok := b.chans[k]; ok {
		close(ch)
		delete(b.chans, k)
	}
}

// MemoryEndpoints is an EndpointSource set by hand. Every Service it is
// asked about exists, and the resolver is in front of it until
// SetInFront says otherwise; one never Set has no Ready endpoint. It is
// meant for tests and for harnesses without an apiserver.
type MemoryEndpoints struct {
	mu    sync.RWMutex
	addrs map[ServiceRef][]string
	// behind holds the Services the resolver is not in front of.
	behind map[ServiceRef]bool
	h2c    map[ServiceRef]bool
	proto  map[ServiceRef]string
	b      *broadcaster[ServiceRef]
}

// NewMemoryEndpoints returns an empty MemoryEndpoints.
func NewMemoryEndpoints() *MemoryEndpoints {
	return &MemoryEndpoints{
		addrs:  map[ServiceRef][]string{},
		behind: map[ServiceRef]bool{},
		h2c:    map[ServiceRef]bool{},
		proto:  map[ServiceRef]string{},
		b:      newBroadcaster[ServiceRef](),
	}
}

// Set replaces the Ready endpoints ("ip:port") of svc and tells its waiters.
func (m *MemoryEndpoints) Set(svc ServiceRef, addrs ...string) {
	a := slices.Clone(addrs)
	slices.Sort(a)
	a = slices.Compact(a)
	m.update(svc, func() { m.addrs[svc] = a })
}

// update changes what m says of svc under its lock, then tells svc's
// waiters.
func (m *MemoryEndpoints) update(svc ServiceRef, change func()) {
	m.mu.Lock()
	change()
	m.mu.Unlock()
	m.b.broadcast(svc)
}

// SetInFront says whether the resolver is in front of svc, and tells its
// waiters.
func (m *MemoryEndpoints) SetInFront(svc ServiceRef, inFront bool) {
	m.update(svc, func() { m.behind[svc] = !inFront })
}

// Front implements FrontSource.
func (m *MemoryEndpoints) Front(svc ServiceRef) (bool, <-chan struct{}) {
	get := func() bool {
		m.mu.RLock()
		defer m.mu.RUnlock()
		return !m.behind[svc]
	}
	if get() {
		return true, nil
	}
	ch := m.b.watch(svc)
	if get() {
		return true, nil
	}
	return false, ch
}

// SetH2C marks svc's port as speaking h2c.
func (m *MemoryEndpoints) SetH2C(svc ServiceRef, h2c bool) {
	m.update(svc, func() { m.h2c[svc] = h2c })
}

// SetAppProtocol sets the appProtocol of svc's port.
func (m *MemoryEndpoints) SetAppProtocol(svc ServiceRef, p string) {
	m.update(svc, func() { m.proto[svc] = p })
}

// Lookup implements EndpointSource.
func (m *MemoryEndpoints) Lookup(svc ServiceRef, _ string) (Backends, error) {
	get := func() Backends {
		m.mu.RLock()
		defer m.mu.RUnlock()
		return Backends{Addrs: m.addrs[svc], H2C: m.h2c[svc], AppProtocol: m.proto[svc]}
	}
	if t := get(); len(t.Addrs) > 0 {
		return t, nil
	}
	// Watch before the second read, so a Set in between is not missed.
	ch := m.b.watch(svc)
	t := get()
	if len(t.Addrs) == 0 {
		t.Changed = ch
	}
	return t, nil
}
