package resolver

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/elasti-dev/elasti/pkg/resolver/identify"
	"github.com/elasti-dev/elasti/pkg/resolver/internal/resolvertest"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	elastifake "github.com/elasti-dev/elasti/pkg/generated/clientset/versioned/fake"
	elastiinformers "github.com/elasti-dev/elasti/pkg/generated/informers/externalversions"
	"github.com/elasti-dev/elasti/pkg/nsbudget"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
)

// One namespace's ElastiServices past its budget are cached as their
// identity only, and served by no index: the newest go, by
// creationTimestamp then name. Another namespace's ElastiService, created
// after all of them, is untouched; a deletion lets the oldest refused one
// back in on its next event.
func TestNamespaceBudgetKeepsTheNewestOutOfTheCache(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	body := strings.Repeat("x", 200)
	mk := func(ns string, i int) *v1.ElastiService {
		es := resolvertest.ElastiService(ns, fmt.Sprintf("es-%d", i), fmt.Sprintf("svc-%d", i), 1,
			v1.ProbeResponseRule{Response: resolvertest.CannedAnswer(200, body)})
		es.CreationTimestamp = metav1.NewTime(t0.Add(time.Duration(i) * time.Second))
		es.Status.ResolverPorts = []v1.ResolverPort{{Service: es.Spec.Service, Name: "http", Port: 80, ResolverPort: int32(20000 + i)}}
		return es
	}
	perSpec := nsbudget.Size(mk("x", 0))
	for _, tc := range []struct {
		name   string
		limits nsbudget.Limits
	}{
		{"count", nsbudget.Limits{Count: 3}},
		// Three specs fit to the byte; a fourth is one spec past.
		{"bytes", nsbudget.Limits{Bytes: 3 * perSpec}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Created newest first, so the first list is no help.
			var objs []runtime.Object
			for i := 3; i >= 0; i-- {
				objs = append(objs, mk("greedy", i))
			}
			objs = append(objs, mk("other", 9))
			client := elastifake.NewSimpleClientset(objs...)
			budget := clusterview.NewSpecBudget(tc.limits, nil)
			factory := elastiinformers.NewSharedInformerFactoryWithOptions(client, 0, elastiinformers.WithTransform(budget.Transform))
			informer := factory.Elasti().V1alpha1().ElastiServices()
			if err := budget.Watch(informer); err != nil {
				t.Fatal(err)
			}
			named, err := clusterview.NewNamedIndex(informer)
			if err != nil {
				t.Fatal(err)
			}
			routes, err := identify.NewInformerRouteTable(t.Context(), informer, resolvertest.AnyPort)
			if err != nil {
				t.Fatal(err)
			}
			factory.Start(t.Context().Done())
			t.Cleanup(factory.Shutdown)
			factory.WaitForCacheSync(t.Context().Done())
			resolvertest.Eventually(t, 5*time.Second, "the indexes to sync", func() bool { return named.HasSynced() && routes.HasSynced() })

			// The first list came newest first: es-3 was cached whole before
			// the older ones arrived. The operator's status write, which
			// sets NamespaceBudgetExceeded on it, is its next event.
			refused := mk("greedy", 3)
			refused.Status.Conditions = []metav1.Condition{{Type: v1.ConditionReady, Status: metav1.ConditionFalse, Reason: nsbudget.Reason}}
			if _, err := client.ElastiV1alpha1().ElastiServices("greedy").UpdateStatus(t.Context(), refused, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			resolvertest.Eventually(t, 5*time.Second, "es-3 cut down", func() bool { return !named.Named(clusterview.ServiceRef{Namespace: "greedy", Name: "svc-3"}) })
			for svc, want := range map[clusterview.ServiceRef]bool{
				{Namespace: "greedy", Name: "svc-0"}: true, {Namespace: "greedy", Name: "svc-2"}: true, {Namespace: "greedy", Name: "svc-3"}: false, {Namespace: "other", Name: "svc-9"}: true,
			} {
				if got := named.Named(svc); got != want {
					t.Errorf("Named(%s) = %v, want %v", svc, got, want)
				}
			}
			if _, ok := routes.Lookup(20003); ok {
				t.Error("the refused ElastiService's resolver port is routed")
			}
			if _, ok := routes.Lookup(20009); !ok {
				t.Error("the other namespace's resolver port is not routed")
			}
			obj, _, _ := informer.Informer().GetIndexer().GetByKey("greedy/es-3")
			if es := obj.(*v1.ElastiService); es.Spec.Service != "" || es.Spec.ProbeResponse != nil {
				t.Errorf("refused ElastiService cached with its spec: %+v", es.Spec)
			}

			// A deletion lets es-3 back in, on the event of the operator's
			// status write that clears the condition.
			if err := client.ElastiV1alpha1().ElastiServices("greedy").Delete(t.Context(), "es-1", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			resolvertest.Eventually(t, 5*time.Second, "es-3 admitted", func() bool { return budget.Admitted(mk("greedy", 3)) })
			if _, err := client.ElastiV1alpha1().ElastiServices("greedy").UpdateStatus(t.Context(), mk("greedy", 3), metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			resolvertest.Eventually(t, 5*time.Second, "es-3 served again", func() bool { return named.Named(clusterview.ServiceRef{Namespace: "greedy", Name: "svc-3"}) })
		})
	}
}
