package controller

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	core "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/workloop"
)

// refusal is the apiserver's answer to a create in a namespace being
// deleted, as the NamespaceLifecycle admission plugin writes it; with
// terminating false it is a plain 403 (say, RBAC), which must not count.
func refusal(resource, namespace string, terminating bool) error {
	err := apierrors.NewForbidden(schema.GroupResource{Resource: resource}, "",
		fmt.Errorf("unable to create new content in namespace %s because it is being terminated", namespace))
	if terminating {
		err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
			Type: corev1.NamespaceTerminatingCause, Message: "namespace " + namespace + " is being terminated", Field: "metadata.namespace"})
	}
	return err
}

// sleeping seeds an ElastiService at zero in namespace, with its public
// Service and Deployment and no resolver slice or private Service: what a
// sleeping Service looks like once its namespace's deletion removed them.
func sleeping(f *fixture, namespace, name string) types.NamespacedName {
	es := newElastiService(name, name, name)
	public := newPublicService(name)
	deployment := newDeployment(name, 0)
	es.Namespace, public.Namespace, deployment.Namespace = namespace, namespace, namespace
	f.elastiServices = append(f.elastiServices, es)
	f.services = append(f.services, public)
	f.deployments = append(f.deployments, deployment)
	return es.Key()
}

// writesIn counts the creates sent in namespace, and the writes of any
// kind sent to ElastiServices there.
func (f *fixture) writesIn(namespace string) (creates, elastiWrites int) {
	for _, a := range filterInformerActions(f.kubeClient.Actions()) {
		if a.GetVerb() == "create" && a.GetNamespace() == namespace {
			creates++
		}
	}
	for _, a := range filterInformerActions(f.elastiClient.Actions()) {
		if a.GetNamespace() == namespace && a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			elastiWrites++
		}
	}
	return creates, elastiWrites
}

// wantRequeue fails unless err asks for the key again after a delay of
// at most atMost, which the loop does not count as a failure.
func wantRequeue(t *testing.T, what string, err error, atMost time.Duration) {
	t.Helper()
	var after workloop.RequeueAfter
	if !errors.As(err, &after) || time.Duration(after) <= 0 || time.Duration(after) > atMost {
		t.Fatalf("%s returned %v; want a requeue after at most %s, not a failure to retry at once", what, err, atMost)
	}
}

// In a namespace being deleted every create is refused, and the deletion
// brings each ElastiService back on every object it removes. One refusal
// is enough: the other keys there are left alone until the memory ends,
// without a request, while another namespace is fronted as usual.
func TestANamespaceBeingDeletedCostsOneRefusedCreate(t *testing.T) {
	f := newFixture(t)
	f.queuePrivateServices = true
	f.resolverSlices = readyResolver()
	dying := []types.NamespacedName{sleeping(f, "dying", "web"), sleeping(f, "dying", "api"), sleeping(f, "dying", "db")}
	locked := sleeping(f, "locked", "web")
	other := sleeping(f, "other", "web")
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	f.kubeClient.PrependReactor("create", "*", func(a core.Action) (bool, runtime.Object, error) {
		switch a.GetNamespace() {
		case "dying":
			return true, nil, refusal(a.GetResource().Resource, "dying", true)
		case "locked":
			return true, nil, refusal(a.GetResource().Resource, "locked", false)
		}
		return false, nil, nil
	})

	wantRequeue(t, "the first sync in the dying namespace", c.syncElastiService(ctx, dying[0]), terminatingMemory)
	if creates, _ := f.writesIn("dying"); creates != 1 {
		t.Fatalf("the first sync sent %d creates; want the one refused", creates)
	}
	for range 3 {
		for _, key := range dying {
			wantRequeue(t, "a sync of "+key.String(), c.syncElastiService(ctx, key), terminatingMemory)
			wantRequeue(t, "the private Service of "+key.String(), c.front.syncPrivateService(ctx, key), terminatingMemory)
		}
	}
	if creates, esWrites := f.writesIn("dying"); creates != 1 || esWrites != 0 {
		t.Errorf("18 more syncs in the dying namespace sent %d creates and %d ElastiService writes; want the first refused create only", creates, esWrites)
	}

	// A 403 without the cause is not a namespace being deleted: its
	// sync fails and is retried, and the next one tries again.
	for range 2 {
		err := c.syncElastiService(ctx, locked)
		var after workloop.RequeueAfter
		if !apierrors.IsForbidden(err) || errors.As(err, &after) {
			t.Fatalf("a sync refused by a plain 403 returned %v; want the 403, retried as a failure", err)
		}
	}
	if creates, _ := f.writesIn("locked"); creates != 2 {
		t.Errorf("two syncs refused by a plain 403 sent %d creates; want 2", creates)
	}

	wantNoError(t, c.syncElastiService(ctx, other))
	if creates, _ := f.writesIn("other"); creates == 0 {
		t.Errorf("the other namespace's ElastiService created nothing; want its resolver slice")
	}

	// The memory ends: one key tries again, is refused, and the
	// namespace is remembered anew.
	f.clock.Step(terminatingMemory)
	wantRequeue(t, "a sync once the memory ended", c.syncElastiService(ctx, dying[1]), terminatingMemory)
	wantRequeue(t, "the next key's sync", c.syncElastiService(ctx, dying[2]), terminatingMemory)
	if creates, _ := f.writesIn("dying"); creates != 2 {
		t.Errorf("after the memory ended the dying namespace drew %d creates in all; want 2", creates)
	}
}

// A namespace known to be being deleted is finalized at once: no pod can
// be made there, so the target is not scaled up to wait for one, and the
// finalizer comes off so the namespace can go.
func TestANamespaceBeingDeletedStillFinalizes(t *testing.T) {
	f := newFixture(t)
	f.queuePrivateServices = true
	f.resolverSlices = readyResolver()
	key := sleeping(f, "dying", "web")
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	f.kubeClient.PrependReactor("create", "*", func(a core.Action) (bool, runtime.Object, error) {
		return true, nil, refusal(a.GetResource().Resource, "dying", true)
	})
	wantRequeue(t, "the first sync", c.syncElastiService(ctx, key), terminatingMemory)

	es, err := f.elastiClient.ElastiV1alpha1().ElastiServices("dying").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	es = es.DeepCopy()
	es.DeletionTimestamp = &metav1.Time{Time: t0}
	if err := f.esIndexer.Update(es); err != nil {
		t.Fatal(err)
	}
	f.kubeClient.ClearActions()
	if err := c.syncElastiService(ctx, key); err != nil {
		t.Fatalf("finalizing in a namespace being deleted: %v", err)
	}
	got, err := f.elastiClient.ElastiV1alpha1().ElastiServices("dying").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(got.Finalizers, elastiv1alpha1.Finalizer) {
		t.Errorf("the finalizer is still on: %v", got.Finalizers)
	}
	for _, a := range filterInformerActions(f.kubeClient.Actions()) {
		if a.GetResource().Resource == "deployments" && a.GetVerb() != "get" {
			t.Errorf("finalizing sent %s %s; want the target left at zero", a.GetVerb(), a.GetResource().Resource)
		}
	}
}

// The memory is bounded: the bound's namespace is remembered, one past it
// is not until an entry ends.
func TestTerminatingNamespacesAreBounded(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	tn := newTerminatingNamespaces(clk)
	refused := refusal("services", "ns", true)
	for i := range maxTerminatingNamespaces {
		if !tn.refused(fmt.Sprintf("ns-%d", i), refused) {
			t.Fatalf("a terminating refusal was not recognised")
		}
	}
	last := fmt.Sprintf("ns-%d", maxTerminatingNamespaces-1)
	if tn.wait(last) != terminatingMemory {
		t.Errorf("the %dth namespace is not remembered", maxTerminatingNamespaces)
	}
	past := "one-past"
	if !tn.refused(past, refused) || tn.wait(past) != 0 {
		t.Errorf("one past the bound: refused is recognised but must not be remembered; wait = %s", tn.wait(past))
	}
	clk.Step(terminatingMemory)
	if tn.wait(last) != 0 {
		t.Errorf("a namespace is still remembered after %s", terminatingMemory)
	}
	if tn.refused(past, refused); tn.wait(past) != terminatingMemory {
		t.Errorf("once the entries ended, a new namespace is not remembered")
	}
	if tn.refused("plain", refusal("services", "plain", false)) || tn.refused("nil", nil) {
		t.Errorf("a plain 403 or no error counted as a namespace being deleted")
	}
}
