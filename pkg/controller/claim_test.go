package controller

import (
	"k8s.io/apimachinery/pkg/api/meta"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"
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

	_ = c.syncHandler(ctx, keyOf(newer)) // the newer one happens to sync first
	_ = c.syncHandler(ctx, keyOf(older))
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
	if err := c.syncHandler(ctx, keyOf(older)); err != nil {
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
