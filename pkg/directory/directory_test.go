package directory

import (
	"fmt"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/nsbudget"
)

func es(ns, name, svc string) *elastiv1alpha1.ElastiService {
	return &elastiv1alpha1.ElastiService{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: elastiv1alpha1.ElastiServiceSpec{
			Service:        svc,
			ScaleTargetRef: elastiv1alpha1.ScaleTargetRef{APIVersion: "apps/v1", Kind: "deployments", Name: "web"},
			Autoscaler:     &elastiv1alpha1.AutoscalerSpec{Type: "keda", Name: "so"},
		},
	}
}

func TestEntryCanonicalisesAndDefaults(t *testing.T) {
	e := EntryFor(es("ns", "a", "web"))
	if e.Target.Kind != elastiv1alpha1.KindDeployment {
		t.Errorf("kind = %q, want legacy deployments mapped to Deployment", e.Target.Kind)
	}
	if e.MinTargetReplicas != 1 {
		t.Errorf("minTargetReplicas = %d, want the default 1 when unset", e.MinTargetReplicas)
	}
}

func TestClaimConflictsAndRelease(t *testing.T) {
	d := New(nsbudget.Limits{})
	svc := types.NamespacedName{Namespace: "ns", Name: "web"}
	a, b := EntryFor(es("ns", "a", "web")), EntryFor(es("ns", "b", "web"))
	if _, ok := d.Claim(svc, a); !ok {
		t.Fatal("first claim refused")
	}
	if holder, ok := d.Claim(svc, b); ok || holder != a.ElastiService {
		t.Fatalf("second ElastiService claimed a held service: ok=%v holder=%v", ok, holder)
	}
	d.Release(svc, b.ElastiService)
	if _, ok := d.Lookup(svc); !ok {
		t.Fatal("a non-holder's release removed the entry")
	}
	d.ReleaseAll(a.ElastiService)
	if _, ok := d.Lookup(svc); ok {
		t.Fatal("entry survived its holder's ReleaseAll")
	}
	if _, ok := d.Claim(svc, b); !ok {
		t.Fatal("service not claimable after release")
	}
}

// An ElastiService moving to another Service holds both for a while;
// ReleaseAll keeps the ones named and frees the rest, and no one else's.
func TestReleaseAllKeepsTheExceptions(t *testing.T) {
	d := New(nsbudget.Limits{})
	oldSvc, newSvc, other := types.NamespacedName{Namespace: "ns", Name: "web"}, types.NamespacedName{Namespace: "ns", Name: "web-v2"},
		types.NamespacedName{Namespace: "ns", Name: "shop"}
	a, b := EntryFor(es("ns", "a", "web-v2")), EntryFor(es("ns", "b", "shop"))
	d.Claim(oldSvc, a)
	d.Claim(newSvc, a)
	d.Claim(other, b)
	d.ReleaseAll(a.ElastiService, newSvc)
	if _, ok := d.Lookup(oldSvc); ok {
		t.Error("the old Service survived ReleaseAll")
	}
	if e, ok := d.Lookup(newSvc); !ok || e.ElastiService != a.ElastiService {
		t.Error("ReleaseAll freed the Service it was told to keep")
	}
	if _, ok := d.Lookup(other); !ok {
		t.Error("ReleaseAll freed another ElastiService's Service")
	}
	d.ReleaseAll(a.ElastiService)
	if d.Len() != 1 {
		t.Errorf("%d entries after a's ReleaseAll, want b's alone", d.Len())
	}
	if _, ok := d.Claim(newSvc, b); !ok {
		t.Error("a released Service could not be claimed")
	}
}

func TestLookupReturnsACopy(t *testing.T) {
	d := New(nsbudget.Limits{})
	svc := types.NamespacedName{Namespace: "ns", Name: "web"}
	d.Claim(svc, EntryFor(es("ns", "a", "web")))
	e, _ := d.Lookup(svc)
	e.Autoscaler.Name = "mutated"
	if again, _ := d.Lookup(svc); again.Autoscaler.Name != "so" {
		t.Fatal("a reader mutated the shared entry")
	}
}

func TestConcurrentReadersAndWriters(t *testing.T) {
	d := New(nsbudget.Limits{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 500 {
				svc := types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("svc-%d", i%50)}
				d.Claim(svc, EntryFor(es("ns", fmt.Sprintf("es-%d", i%50), svc.Name)))
				if w%2 == 0 {
					d.Release(svc, types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("es-%d", i%50)})
				}
			}
		})
		wg.Go(func() {
			for i := range 500 {
				d.Lookup(types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("svc-%d", i%50)})
			}
		})
	}
	wg.Wait()
}
