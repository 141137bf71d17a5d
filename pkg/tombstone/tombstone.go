// Package tombstone reads objects from informer delete events, which may
// carry a cache.DeletedFinalStateUnknown instead of the object when the
// watch missed the deletion.
package tombstone

import "k8s.io/client-go/tools/cache"

// Object returns obj as a T, unwrapping a delete tombstone first.
func Object[T any](obj any) (T, bool) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	t, ok := obj.(T)
	return t, ok
}
