package testenv

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// deleteEach deletes every name, never more than finalizeWorkers at once,
// takes a name already gone for done and reports a real failure by name.
func TestDeleteEachIsBoundedAndReportsByName(t *testing.T) {
	var (
		mu       sync.Mutex
		deleted  []string
		inFlight atomic.Int32
		most     atomic.Int32
	)
	names := make([]string, 50)
	for i := range names {
		names[i] = fmt.Sprintf("es-%d", i)
	}
	gone := apierrors.NewNotFound(schema.GroupResource{Resource: "elastiservices"}, "es-3")
	err := deleteEach(context.Background(), names, func(ctx context.Context, name string) error {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		if _, ok := ctx.Deadline(); !ok {
			t.Errorf("delete of %s has no deadline of its own", name)
		}
		time.Sleep(2 * time.Millisecond)
		switch name {
		case "es-3":
			return gone
		case "es-7":
			return errors.New("stream error: INTERNAL_ERROR")
		}
		mu.Lock()
		deleted = append(deleted, name)
		mu.Unlock()
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "es-7") {
		t.Errorf("error = %v, want the failure of es-7", err)
	}
	if len(deleted) != len(names)-2 {
		t.Errorf("deleted %d names, want %d", len(deleted), len(names)-2)
	}
	if m := most.Load(); m > finalizeWorkers || m < 2 {
		t.Errorf("%d deletes in flight at most, want 2..%d", m, finalizeWorkers)
	}
}
