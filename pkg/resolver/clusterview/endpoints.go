package clusterview

import (
	"errors"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// ServiceRef names a public Service.
type ServiceRef struct {
	Namespace string
	Name      string
}

func (s ServiceRef) String() string { return s.Namespace + "/" + s.Name }

// KRef is the structured-logging form of s.
func (s ServiceRef) KRef() klog.ObjectRef { return klog.KRef(s.Namespace, s.Name) }

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
	// Unready are endpoints the Service's own slices list not ready (and
	// not terminating), each naming its pod, at most maxUnreadyEndpoints:
	// the pods a wake is starting. The resolver never forwards to one
	// unless its direct check passed (package directprobe).
	Unready []UnreadyEndpoint
	// Probed says Addrs are pods whose direct check passed, which the
	// slices do not list Ready yet.
	Probed bool
	// FromPods says Addrs are pods the kubelet wrote Ready, which the
	// slices do not list Ready yet (the pod view, vouch.go).
	FromPods bool

	// target is the Service port's targetPort and family the Service's
	// first IP family: what a pod's endpoint is on (podEndpoint).
	target intstr.IntOrString
	family corev1.IPFamily
	// readyPods names, by address, the pod the slices give for each of
	// Addrs (its targetRef), which vouchByName checks.
	readyPods map[string]podRef
	// Unread says Ready addresses of the slices were left out because no
	// read has vouched for their pods yet (vouchByName): a read that
	// comes in says so, but one refused by the namespace's read rate or
	// the reads in flight never comes, so a hold looks again on its own
	// (hold.wait).
	Unread bool
}

// podRef is a pod of the Service's namespace, as a slice names it.
type podRef struct {
	name string
	uid  types.UID
}

// Source names where Addrs came from, for log lines: pods whose direct
// readiness check passed, or the Ready endpoints of the slices.
func (b Backends) Source() string {
	switch {
	case b.Probed:
		return "direct probe"
	case b.FromPods:
		return "pod Ready"
	}
	return "EndpointSlice"
}

// UnreadyEndpoint is an endpoint listed not ready, on the port Backends
// are for, with the pod its targetRef names in the Service's namespace.
type UnreadyEndpoint struct {
	IP   string
	Port int32
	Pod  string
	UID  types.UID
}

// MaxUnreadyEndpoints bounds Backends.Unready: a wake from zero starts
// the target's minimum replicas, and the first of them to pass releases
// every held request, so a few are plenty; the rest wait for the
// kubelet's Ready as before.
const MaxUnreadyEndpoints = 8

// EndpointSource yields the Ready endpoints of the pods behind a public
// Service, and whether the resolver is in front of it. Unit tests feed one
// by hand (MemoryEndpoints); the command uses NewInformerEndpoints.
//
// Front and Lookup only read: a request keeps no state in the source
// unless it waits, and then only through Watch, whose stop removes it.
// Hosts are client input, so a read that left state behind for each name
// asked about would let any client grow the resolver without bound.
type EndpointSource interface {
	FrontSource
	// Lookup resolves the public Service svc. hostPort is the port from the
	// Host, or "" when it had none; it selects the Service port. An
	// unknown Service is ErrServiceNotFound.
	Lookup(svc ServiceRef, hostPort string) (Backends, error)
	// Watch returns a channel closed on the next change that may change
	// what Front or Lookup say of svc, and stop, which the caller must
	// call once it no longer waits (more than once is fine). A caller
	// watches first and reads after, so a change in between is not
	// missed. Callers watch only Services the resolver's own caches know
	// (one in front, or one an ElastiService names), never a bare name a
	// client sent.
	Watch(svc ServiceRef) (changed <-chan struct{}, stop func())
}

// Broadcaster hands out one channel per key and closes it on the next
// broadcast for that key: every waiter sees it at once, nobody polls. A key
// is in the map only while someone watches it: its entry counts its
// watchers, and the last one's stop removes it, as does a broadcast. So the
// map never holds more entries than there are waits under way, whatever
// keys clients name.
type Broadcaster[K comparable] struct {
	mu    sync.Mutex
	chans map[K]*watchers
}

// watchers is one key's channel and the number of watches not stopped.
type watchers struct {
	ch chan struct{}
	n  int
}

func NewBroadcaster[K comparable]() *Broadcaster[K] {
	return &Broadcaster[K]{chans: map[K]*watchers{}}
}

// Watch returns the channel closed on the next broadcast(k), and stop,
// which ends this watch; the entry for k goes with its last watch.
func (b *Broadcaster[K]) Watch(k K) (<-chan struct{}, func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	w, ok := b.chans[k]
	if !ok {
		w = &watchers{ch: make(chan struct{})}
		b.chans[k] = w
	}
	w.n++
	return w.ch, sync.OnceFunc(func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		// After a broadcast k may have a new entry: leave that one alone.
		if w.n--; w.n == 0 && b.chans[k] == w {
			delete(b.chans, k)
		}
	})
}

// Broadcast closes the channel every watcher of k holds.
func (b *Broadcaster[K]) Broadcast(k K) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if w, ok := b.chans[k]; ok {
		close(w.ch)
		delete(b.chans, k)
	}
}

// watching returns the number of keys watched.
func (b *Broadcaster[K]) watching() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.chans)
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
	// unready holds the not-ready endpoints Lookup returns.
	unready map[ServiceRef][]UnreadyEndpoint
	// target holds the targetPort of a Service's port (SetTarget).
	target map[ServiceRef]intstr.IntOrString
	// pods holds, by address, the pod a Ready endpoint names (SetPod).
	pods map[ServiceRef]map[string]podRef
	b    *Broadcaster[ServiceRef]
}

// NewMemoryEndpoints returns an empty MemoryEndpoints.
func NewMemoryEndpoints() *MemoryEndpoints {
	return &MemoryEndpoints{
		addrs:   map[ServiceRef][]string{},
		behind:  map[ServiceRef]bool{},
		h2c:     map[ServiceRef]bool{},
		proto:   map[ServiceRef]string{},
		unready: map[ServiceRef][]UnreadyEndpoint{},
		target:  map[ServiceRef]intstr.IntOrString{},
		pods:    map[ServiceRef]map[string]podRef{},
		b:       NewBroadcaster[ServiceRef](),
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
	m.b.Broadcast(svc)
}

// SetUnready replaces the endpoints svc's slices list not ready, and
// tells its waiters.
func (m *MemoryEndpoints) SetUnready(svc ServiceRef, eps ...UnreadyEndpoint) {
	m.update(svc, func() { m.unready[svc] = slices.Clone(eps) })
}

// SetPod says that svc's Ready endpoint at ip names the pod name, uid
// (its targetRef), and tells its waiters.
func (m *MemoryEndpoints) SetPod(svc ServiceRef, ip, name string, uid types.UID) {
	m.update(svc, func() {
		if m.pods[svc] == nil {
			m.pods[svc] = map[string]podRef{}
		}
		m.pods[svc][ip] = podRef{name: name, uid: uid}
	})
}

// SetInFront says whether the resolver is in front of svc, and tells its
// waiters.
func (m *MemoryEndpoints) SetInFront(svc ServiceRef, inFront bool) {
	m.update(svc, func() { m.behind[svc] = !inFront })
}

// Front implements FrontSource.
func (m *MemoryEndpoints) Front(svc ServiceRef) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return !m.behind[svc]
}

// Watch implements EndpointSource.
func (m *MemoryEndpoints) Watch(svc ServiceRef) (<-chan struct{}, func()) { return m.b.Watch(svc) }

// SetH2C marks svc's port as speaking h2c.
func (m *MemoryEndpoints) SetH2C(svc ServiceRef, h2c bool) {
	m.update(svc, func() { m.h2c[svc] = h2c })
}

// SetTarget sets the targetPort of svc's port: what a pod's endpoint is
// on for the pod view (vouch.go).
func (m *MemoryEndpoints) SetTarget(svc ServiceRef, target intstr.IntOrString) {
	m.update(svc, func() { m.target[svc] = target })
}

// SetAppProtocol sets the appProtocol of svc's port.
func (m *MemoryEndpoints) SetAppProtocol(svc ServiceRef, p string) {
	m.update(svc, func() { m.proto[svc] = p })
}

// Lookup implements EndpointSource.
func (m *MemoryEndpoints) Lookup(svc ServiceRef, _ string) (Backends, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return Backends{Addrs: m.addrs[svc], H2C: m.h2c[svc], AppProtocol: m.proto[svc], Unready: m.unready[svc], target: m.target[svc],
		readyPods: m.pods[svc]}, nil
}

// AllSynced reports whether every informer (and handler registration) in
// synced has synced.
func AllSynced(synced []cache.InformerSynced) bool {
	for _, s := range synced {
		if !s() {
			return false
		}
	}
	return true
}
