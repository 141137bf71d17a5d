package traffic

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elasti-dev/elasti/pkg/testenv"
)

const (
	// darkSample is how often the watcher looks.
	darkSample = 100 * time.Millisecond
	// handScaleDownBound is how long a Service may be dark after a test
	// scales its target to zero by hand: the pods' endpoints go at once,
	// and the operator needs this long at most, on this 2-core machine
	// under a full test run, to see the target at zero and put the
	// resolver in front. The operator's own scale-down is make-before-break
	// and gets no such allowance.
	handScaleDownBound = 3 * time.Second
)

// darkWatch fails its test if any watched Service is seen with no ready
// endpoint (neither a pod's nor the resolver's) outside the moments the
// test said to expect.
type darkWatch struct {
	t        testing.TB
	e        *testenv.Env
	services []string

	mu         sync.Mutex
	allowUntil time.Time
	samples    int
	violations []string

	cancel context.CancelFunc
	done   chan struct{}
}

// watchDark starts watching services in e's namespace until the test ends.
func watchDark(t testing.TB, e *testenv.Env, services ...string) *darkWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &darkWatch{t: t, e: e, services: services, cancel: cancel, done: make(chan struct{})}
	go w.run(ctx)
	t.Cleanup(w.check)
	return w
}

// Tolerate allows darkness for the next d, e.g. right before a test
// scales a target to zero by hand.
func (w *darkWatch) Tolerate(d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.allowUntil = time.Now().Add(d)
}

func (w *darkWatch) run(ctx context.Context) {
	defer close(w.done)
	ticker := time.NewTicker(darkSample)
	defer ticker.Stop()
	for {
		for _, svc := range w.services {
			ready, err := w.readyEndpoints(ctx, svc)
			if ctx.Err() != nil {
				return
			}
			now := time.Now()
			w.mu.Lock()
			w.samples++
			if err == nil && ready == 0 && now.After(w.allowUntil) && len(w.violations) < 20 {
				w.violations = append(w.violations, fmt.Sprintf("%s: Service %s had no ready endpoint", now.Format("15:04:05.000"), svc))
			}
			w.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// readyEndpoints counts ready addresses over every slice labelled for svc.
func (w *darkWatch) readyEndpoints(ctx context.Context, svc string) (int, error) {
	list, err := w.e.Kube.DiscoveryV1().EndpointSlices(w.e.NS).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + svc,
	})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, s := range list.Items {
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
				n += len(ep.Addresses)
			}
		}
	}
	return n, nil
}

// check stops the watcher and fails the test on any unexpected darkness.
func (w *darkWatch) check() {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.samples == 0 {
		w.t.Errorf("dark-Service watcher took no sample")
	}
	for _, v := range w.violations {
		w.t.Errorf("dark Service: %s", v)
	}
}
