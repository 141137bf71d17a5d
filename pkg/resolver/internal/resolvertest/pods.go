package resolvertest

import (
	"context"
	"slices"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// FakePodAPI is the apiserver's pods as a pod view lists and watches
// them: Pods to list, a fake watcher per watch, errors set by hand, and
// the selectors it was asked for.
type FakePodAPI struct {
	mu        sync.Mutex
	Pods      []corev1.Pod
	listErr   error
	watchErr  error
	Selectors []string
	watchers  []*watch.FakeWatcher
}

// ListWatch is what the view lists and watches pods of namespace with.
func (f *FakePodAPI) ListWatch(namespace, selector string) cache.ListerWatcherWithContext {
	f.mu.Lock()
	f.Selectors = append(f.Selectors, namespace+" "+selector)
	f.mu.Unlock()
	return noWatchList{&cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.listErr != nil {
				return nil, f.listErr
			}
			return &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: slices.Clone(f.Pods)}, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			f.mu.Lock()
			err := f.watchErr
			f.mu.Unlock()
			if err != nil {
				return nil, err
			}
			w := watch.NewFakeWithChanSize(16, false)
			f.mu.Lock()
			f.watchers = append(f.watchers, w)
			f.mu.Unlock()
			return w, nil
		},
	}}
}

// noWatchList is a fake that says it cannot stream a list, so the
// reflector lists, then watches.
type noWatchList struct{ *cache.ListWatch }

func (noWatchList) IsWatchListSemanticsUnSupported() bool { return true }

// SetPods sets the pods the next lists return.
func (f *FakePodAPI) SetPods(pods ...corev1.Pod) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Pods = pods
}

// SetErrors makes the lists answer list and the watches watch from now
// on; nil, nil lets them through again.
func (f *FakePodAPI) SetErrors(list, watch error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listErr, f.watchErr = list, watch
}

// Watcher is the latest watch the view started, or nil.
func (f *FakePodAPI) Watcher() *watch.FakeWatcher {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.watchers) == 0 {
		return nil
	}
	return f.watchers[len(f.watchers)-1]
}

// ServiceLister lists svcs.
func ServiceLister(t *testing.T, svcs ...*corev1.Service) corelisters.ServiceLister {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, s := range svcs {
		if err := idx.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	return corelisters.NewServiceLister(idx)
}

// SelectingService is a Service whose selector is sel.
func SelectingService(ns, name string, sel map[string]string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Selector: sel, Ports: []corev1.ServicePort{{Port: 80}}}}
}

// FakePods is a PodGetter over pods set by hand; it counts reads.
type FakePods struct {
	mu    sync.Mutex
	pods  map[string]*corev1.Pod
	reads map[string]int
}

// NewFakePods reads pods.
func NewFakePods(pods ...*corev1.Pod) *FakePods {
	f := &FakePods{pods: map[string]*corev1.Pod{}, reads: map[string]int{}}
	for _, p := range pods {
		f.pods[p.Namespace+"/"+p.Name] = p
	}
	return f
}

// Pod implements the resolver's PodGetter.
func (f *FakePods) Pod(_ context.Context, namespace, name string) (*corev1.Pod, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads[namespace+"/"+name]++
	if p, ok := f.pods[namespace+"/"+name]; ok {
		return p.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name)
}

// Set puts p in place of the pod of its name, as a status update does.
func (f *FakePods) Set(p *corev1.Pod) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pods[p.Namespace+"/"+p.Name] = p
}

// Delete removes the pod of that name: the next read finds nothing.
func (f *FakePods) Delete(namespace, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.pods, namespace+"/"+name)
}

// CountRead counts a read of the pod that a wrapper answered itself (a
// failure it injects), so ReadsOf counts every read.
func (f *FakePods) CountRead(namespace, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads[namespace+"/"+name]++
}

// ReadsOf is how many times the pod of that name was read.
func (f *FakePods) ReadsOf(namespace, name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads[namespace+"/"+name]
}
