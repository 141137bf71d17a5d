package operator_test

import (
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/names"
	"github.com/elasti-dev/elasti/test/testenv"
)

// An operator given two namespaces (--watch-namespace=a,b, the chart's
// global.allowedNamespaces) manages the ElastiServices of both and leaves
// one in a third namespace untouched: no finalizer, no status, no private
// Service. It lists and watches only in its two namespaces (and the
// cluster-scoped Rollout CRD), which is what lets the chart grant it
// Roles there instead of a ClusterRole.
func TestOperatorWatchesListedNamespacesOnly(t *testing.T) {
	t.Parallel()
	a, b, other := testenv.New(t), testenv.New(t), testenv.New(t)
	a.Opts.WatchNamespaces = []string{a.NS, b.NS}
	a.Resolver(1)
	for _, e := range []*testenv.Env{a, b, other} {
		e.App("web", 0)
		e.ElastiService("web", "web", elastiv1alpha1.KindDeployment, "web")
	}
	a.StartOperator()
	// Runs before the operator stops (cleanups run last first): b's
	// ElastiService carries the finalizer only a running operator removes.
	t.Cleanup(b.FinalizeAll)

	for _, e := range []*testenv.Env{a, b} {
		e.WaitMode("web", elastiv1alpha1.ModeProxy)
		es := e.Get("web")
		if !slices.Contains(es.Finalizers, elastiv1alpha1.Finalizer) {
			t.Errorf("%s/web: finalizers %v lack %s", e.NS, es.Finalizers, elastiv1alpha1.Finalizer)
		}
		if n := privateServices(t, e); n != 1 {
			t.Errorf("%s: %d private Services, want 1", e.NS, n)
		}
	}

	// Both watched namespaces are done, so the operator has long seen the
	// third one's ElastiService had it watched there.
	es := other.Get("web")
	if len(es.Finalizers) != 0 || es.Status.Mode != "" || len(es.Status.Conditions) != 0 {
		t.Errorf("%s/web, outside --watch-namespace, was touched: finalizers %v, %s", other.NS, es.Finalizers, testenv.Describe(es))
	}
	if n := privateServices(t, other); n != 0 {
		t.Errorf("%s: %d private Services; the operator must not act outside --watch-namespace", other.NS, n)
	}
	if err := other.Elasti.ElastiV1alpha1().ElastiServices(other.NS).Delete(other.Ctx(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	other.Eventually("the unmanaged ElastiService to go without an operator", func() (bool, string) {
		_, err := other.Elasti.ElastiV1alpha1().ElastiServices(other.NS).Get(other.Ctx(), "web", metav1.GetOptions{})
		return apierrors.IsNotFound(err), "still there"
	})

	var wide []string
	testenv.EachAuditEvent(t, func(ev testenv.AuditEvent) {
		if (ev.Verb != "list" && ev.Verb != "watch") || !strings.HasSuffix(ev.UserAgent, a.UserAgentSuffix()) {
			return
		}
		r := ev.ObjectRef
		if r.Namespace == a.NS || r.Namespace == b.NS || r.Resource == "customresourcedefinitions" {
			return
		}
		wide = append(wide, ev.Verb+" "+r.Resource+" in "+orAll(r.Namespace))
	})
	if len(wide) > 0 {
		slices.Sort(wide)
		t.Errorf("the operator listed or watched outside its namespaces: %v", slices.Compact(wide))
	}
}

// privateServices counts elasti's private Services in e's namespace.
func privateServices(t *testing.T, e *testenv.Env) int {
	t.Helper()
	list, err := e.Kube.CoreV1().Services(e.NS).List(e.Ctx(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range list.Items {
		if names.IsPrivateService(s.Name) {
			n++
		}
	}
	return n
}

func orAll(ns string) string {
	if ns == "" {
		return "all namespaces"
	}
	return ns
}
