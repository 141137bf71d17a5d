package idle

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// SeenAtZero returns when this replica first saw es's target at zero since
// it last saw it above zero. The controller's sleep bookkeeping takes it
// as the sleep's start: more precise than the sync that writes it, which
// may run a while later.
func (w *Wakes) SeenAtZero(es types.NamespacedName) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t, ok := w.atZero[es]
	return t, ok
}
