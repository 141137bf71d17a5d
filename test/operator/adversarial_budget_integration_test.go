package operator_test

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/controller"
	elastiinformers "github.com/elasti-dev/elasti/pkg/generated/informers/externalversions"
	"github.com/elasti-dev/elasti/pkg/nsbudget"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
	"github.com/elasti-dev/elasti/test/testenv"
)

// One namespace's ElastiServices past its budget (here 3, given to the
// operator as --namespace-budget-count would) are refused, the newest
// first: the 4th gets NamespaceBudgetExceeded and is not fronted, and the
// resolver, with the same budget over every namespace, does not serve it.
// Another namespace's ElastiService, created after all of them, is
// fronted and served. Deleting the oldest lets the 4th in. The attack
// needs only the right to create ElastiServices in one namespace (edit).
func TestNamespaceBudgetRefusesTheNewestOnly(t *testing.T) {
	t.Parallel()
	limits := nsbudget.Limits{Count: 3, Bytes: nsbudget.DefaultBytes}
	greedy, other := testenv.New(t), testenv.New(t)
	for _, e := range []*testenv.Env{greedy, other} {
		e.Opts.NamespaceBudget = limits
		e.StartOperator()
		e.Resolver(1)
	}
	named := resolverNamedView(t, greedy, limits)

	names := []string{"es-0", "es-1", "es-2", "es-3"}
	for _, n := range names {
		greedy.App(n, 0)
		greedy.ElastiService(n, n, elastiv1alpha1.KindDeployment, n)
		// creationTimestamp has whole seconds; the names order those
		// created within one, so the 4th is the newest either way.
	}
	other.App("calm", 0)
	other.ElastiService("calm", "calm", elastiv1alpha1.KindDeployment, "calm")

	for _, n := range names[:3] {
		greedy.WaitMode(n, elastiv1alpha1.ModeProxy)
	}
	greedy.WaitReason("es-3", metav1.ConditionFalse, controller.ReasonNamespaceBudgetExceeded)
	greedy.Eventually("a Warning "+controller.ReasonNamespaceBudgetExceeded+" event", func() (bool, string) {
		return greedy.HasEvent("es-3", controller.ReasonNamespaceBudgetExceeded)
	})
	if _, err := greedy.ResolverSlice("es-3"); err == nil {
		t.Error("the refused ElastiService's Service got a resolver slice")
	}
	if es := greedy.Get("es-3"); es.Status.Mode != "" {
		t.Errorf("refused ElastiService in mode %q", es.Status.Mode)
	}
	other.WaitMode("calm", elastiv1alpha1.ModeProxy)

	// The resolver's view of the same objects, over every namespace.
	greedy.Eventually("the resolver to serve es-0..2 and calm, not es-3", func() (bool, string) {
		got := map[string]bool{}
		for _, svc := range []clusterview.ServiceRef{
			{Namespace: greedy.NS, Name: "es-0"}, {Namespace: greedy.NS, Name: "es-2"},
			{Namespace: greedy.NS, Name: "es-3"}, {Namespace: other.NS, Name: "calm"},
		} {
			got[svc.String()] = named.Named(svc)
		}
		return got[greedy.NS+"/es-0"] && got[greedy.NS+"/es-2"] && !got[greedy.NS+"/es-3"] && got[other.NS+"/calm"], fmt.Sprint(got)
	})

	// Deleting the oldest lets the newest in, in the operator and then,
	// on the status write that clears the condition, in the resolver.
	if err := greedy.Elasti.ElastiV1alpha1().ElastiServices(greedy.NS).Delete(greedy.Ctx(), "es-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	greedy.WaitMode("es-3", elastiv1alpha1.ModeProxy)
	greedy.EventuallyWithin("the resolver to serve es-3", 30*time.Second, func() (bool, string) {
		return named.Named(clusterview.ServiceRef{Namespace: greedy.NS, Name: "es-3"}), ""
	})
}

// resolverNamedView is the resolver's ElastiService view of every
// namespace, with its budget, built as cmd/elasti-resolver builds it.
func resolverNamedView(t *testing.T, e *testenv.Env, limits nsbudget.Limits) *clusterview.NamedIndex {
	t.Helper()
	budget := clusterview.NewSpecBudget(limits, nil)
	factory := elastiinformers.NewSharedInformerFactoryWithOptions(e.Elasti, 0, elastiinformers.WithTransform(budget.Transform))
	informer := factory.Elasti().V1alpha1().ElastiServices()
	if err := budget.Watch(informer); err != nil {
		t.Fatal(err)
	}
	named, err := clusterview.NewNamedIndex(informer)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(e.Ctx().Done())
	t.Cleanup(factory.Shutdown)
	e.Eventually("the resolver's ElastiService view to sync", func() (bool, string) { return named.HasSynced(), "" })
	return named
}
