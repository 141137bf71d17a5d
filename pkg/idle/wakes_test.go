package idle

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"
)

// statusWrites records the lastScaledUpTime writes, by seconds after now,
// and the lastHeld writes.
type statusWrites struct {
	mu     sync.Mutex
	writes []string
	held   []string
}

func (s *statusWrites) RecordHeld(_ context.Context, es types.NamespacedName, held time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held = append(s.held, fmt.Sprintf("%s:%s", es, held))
	return nil
}

func (s *statusWrites) RecordScaledUp(_ context.Context, es types.NamespacedName, at time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes = append(s.writes, fmt.Sprintf("%s@%s", es, at.Sub(now)))
	return nil
}

// A target seen at zero, then above it, was scaled up from zero: unless a
// wake recorded since explains it, the cooldown starts when it is seen, in
// memory and in status, as for a wake.
func TestScaleUpFromZeroByAnyoneStartsTheCooldown(t *testing.T) {
	web := types.NamespacedName{Namespace: "shop", Name: "web"}
	for _, tc := range []struct {
		name string
		// steps: "0" or "2" are replicas seen, "wake" a wake recorded, each
		// a second after the one before.
		steps []string
		want  string // status writes, by seconds after now
	}{
		{"scaled up by hand", []string{"0", "0", "2"}, "[shop/web@3s]"},
		{"woken through the scale endpoint", []string{"0", "wake", "2"}, "[shop/web@2s]"},
		{"the wake's event overtakes its record", []string{"0", "2", "wake"}, "[shop/web@2s shop/web@3s]"},
		{"a wake before the target went to zero explains nothing", []string{"wake", "0", "2"}, "[shop/web@1s shop/web@3s]"},
		{"up all along", []string{"2", "2"}, "[]"},
		{"never seen at zero before, as after a restart", []string{"2"}, "[]"},
		{"seen up twice after zero counts once", []string{"0", "2", "2"}, "[shop/web@2s]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			status := &statusWrites{}
			w := NewWakes(ctx, status, time.Second)
			clock := clocktesting.NewFakePassiveClock(now)
			w.clock = clock
			replayWakeSteps(ctx, w, clock, web, tc.steps)
			w.Wait()
			// The writes run concurrently: compare them in time order.
			slices.Sort(status.writes)
			if got := fmt.Sprint(status.writes); got != tc.want {
				t.Errorf("status writes %s, want %s", got, tc.want)
			}
			last, ok := w.LastWake(web)
			if tc.want != "[]" && (!ok || last.IsZero()) {
				t.Errorf("LastWake = %v, %v; want the scale-up", last, ok)
			}
		})
	}
}

// The poller's cooldown reads the in-memory record at once: status may
// reach the cache only after the next poll.
func TestLastWakeIsTheLatestScaleUp(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	w := NewWakes(ctx, &statusWrites{}, time.Second)
	web := types.NamespacedName{Namespace: "shop", Name: "web"}
	w.Record(ctx, web, now.Add(2*time.Second))
	w.Record(ctx, web, now.Add(time.Second)) // a record that arrives late
	if last, ok := w.LastWake(web); !ok || !last.Equal(now.Add(2*time.Second)) {
		t.Errorf("LastWake = %v, %v; want the later wake", last, ok)
	}
	w.Forget(web)
	if _, ok := w.LastWake(web); ok {
		t.Error("LastWake remembers a forgotten ElastiService")
	}
	w.Wait()
}

// A resolver's asks are remembered per ElastiService, the latest one,
// whatever order they arrive in, and forgotten with the ElastiService.
func TestLastAskedIsTheLatestAsk(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	w := NewWakes(ctx, &statusWrites{}, time.Second)
	web, api := types.NamespacedName{Namespace: "shop", Name: "web"}, types.NamespacedName{Namespace: "shop", Name: "api"}
	if _, ok := w.LastAsked(web); ok {
		t.Error("LastAsked knows an ask that was never made")
	}
	w.Asked(web, now.Add(2*time.Second))
	w.Asked(web, now.Add(time.Second)) // an ask whose handler ran late
	w.Asked(api, now)
	if last, ok := w.LastAsked(web); !ok || !last.Equal(now.Add(2*time.Second)) {
		t.Errorf("LastAsked(web) = %v, %v; want the later ask", last, ok)
	}
	if _, ok := w.LastWake(web); ok {
		t.Error("an ask was taken for a wake")
	}
	w.Forget(web)
	if _, ok := w.LastAsked(web); ok {
		t.Error("LastAsked remembers a forgotten ElastiService")
	}
	if last, ok := w.LastAsked(api); !ok || !last.Equal(now) {
		t.Errorf("forgetting web forgot api's ask: %v, %v", last, ok)
	}
	w.Wait()
}

// replayWakeSteps plays steps on w for web, one second apart on
// clock: "wake" records a wake, "0" observes zero replicas, anything else
// observes two.
func replayWakeSteps(ctx context.Context, w *Wakes, clock *clocktesting.FakePassiveClock, web types.NamespacedName, steps []string) {
	for _, step := range steps {
		clock.SetTime(clock.Now().Add(time.Second))
		switch step {
		case "wake":
			w.Record(ctx, web, clock.Now())
		case "0":
			w.ObserveReplicas(ctx, web, 0)
		default:
			w.ObserveReplicas(ctx, web, 2)
		}
	}
}

// A resolver's report of a held request is written to lastHeld, once per
// heldSpacing per ElastiService: the rest of a wake's reports are
// dropped, another ElastiService's are not.
func TestHeldReportsAreWrittenAtMostOncePerSpacing(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	st := &statusWrites{}
	w := NewWakes(ctx, st, time.Second)
	clk := clocktesting.NewFakeClock(now)
	w.held = cache.NewExpiringWithClock(clk)
	web := types.NamespacedName{Namespace: "shop", Name: "web"}
	api := types.NamespacedName{Namespace: "shop", Name: "api"}
	w.Held(ctx, web, 603*time.Millisecond)
	w.Held(ctx, web, 598*time.Millisecond) // the second replica's, or a later request's
	w.Held(ctx, api, 2*time.Second)
	clk.Step(heldSpacing + time.Millisecond)
	w.Held(ctx, web, 700*time.Millisecond) // the next wake's
	w.Wait()
	slices.Sort(st.held)
	if want := []string{"shop/api:2s", "shop/web:603ms", "shop/web:700ms"}; !slices.Equal(st.held, want) {
		t.Errorf("lastHeld writes %q, want %q", st.held, want)
	}
	w.Held(ctx, api, time.Second) // after Wait: refused, as Record
	if len(st.held) != 3 {
		t.Errorf("a report after Wait was written: %q", st.held)
	}
}
