package nsinformer_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/elasti-dev/elasti/pkg/nsinformer"
)

func svc(ns, name string, l map[string]string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: l}}
}

// Two namespaces' informers merged read as one: lists hold both, lookups
// by key and by namespace reach the right store, a third namespace's
// objects are never there, extra indexes span both, one handler sees the
// events of both, and writes to the merged store are refused.
func TestMergedReadsBothNamespacesAndNothingElse(t *testing.T) {
	client := fake.NewClientset(
		svc("a", "one", map[string]string{"app": "x"}),
		svc("b", "two", map[string]string{"app": "x"}),
		svc("c", "three", map[string]string{"app": "x"}),
	)
	namespaces := []string{"a", "b"}
	var factories []informers.SharedInformerFactory
	var each []cache.SharedIndexInformer
	for _, ns := range namespaces {
		f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
		factories = append(factories, f)
		each = append(each, f.Core().V1().Services().Informer())
	}
	inf := nsinformer.Merge(namespaces, each)
	if err := inf.AddIndexers(cache.Indexers{"app": func(obj any) ([]string, error) {
		return []string{obj.(*corev1.Service).Labels["app"]}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var added []string
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		mu.Lock()
		defer mu.Unlock()
		added = append(added, obj.(*corev1.Service).Namespace+"/"+obj.(*corev1.Service).Name)
	}})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer func() {
		close(stop)
		for _, f := range factories {
			f.Shutdown()
		}
	}()
	for _, f := range factories {
		f.Start(stop)
	}
	if !cache.WaitForCacheSync(stop, inf.HasSynced, reg.HasSynced) {
		t.Fatal("no sync")
	}
	select {
	case <-reg.HasSyncedChecker().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the merged registration's checker never reported synced")
	}

	lister := corelisters.NewServiceLister(inf.GetIndexer())
	all, err := lister.List(labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range all {
		got = append(got, s.Namespace+"/"+s.Name)
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"a/one", "b/two"}) {
		t.Errorf("List = %v, want a/one and b/two", got)
	}
	if s, err := lister.Services("b").Get("two"); err != nil || s.Name != "two" {
		t.Errorf("Services(b).Get(two) = %v, %v", s, err)
	}
	if inA, _ := lister.Services("a").List(labels.Everything()); len(inA) != 1 || inA[0].Name != "one" {
		t.Errorf("Services(a).List = %v, want only one", inA)
	}
	if _, err := lister.Services("c").Get("three"); err == nil {
		t.Error("an unwatched namespace's Service was found")
	}
	if _, exists, _ := inf.GetIndexer().GetByKey("c/three"); exists {
		t.Error("GetByKey found an unwatched namespace's Service")
	}
	if byApp, _ := inf.GetIndexer().ByIndex("app", "x"); len(byApp) != 2 {
		t.Errorf("ByIndex(app, x) = %d objects, want 2 (one per watched namespace)", len(byApp))
	}
	if keys := inf.GetIndexer().ListKeys(); len(keys) != 2 {
		t.Errorf("ListKeys = %v", keys)
	}
	if err := inf.GetIndexer().Add(svc("a", "new", nil)); err == nil {
		t.Error("the merged store accepted a write")
	}

	mu.Lock()
	slices.Sort(added)
	if !slices.Equal(added, []string{"a/one", "b/two"}) {
		t.Errorf("handler saw adds %v, want a/one and b/two", added)
	}
	mu.Unlock()
	if _, err := client.CoreV1().Services("b").Create(t.Context(), svc("b", "later", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Services("c").Create(t.Context(), svc("c", "later", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		seen := slices.Contains(added, "b/later")
		mu.Unlock()
		if seen {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the handler never saw b/later")
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if slices.Contains(added, "c/later") {
		t.Error("the handler saw an unwatched namespace's Service")
	}
	if err := inf.RemoveEventHandler(reg); err != nil {
		t.Errorf("RemoveEventHandler: %v", err)
	}
}

// One informer is returned as it is.
func TestMergeOfOneIsTheInformer(t *testing.T) {
	f := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	one := f.Core().V1().Services().Informer()
	if got := nsinformer.Merge([]string{""}, []cache.SharedIndexInformer{one}); got != one {
		t.Error("Merge of one informer wrapped it")
	}
}
