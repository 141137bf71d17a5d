// Package scaletargettest holds a fake scaletarget.Interface for the tests
// of the packages that scale targets (pkg/idle, pkg/wakeserver), as
// client-go's fake packages do: one fake, so the two suites cannot drift
// apart on what a Scaler does. It is imported by tests only.
package scaletargettest

import (
	"context"
	"fmt"
	"sync"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/elasti-dev/elasti/pkg/scaletarget"
)

// Scaler is one target's scale subresource in memory. Every Ref names that
// one target. The exported fields shape it; set them before its first use.
type Scaler struct {
	// Missing makes Get answer an error, as for a target that is gone.
	Missing bool
	// Stale keeps Get on the old state after Scale, like a cache that has
	// not seen the write yet.
	Stale bool
	// Fail is the error every Scale answers, writing nothing.
	Fail error
	// Delay is how long each Scale takes before it answers.
	Delay time.Duration

	mu         sync.Mutex
	replicas   int32
	generation int64
	calls      int
	scaled     []int32
	keda       []bool
}

var _ scaletarget.Interface = (*Scaler)(nil)

// New returns a Scaler whose target has replicas.
func New(replicas int32) *Scaler { return &Scaler{replicas: replicas} }

// Get answers the target's replicas and generation.
func (f *Scaler) Get(scaletarget.Ref) (scaletarget.State, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Missing {
		return scaletarget.State{}, fmt.Errorf("not found")
	}
	return scaletarget.State{Replicas: f.replicas, Generation: f.generation}, nil
}

// Scale writes n replicas after Delay, or answers Fail. Every call counts in
// Calls, a successful one in Scaled; Get sees it unless Stale.
func (f *Scaler) Scale(_ context.Context, _ scaletarget.Ref, n int32) error {
	time.Sleep(f.Delay)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.Fail != nil {
		return f.Fail
	}
	f.scaled = append(f.scaled, n)
	if !f.Stale {
		f.replicas = n
		f.generation++
	}
	return nil
}

// SetKEDAPaused records paused in KEDA.
func (f *Scaler) SetKEDAPaused(_ context.Context, _, _ string, paused bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keda = append(f.keda, paused)
	return nil
}

// HPA finds no HorizontalPodAutoscaler; a test that needs one wraps the
// Scaler. It reads nothing of f, so a nil *Scaler answers it too.
func (f *Scaler) HPA(_, name string) (*autoscalingv2.HorizontalPodAutoscaler, error) {
	return nil, apierrors.NewNotFound(autoscalingv2.Resource("horizontalpodautoscalers"), name)
}

// ScaleBySomeoneElse changes the target as another client would (kubectl
// scale): it is no call of this Scaler's.
func (f *Scaler) ScaleBySomeoneElse(n int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.replicas = n
	f.generation++
}

// Replicas is the target's replicas now.
func (f *Scaler) Replicas() int32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.replicas
}

// Calls counts the Scale calls, failed ones included.
func (f *Scaler) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// Scaled lists the replicas of each successful Scale, in order.
func (f *Scaler) Scaled() []int32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int32(nil), f.scaled...)
}

// KEDA lists the paused values of each SetKEDAPaused, in order.
func (f *Scaler) KEDA() []bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]bool(nil), f.keda...)
}
