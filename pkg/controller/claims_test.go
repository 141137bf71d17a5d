package controller

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/directory"
)

// Two ElastiServices name the same Service. Whichever syncs first, the older
// one ends up holding it, so every replica and every restart agrees.
func TestContestedServiceGoesToTheOlderElastiService(t *testing.T) {
	f := newFixture(t)
	older := newElastiService("older", "web", "web")
	older.CreationTimestamp = metav1.NewTime(t0.Add(-time.Hour))
	newer := newElastiService("newer", "web", "web")
	newer.CreationTimestamp = metav1.NewTime(t0)
	f.elastiServices = append(f.elastiServices, older, newer)
	f.services = append(f.services, newPublicService("web"))
	f.deployments = append(f.deployments, newDeployment("web", 0))
	f.resolverSlices = readyResolver()
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)

	_ = c.syncElastiService(ctx, keyOf(newer)) // the newer one happens to sync first
	_ = c.syncElastiService(ctx, keyOf(older))
	if e, _ := f.directory.Lookup(webKey); e.ElastiService.Name != "older" {
		t.Errorf("directory holder = %v, want the older ElastiService", e.ElastiService)
	}
}

// The ElastiService that controls the objects already generated for the
// Service keeps it, even against an older claimant.
func TestContestedServiceStaysWithTheControllerOfItsObjects(t *testing.T) {
	f := newFixture(t)
	older := newElastiService("older", "web", "web")
	older.CreationTimestamp = metav1.NewTime(t0.Add(-time.Hour))
	owner := newElastiService("owner", "web", "web")
	owner.CreationTimestamp = metav1.NewTime(t0)
	public := newPublicService("web")
	f.elastiServices = append(f.elastiServices, older, owner)
	f.services = append(f.services, public, privateServiceFor(owner, public))
	f.deployments = append(f.deployments, newDeployment("web", 0))
	f.resolverSlices = readyResolver()
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)

	c.PrimeDirectory(ctx)
	if e, _ := f.directory.Lookup(webKey); e.ElastiService.Name != "owner" {
		t.Fatalf("primed holder = %v, want the controller of the private Service", e.ElastiService)
	}
	if err := c.syncElastiService(ctx, keyOf(older)); err != nil {
		t.Fatalf("sync: %v", err)
	}
	if e, _ := f.directory.Lookup(webKey); e.ElastiService.Name != "owner" {
		t.Errorf("directory holder = %v after the older one synced, want it unchanged", e.ElastiService)
	}
	f.verified = f.elastiClient.Actions()
	if r := readyReason(f.lastStatusUpdate()); r != ReasonServiceConflict {
		t.Errorf("the older one reported %q, want %s", r, ReasonServiceConflict)
	}
}

func readyReason(es *elastiv1alpha1.ElastiService) string {
	if c := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionReady); c != nil {
		return c.Reason
	}
	return ""
}

// The idle poller scales only the targets of ElastiServices the controller
// drives now: holding their Service, and Ready at their current generation.
func TestManagesOnlyTheReadyHolderOfItsService(t *testing.T) {
	f := newFixture(t)
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	holder := withStatus(newElastiService("web", "web", "web"), elastiv1alpha1.ModeProxy, metav1.ConditionTrue, ReasonReconciled)
	// The Service is web, in the ElastiService's namespace: webKey names it too.
	f.directory.Claim(webKey, directory.EntryFor(holder))
	other := withStatus(newElastiService("other", "web", "web"), elastiv1alpha1.ModeProxy, metav1.ConditionTrue, ReasonReconciled)
	notReady := holder.DeepCopy()
	meta.SetStatusCondition(&notReady.Status.Conditions, metav1.Condition{Type: elastiv1alpha1.ConditionReady, Status: metav1.ConditionFalse, ObservedGeneration: holder.Generation})
	newSpec := holder.DeepCopy()
	newSpec.Generation++
	for _, tc := range []struct {
		name string
		es   *elastiv1alpha1.ElastiService
		want bool
	}{
		{"ready holder", holder, true},
		{"another ElastiService holds the Service", other, false},
		{"not Ready", notReady, false},
		{"Ready for an older generation", newSpec, false},
	} {
		if got := c.Manages(tc.es); got != tc.want {
			t.Errorf("%s: Manages = %v, want %v", tc.name, got, tc.want)
		}
	}
}
