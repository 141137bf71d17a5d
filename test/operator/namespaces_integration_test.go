package operator_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	versioned "github.com/elasti-dev/elasti/pkg/generated/clientset/versioned"
	"github.com/elasti-dev/elasti/pkg/names"
	"github.com/elasti-dev/elasti/pkg/operator"
	"github.com/elasti-dev/elasti/test/localcluster"
	"github.com/elasti-dev/elasti/test/localcluster/clustertest"
	"github.com/elasti-dev/elasti/test/testenv"
)

// An operator given two namespaces (--watch-namespace=a,b, the chart's
// global.allowedNamespaces), running with nothing but the permissions the
// chart renders for those values (its Roles in both namespaces and in its
// own, and the one ClusterRole on the Rollout CRD), manages the
// ElastiServices of both and leaves one in a third namespace untouched: no
// finalizer, no status, no private Service. It lists and watches only in
// its two namespaces (and the cluster-scoped Rollout CRD).
func TestOperatorWatchesListedNamespacesOnly(t *testing.T) {
	t.Parallel()
	a, b, other := testenv.New(t), testenv.New(t), testenv.New(t)
	a.Opts.WatchNamespaces = []string{a.NS, b.NS}
	a.Resolver(1)
	for _, e := range []*testenv.Env{a, b, other} {
		e.App("web", 0)
		e.ElastiService("web", "web", elastiv1alpha1.KindDeployment, "web")
	}
	// a.NS plays the release namespace: the resolver and the leader-election
	// Lease live there, as ELASTI_*_NAMESPACE say in the chart.
	user := bindChartOperatorRBAC(t, a.NS, a.NS, b.NS)
	cfg := clustertest.Get(t).RESTConfig()
	cfg.Impersonate.UserName = user
	startOperatorAs(t, a, cfg)
	// Run before the operator stops (cleanups run last first): the
	// ElastiServices carry the finalizer only a running operator removes.
	t.Cleanup(a.FinalizeAll)
	t.Cleanup(b.FinalizeAll)

	for _, e := range []*testenv.Env{a, b} {
		e.WaitMode("web", elastiv1alpha1.ModeProxy)
		es := e.Get("web")
		if !slices.Contains(es.Finalizers, elastiv1alpha1.Finalizer) {
			t.Errorf("%s/web: finalizers %v lack %s", e.NS, es.Finalizers, elastiv1alpha1.Finalizer)
		}
		// The private Service has a queue of its own, which may trail the
		// mode.
		e.Eventually(e.NS+"'s one private Service", func() (bool, string) {
			n := privateServices(t, e)
			return n == 1, fmt.Sprintf("%d private Services", n)
		})
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

// startOperatorAs runs e's operator, as testenv.StartOperator does, with
// cfg's identity instead of the cluster admin's, until the test ends.
func startOperatorAs(t *testing.T, e *testenv.Env, cfg *rest.Config) {
	t.Helper()
	ctx, cancel := context.WithCancel(klog.NewContext(context.WithoutCancel(t.Context()), klog.Background().WithValues("test", t.Name())))
	op, err := operator.New(ctx, cfg, e.Opts)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	e.LastOperator = op
	done := make(chan error, 1)
	go func() { done <- op.Start(ctx, nil) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("operator.Start: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("operator did not stop within 30s of cancellation")
		}
	})
}

// bindChartOperatorRBAC renders the chart's operator RBAC for a release in
// releaseNS with global.allowedNamespaces=watched, creates its Roles and
// ClusterRoles (cluster-scoped ones under names of their own), binds them
// to a new user instead of the operator's ServiceAccount, and returns that
// user once the apiserver lets it list ElastiServices in every watched
// namespace.
func bindChartOperatorRBAC(t *testing.T, releaseNS string, watched ...string) string {
	t.Helper()
	ctx := t.Context()
	bins, err := localcluster.EnsureBinaries(ctx, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	root, err := localcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, filepath.Join(bins, localcluster.HelmBinary), "template", "elasti", filepath.Join(root, "charts", "elasti"),
		"--namespace", releaseNS, "--set", "global.allowedNamespaces={"+strings.Join(watched, ",")+"}",
		"--show-only", "templates/operator-rbac.yaml").CombinedOutput()
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	suffix := "-" + strings.ToLower(rand.Text()[:8])
	user := "elasti-chart-operator" + suffix
	subjects := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	admin := clustertest.Clientset(t)
	bg := context.WithoutCancel(ctx)
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	kinds := map[string]int{}
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if len(u.Object) == 0 {
			continue // a document of comments only
		}
		kinds[u.GetKind()]++
		into := func(obj any) {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
				t.Fatal(err)
			}
		}
		switch u.GetKind() {
		case "ServiceAccount":
		case "Role":
			var r rbacv1.Role
			into(&r)
			if _, err := admin.RbacV1().Roles(r.Namespace).Create(ctx, &r, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		case "RoleBinding":
			var rb rbacv1.RoleBinding
			into(&rb)
			rb.Subjects = subjects
			if _, err := admin.RbacV1().RoleBindings(rb.Namespace).Create(ctx, &rb, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		case "ClusterRole":
			var cr rbacv1.ClusterRole
			into(&cr)
			cr.Name += suffix
			if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &cr, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = admin.RbacV1().ClusterRoles().Delete(bg, cr.Name, metav1.DeleteOptions{}) })
		case "ClusterRoleBinding":
			var crb rbacv1.ClusterRoleBinding
			into(&crb)
			crb.Name += suffix
			crb.RoleRef.Name += suffix
			crb.Subjects = subjects
			if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &crb, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = admin.RbacV1().ClusterRoleBindings().Delete(bg, crb.Name, metav1.DeleteOptions{}) })
		default:
			t.Fatalf("the chart's operator RBAC renders a %s", u.GetKind())
		}
	}
	// The namespace-scoped shape: the operator's Role and RoleBinding in
	// each watched namespace, the leader-election and resolver-slice ones
	// in the release namespace, and only the CRD ClusterRole.
	if kinds["Role"] != len(watched)+2 || kinds["ClusterRole"] != 1 {
		t.Fatalf("the chart rendered %v for %d watched namespaces", kinds, len(watched))
	}

	cfg := clustertest.Get(t).RESTConfig()
	cfg.Impersonate.UserName = user
	as := versioned.NewForConfigOrDie(cfg)
	for _, ns := range watched {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := as.ElastiV1alpha1().ElastiServices(ns).List(ctx, metav1.ListOptions{})
			return err == nil, nil
		})
		if err != nil {
			t.Fatalf("%s may not list ElastiServices in %s under the chart's Roles", user, ns)
		}
	}
	if _, err := as.ElastiV1alpha1().ElastiServices("").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("%s may list ElastiServices in every namespace (%v); the chart's namespace-scoped RBAC must not allow it", user, err)
	}
	return user
}
