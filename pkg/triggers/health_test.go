package triggers

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

// Within one memo every distinct check reaches Prometheus once, however many
// callers ask at the same moment, and a failure is everybody's answer.
func TestHealthMemoAsksEachCheckOnce(t *testing.T) {
	f := newFakeProm(t, func(promql string) (int, string) {
		if strings.Contains(promql, `job="broken"`) {
			return 500, "overloaded"
		}
		return 200, vector(`"1"`)
	})
	c := &Client{Timeout: 2 * time.Second, Health: &HealthMemo{}}
	ask := func(p Prometheus, window time.Duration, callers int) (healthy int, errs []error) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range callers {
			wg.Go(func() {
				ok, err := c.Healthy(t.Context(), p, window)
				mu.Lock()
				defer mu.Unlock()
				if ok {
					healthy++
				}
				if err != nil {
					errs = append(errs, err)
				}
			})
		}
		wg.Wait()
		return healthy, errs
	}
	base := Prometheus{ServerAddress: f.URL, Headers: map[string]string{"Authorization": "Bearer a"}}
	if healthy, errs := ask(base, time.Minute, 50); healthy != 50 || errs != nil {
		t.Fatalf("50 callers: %d healthy, errors %v", healthy, errs)
	}
	if n := len(f.queries()); n != 1 {
		t.Fatalf("50 callers sent %d uptime queries, want 1", n)
	}

	otherFilter := base
	otherFilter.UptimeFilter = `job="other"`
	otherAuth := base
	otherAuth.Headers = map[string]string{"Authorization": "Bearer b"}
	broken := base
	broken.UptimeFilter = `job="broken"`
	ask(otherFilter, time.Minute, 5)
	ask(otherAuth, time.Minute, 5)
	ask(base, 2*time.Minute, 5)
	if healthy, errs := ask(broken, time.Minute, 5); healthy != 0 || len(errs) != 5 || ReasonOf(errs[0]) != ReasonBadStatus {
		t.Errorf("a failing check: %d healthy, errors %v; want 5 BadStatus errors", healthy, errs)
	}
	if n := len(f.queries()); n != 5 {
		t.Errorf("%d uptime queries, want 5: one for each filter, Authorization, window and the failing check:\n%s",
			n, strings.Join(f.queries(), "\n"))
	}

	// A new memo asks again.
	c.Health = &HealthMemo{}
	ask(base, time.Minute, 3)
	if n := len(f.queries()); n != 6 {
		t.Errorf("%d uptime queries after a new memo, want 6", n)
	}
}

// A caller waiting for another's check gives up when its own context ends.
func TestHealthMemoWaiterHonoursItsContext(t *testing.T) {
	release := make(chan struct{})
	f := newFakeProm(t, func(string) (int, string) {
		<-release
		return 200, vector(`"1"`)
	})
	defer close(release)
	c := &Client{Timeout: 5 * time.Second, Health: &HealthMemo{}}
	p := Prometheus{ServerAddress: f.URL}
	go func() { _, _ = c.Healthy(context.Background(), p, time.Minute) }()
	for deadline := time.Now().Add(5 * time.Second); len(f.queries()) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first check never reached Prometheus")
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	ok, err := c.Healthy(ctx, p, time.Minute)
	if ok || ReasonOf(err) != ReasonTimeout || time.Since(start) > 2*time.Second {
		t.Errorf("waiter = %v, %v after %s; want a Timeout error once its context ends", ok, err, time.Since(start))
	}
}

// An answer is shared for healthMaxAge only, so a Prometheus that restarts
// during a long poll is seen by the evaluations after it; a check its
// caller canceled is asked again at once.
func TestHealthMemoAnswersExpire(t *testing.T) {
	f := newFakeProm(t, always(200, vector(`"1"`)))
	c := &Client{Timeout: 2 * time.Second, Health: &HealthMemo{}}
	p := Prometheus{ServerAddress: f.URL}
	if ok, err := c.Healthy(t.Context(), p, time.Minute); !ok || err != nil {
		t.Fatalf("Healthy = %v, %v", ok, err)
	}
	for _, check := range c.Health.checks {
		check.at = check.at.Add(-healthMaxAge - time.Millisecond)
	}
	if ok, err := c.Healthy(t.Context(), p, time.Minute); !ok || err != nil {
		t.Fatalf("Healthy = %v, %v", ok, err)
	}
	if n := len(f.queries()); n != 2 {
		t.Errorf("%d uptime queries, want 2: the first answer was too old to share", n)
	}

	canceled, cancel := context.WithCancel(t.Context())
	cancel()
	other := Prometheus{ServerAddress: f.URL, UptimeFilter: `job="other"`}
	if _, err := c.Healthy(canceled, other, time.Minute); ReasonOf(err) != ReasonCanceled {
		t.Fatalf("a canceled check: %v, want a Canceled error", err)
	}
	if ok, err := c.Healthy(t.Context(), other, time.Minute); !ok || err != nil {
		t.Errorf("after a canceled check: %v, %v; want it asked again and healthy", ok, err)
	}
}
