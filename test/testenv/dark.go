package testenv

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DarkSample is how often a DarkWatch looks at each Service.
const DarkSample = 100 * time.Millisecond

// DarkWatch fails its test if any watched Service is seen with no ready
// endpoint (neither a pod's nor the resolver's) outside the moments the
// test said to expect. It reads the apiserver, not a cache, so what it sees
// is what kube-proxy and ingress controllers see.
type DarkWatch struct {
	e        *Env
	services []string

	mu         sync.Mutex
	allowUntil time.Time
	samples    int
	unreadable int
	dark       map[string]bool
	violations int

	cancel context.CancelFunc
	done   chan struct{}
}

// WatchDark starts watching services in e's namespace until the test ends,
// when it fails the test on any unexpected darkness.
func (e *Env) WatchDark(services ...string) *DarkWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &DarkWatch{e: e, services: services, dark: map[string]bool{}, cancel: cancel, done: make(chan struct{})}
	go w.run(ctx)
	e.T.Cleanup(w.check)
	return w
}

// Tolerate allows darkness for the next d, e.g. right before a test
// scales a target to zero by hand.
func (w *DarkWatch) Tolerate(d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.allowUntil = time.Now().Add(d)
}

// Stats reports how many samples the watcher took and how many distinct
// Services it has seen dark when darkness was not tolerated.
func (w *DarkWatch) Stats() (samples, darkServices int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.samples, len(w.dark)
}

// Unreadable reports how many samples could not be taken because the
// apiserver did not answer the List (it was down or restarting): they
// count neither as dark nor as lit.
func (w *DarkWatch) Unreadable() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.unreadable
}

func (w *DarkWatch) run(ctx context.Context) {
	defer close(w.done)
	ticker := time.NewTicker(DarkSample)
	defer ticker.Stop()
	for {
		list, err := w.e.Kube.DiscoveryV1().EndpointSlices(w.e.NS).List(ctx, metav1.ListOptions{})
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			w.record(list.Items)
		} else {
			w.mu.Lock()
			w.unreadable++
			w.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

func (w *DarkWatch) record(slices []discoveryv1.EndpointSlice) {
	now := time.Now()
	ready := readyEndpoints(slices)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.samples++
	if !now.After(w.allowUntil) {
		return
	}
	for _, svc := range w.services {
		if ready[svc] > 0 {
			continue
		}
		w.dark[svc] = true
		if w.violations < 20 {
			w.violations++
			// At once, so the test is failed before the cleanups that
			// print logs only for a failed test run.
			w.e.T.Errorf("dark Service: %s: Service %s had no ready endpoint; its slices: %s",
				now.Format("15:04:05.000"), svc, DescribeSlices(slices, svc))
		}
	}
}

// readyEndpoints counts ready addresses per Service, over every slice
// labelled for it: one read per sample, however many Services are watched.
func readyEndpoints(slices []discoveryv1.EndpointSlice) map[string]int {
	ready := map[string]int{}
	for _, s := range slices {
		svc := s.Labels[discoveryv1.LabelServiceName]
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
				ready[svc] += len(ep.Addresses)
			}
		}
	}
	return ready
}

// DescribeSlices says what svc's slices held: each endpoint's addresses and
// its ready, serving and terminating conditions.
func DescribeSlices(slices []discoveryv1.EndpointSlice, svc string) string {
	var b strings.Builder
	for _, s := range slices {
		if s.Labels[discoveryv1.LabelServiceName] != svc {
			continue
		}
		fmt.Fprintf(&b, "[%s rv=%s:", s.Name, s.ResourceVersion)
		for _, ep := range s.Endpoints {
			c := ep.Conditions
			fmt.Fprintf(&b, " %v ready=%s serving=%s terminating=%s", ep.Addresses, flag(c.Ready), flag(c.Serving), flag(c.Terminating))
		}
		b.WriteString("] ")
	}
	if b.Len() == 0 {
		return "none"
	}
	return b.String()
}

func flag(b *bool) string {
	if b == nil {
		return "unset"
	}
	return strconv.FormatBool(*b)
}

// check stops the watcher and fails the test on any unexpected darkness.
func (w *DarkWatch) check() {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.samples == 0 {
		w.e.T.Errorf("dark-Service watcher took no sample")
	}
	if len(w.dark) > 0 {
		w.e.T.Errorf("%d of %d watched Services were dark at least once", len(w.dark), len(w.services))
	}
}
