package operator_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/operator"
	"github.com/elasti-dev/elasti/test/localcluster/clustertest"
	"github.com/elasti-dev/elasti/test/testenv"
)

// The release helm uninstall's hook runs (elasti-operator --release-all),
// against a real apiserver. First a target that cannot get a ready pod:
// the release fails naming it, leaves the resolver in front of its Service
// and the finalizer on, and starts the operator Deployment again. Then,
// with the target able to start, it succeeds: the Service serves from its
// own pod, the resolver slice and the private Service are gone, and the
// ElastiService stays, without elasti's finalizer, so it can be deleted
// with no operator running.
func TestReleaseAllFailsClearlyThenReleases(t *testing.T) {
	t.Parallel()
	const leaseName = "elasti-operator-leader"
	e := testenv.New(t)
	cfg := clustertest.Get(t).RESTConfig()
	election := func() *operator.Election {
		lock, err := operator.NewLeaseLock(cfg, e.NS, leaseName, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return &operator.Election{Lock: lock, LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}
	}
	e.StartOperatorWith(election())
	e.Resolver(1)
	e.Fronted("web", 0)
	// A stand-in for the operator Deployment the hook stops and restarts.
	e.Deployment("operator", 2, nil)
	unschedulable(t, e, "web", true)
	// The operator runs in process: stop it as scaling its Deployment to
	// zero would, giving up the Lease.
	e.Stop()

	release := func(timeout time.Duration) error {
		op, err := operator.New(e.Ctx(), cfg, e.Opts)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(klog.NewContext(e.Ctx(), klog.Background().WithValues("test", t.Name())), timeout)
		defer cancel()
		return op.ReleaseAllLeading(ctx, operator.Uninstall{OperatorNamespace: e.NS, OperatorDeployment: "operator", Election: election(), Parallelism: 4})
	}

	err := release(10 * time.Second)
	if err == nil || !strings.Contains(err.Error(), "web") || !strings.Contains(err.Error(), "ready pod") {
		t.Fatalf("release with a target that cannot start = %v; want an error naming it", err)
	}
	if got := e.Replicas(elastiv1alpha1.KindDeployment, "operator"); got != 2 {
		t.Errorf("the operator Deployment has %d replicas after the failed release; want its 2 back", got)
	}
	if _, err := e.ResolverSlice("web"); err != nil {
		t.Errorf("the resolver slice after the failed release: %v; want it kept, web has no ready pod", err)
	}
	if es := getES(t, e, "web"); !slices.Contains(es.Finalizers, elastiv1alpha1.Finalizer) {
		t.Errorf("the failed release removed elasti's finalizer: %v", es.Finalizers)
	}

	unschedulable(t, e, "web", false)
	if err := release(time.Minute); err != nil {
		t.Fatalf("release: %v", err)
	}
	if len(e.ReadyPodIPs("web")) == 0 {
		t.Error("web has no ready pod after the release")
	}
	if got := e.Replicas(elastiv1alpha1.KindDeployment, "operator"); got != 0 {
		t.Errorf("the operator Deployment has %d replicas after the release; want 0", got)
	}
	if _, err := e.ResolverSlice("web"); !apierrors.IsNotFound(err) {
		t.Errorf("the resolver slice after the release: %v; want it gone", err)
	}
	if _, err := e.PrivateService("web"); !apierrors.IsNotFound(err) {
		t.Errorf("the private Service after the release: %v; want it gone", err)
	}
	if es := getES(t, e, "web"); slices.Contains(es.Finalizers, elastiv1alpha1.Finalizer) {
		t.Errorf("elasti's finalizer is still on after the release: %v", es.Finalizers)
	}
	// No operator runs now: the deletion needs nobody.
	if err := e.Elasti.ElastiV1alpha1().ElastiServices(e.NS).Delete(e.Ctx(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Eventually("the released ElastiService to be deleted with no operator running", func() (bool, string) {
		_, err := e.Elasti.ElastiV1alpha1().ElastiServices(e.NS).Get(e.Ctx(), "web", metav1.GetOptions{})
		return apierrors.IsNotFound(err), "get: " + errString(err)
	})
}

func getES(t *testing.T, e *testenv.Env, name string) *elastiv1alpha1.ElastiService {
	t.Helper()
	es, err := e.Elasti.ElastiV1alpha1().ElastiServices(e.NS).Get(e.Ctx(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func errString(err error) string {
	if err == nil {
		return "found"
	}
	return err.Error()
}

// unschedulable keeps app's new pods from being scheduled, or lets them be.
func unschedulable(t *testing.T, e *testenv.Env, app string, on bool) {
	t.Helper()
	const label = "elasti.test/unschedulable"
	deployments := e.Kube.AppsV1().Deployments(e.NS)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := deployments.Get(e.Ctx(), app, metav1.GetOptions{})
		if err != nil {
			return err
		}
		setSelector(d, label, on)
		_, err = deployments.Update(e.Ctx(), d, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func setSelector(d *appsv1.Deployment, label string, on bool) {
	if !on {
		delete(d.Spec.Template.Spec.NodeSelector, label)
		return
	}
	if d.Spec.Template.Spec.NodeSelector == nil {
		d.Spec.Template.Spec.NodeSelector = map[string]string{}
	}
	d.Spec.Template.Spec.NodeSelector[label] = "true"
}
