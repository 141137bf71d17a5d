package e2e

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	elastiinformers "github.com/elasti-dev/elasti/pkg/generated/informers/externalversions"
	"github.com/elasti-dev/elasti/test/testenv"
)

// maxTimeline bounds the writes a timeline keeps: a chaos run makes a few
// hundred; past the bound the oldest go.
const maxTimeline = 20000

// timeline is the writes a test watched in its namespace, in the order the
// watches delivered them: each Deployment's replicas and each
// ElastiService's mode as they changed. It is started before the test acts,
// so a change that came sooner than the test could look is still seen; and
// a failing test prints it, so its log says what happened and when.
type timeline struct {
	start time.Time

	mu      sync.Mutex
	cond    *sync.Cond
	entries []timelineEntry
	dropped int // entries pushed out by maxTimeline
}

type timelineEntry struct {
	at   time.Time
	kind string // "replicas" or "mode"
	text string
}

// watchTimeline starts watching e's namespace; it stops when the test
// ends, and prints what it saw if the test failed.
func watchTimeline(t *testing.T, e *testenv.Env) *timeline {
	t.Helper()
	tl := &timeline{start: time.Now()}
	tl.cond = sync.NewCond(&tl.mu)
	stop := make(chan struct{})

	kube := informers.NewSharedInformerFactoryWithOptions(e.Kube, 0, informers.WithNamespace(e.NS))
	if _, err := kube.Apps().V1().Deployments().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { tl.replicas(nil, obj.(*appsv1.Deployment)) },
		UpdateFunc: func(old, obj any) {
			tl.replicas(old.(*appsv1.Deployment), obj.(*appsv1.Deployment))
		},
	}); err != nil {
		t.Fatal(err)
	}
	elasti := elastiinformers.NewSharedInformerFactoryWithOptions(e.Elasti, 0, elastiinformers.WithNamespace(e.NS))
	if _, err := elasti.Elasti().V1alpha1().ElastiServices().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, obj any) {
			was, is := old.(*elastiv1alpha1.ElastiService), obj.(*elastiv1alpha1.ElastiService)
			if was.Status.Mode != is.Status.Mode {
				tl.add("mode", fmt.Sprintf("ElastiService %s: mode %q -> %q", is.Name, was.Status.Mode, is.Status.Mode))
			}
		},
	}); err != nil {
		t.Fatal(err)
	}
	kube.Start(stop)
	elasti.Start(stop)
	if !cache.WaitForCacheSync(t.Context().Done(),
		kube.Apps().V1().Deployments().Informer().HasSynced,
		elasti.Elasti().V1alpha1().ElastiServices().Informer().HasSynced) {
		t.Fatal("the timeline's watches did not sync")
	}
	t.Cleanup(func() {
		close(stop)
		kube.Shutdown()
		elasti.Shutdown()
		tl.mu.Lock()
		tl.cond.Broadcast()
		tl.mu.Unlock()
		if t.Failed() {
			t.Logf("the writes the test watched:\n%s", tl.String(0))
		}
	})
	return tl
}

func (tl *timeline) replicas(old, d *appsv1.Deployment) {
	was := int32(-1)
	if old != nil && old.Spec.Replicas != nil {
		was = *old.Spec.Replicas
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas == was {
		return
	}
	if old == nil {
		tl.add("created", fmt.Sprintf("Deployment %s: replicas %d", d.Name, *d.Spec.Replicas))
		return
	}
	tl.add("replicas", fmt.Sprintf("Deployment %s: replicas %d -> %d", d.Name, was, *d.Spec.Replicas))
}

func (tl *timeline) add(kind, text string) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if len(tl.entries) == maxTimeline {
		tl.entries = tl.entries[1:]
		tl.dropped++
	}
	tl.entries = append(tl.entries, timelineEntry{at: time.Now(), kind: kind, text: text})
	tl.cond.Broadcast()
}

// mark is where the timeline stands now: what is added later is after it.
func (tl *timeline) mark() int {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.dropped + len(tl.entries)
}

// waitFor waits until an entry of kind is added after mark, for at most
// timeout, and returns it; ok is false on a timeout.
func (tl *timeline) waitFor(mark int, kind string, timeout time.Duration) (timelineEntry, bool) {
	deadline := time.Now().Add(timeout)
	wake := time.AfterFunc(timeout, func() {
		tl.mu.Lock()
		tl.cond.Broadcast()
		tl.mu.Unlock()
	})
	defer wake.Stop()
	tl.mu.Lock()
	defer tl.mu.Unlock()
	for {
		for i := max(mark-tl.dropped, 0); i < len(tl.entries); i++ {
			if tl.entries[i].kind == kind {
				return tl.entries[i], true
			}
		}
		if !time.Now().Before(deadline) {
			return timelineEntry{}, false
		}
		tl.cond.Wait()
	}
}

// String is the timeline from mark on, one write a line, timed from the
// start of the watch.
func (tl *timeline) String(mark int) string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var b strings.Builder
	if tl.dropped > mark {
		fmt.Fprintf(&b, "(%d earlier writes not kept)\n", tl.dropped-mark)
	}
	for _, e := range tl.entries[max(mark-tl.dropped, 0):] {
		fmt.Fprintf(&b, "%9s  %s\n", e.at.Sub(tl.start).Round(time.Millisecond), e.text)
	}
	return b.String()
}
