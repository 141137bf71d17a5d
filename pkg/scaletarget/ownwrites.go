package scaletarget

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/cache"
)

// ownWriteTTL bounds how long a scale write this process made may stand in
// for a cache that has not shown it yet. The informer shows a write in
// milliseconds; past this long the cache is believed whatever it says, so
// a write lost to a stuck watch cannot hide the target's real state for
// more than ownWriteTTL.
const ownWriteTTL = 30 * time.Second

// ownWrite is a scale write this process made: the replicas it wrote, and
// the object (UID) and generation the cache held when it wrote them. The
// write bumps the generation, so a cached generation above that one means
// the cache has seen this write, or a later one, and speaks for itself
// again; so does a cached object with another UID, created since.
type ownWrite struct {
	replicas   int32
	generation int64
	uid        types.UID
}

// ownWrites makes a Scaler read its own writes. Without it, a read in the
// milliseconds after a write returns the replicas from before it: a wake
// request that lands just after the idle poller scaled a target to zero
// would be answered "already up" and leave the target at zero (and its
// KEDA ScaledObject paused) until the resolver asks again. This is
// kube-controller-manager's expectations idea, keyed by generation as the
// wake server's settle window is.
type ownWrites struct {
	writes *cache.Expiring // Ref → ownWrite
}

func newOwnWrites() ownWrites { return ownWrites{writes: cache.NewExpiring()} }

// wrote records that this process set ref to replicas when the cache
// held cached. A second write before the cache shows the first expects one
// generation more, so the cache showing the first write does not undo the
// second.
func (o ownWrites) wrote(ref Ref, cached State, replicas int32) {
	generation := cached.Generation
	if v, ok := o.writes.Get(ref); ok && v.(ownWrite).pending(cached) {
		last := v.(ownWrite)
		if last.replicas == replicas {
			return
		}
		generation = last.generation + 1
	} else if cached.Replicas == replicas {
		o.writes.Delete(ref)
		return
	}
	o.writes.Set(ref, ownWrite{replicas: replicas, generation: generation, uid: cached.UID}, ownWriteTTL)
}

// forget drops what is recorded for ref: a write that failed may or may
// not have happened, so the cache is the best word on it.
func (o ownWrites) forget(ref Ref) { o.writes.Delete(ref) }

// apply returns cached with this process's latest write to ref over it,
// while the cache has not caught up with that write.
func (o ownWrites) apply(ref Ref, cached State) State {
	v, ok := o.writes.Get(ref)
	if !ok {
		return cached
	}
	w := v.(ownWrite)
	if !w.pending(cached) {
		o.writes.Delete(ref)
		return cached
	}
	cached.Replicas = w.replicas
	return cached
}

// pending reports whether the cache, holding cached, has yet to show w.
func (w ownWrite) pending(cached State) bool {
	return cached.UID == w.uid && cached.Generation <= w.generation
}
