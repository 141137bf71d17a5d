package operator_test

import (
	"fmt"
	"slices"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/names"
	"github.com/elasti-dev/elasti/test/testenv"
)

// The way back, elasti → KubeElasti v0.1.30, as far as it can go without
// KubeElasti's binaries: elasti's operator goes (its Deployment deleted),
// and what it leaves is what KubeElasti's operator reads and writes,
// replayed here by the writes its source makes (testenv.KubeElastiFront,
// KubeElastiFinalize):
//   - each ElastiService keeps KubeElasti's finalizer and a status.mode
//     KubeElasti reads ("proxy" makes it rewrite the resolver slice);
//   - the resolver slice, though elasti's (its labels, its owner, a
//     per-port resolver port), sits at the name KubeElasti computes and is
//     IPv4, so KubeElasti's unconditional Update takes it over whole: one
//     slice, in KubeElasti's form, never a second;
//   - the private Service sits at KubeElasti's name, under the
//     ElastiService's controller reference, so KubeElasti keeps it;
//   - KubeElasti's finalizer logic releases ElastiServices elasti made.
func TestElastiLeavesWhatKubeElastiTakesBack(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.StartOperator()
	e.ResolverService()
	e.ResolverPods("elasti", 1, true)
	e.Fronted("asleep", 0)
	e.FrontedAfterProxy("awake", 1)
	ports := e.WaitResolverPorts("asleep", 80)
	e.Eventually("asleep's slice on its own resolver port", func() (bool, string) {
		s, err := e.ResolverSlice("asleep")
		if err != nil || len(s.Ports) != 1 {
			return false, fmt.Sprint(s, err)
		}
		return ptr.Deref(s.Ports[0].Port, 0) == ports[80], fmt.Sprint(ptr.Deref(s.Ports[0].Port, 0))
	})

	// elasti's operator goes.
	e.Stop()

	for svc, mode := range map[string]string{"asleep": "proxy", "awake": "serve"} {
		es := e.Get(svc)
		if !slices.Equal(es.Finalizers, []string{"elasti.truefoundry.com/finalizer"}) || es.Status.Mode != mode {
			t.Errorf("%s left with finalizers %v and status.mode %q; KubeElasti needs its own finalizer and %q", svc, es.Finalizers, es.Status.Mode, mode)
		}
		pvt, err := e.PrivateService(svc)
		if err != nil {
			t.Fatalf("%s's private Service at KubeElasti's name %s: %v", svc, names.PrivateService(svc), err)
		}
		if ref := metav1.GetControllerOf(pvt); ref == nil || ref.UID != es.UID {
			t.Errorf("%s's private Service is controlled by %v, want its ElastiService", svc, ref)
		}
	}
	if _, err := e.ResolverSlice("awake"); !apierrors.IsNotFound(err) {
		t.Errorf("awake has a resolver slice (%v), though it serves", err)
	}

	// KubeElasti's operator puts its resolver in front of asleep.
	kubeElastiResolver := []string{"10.244.200.1"}
	if err := e.KubeElastiFront("asleep", kubeElastiResolver); err != nil {
		t.Fatalf("KubeElasti's update of the resolver slice elasti left: %v", err)
	}
	var resolverSlices []discoveryv1.EndpointSlice
	for _, s := range e.SlicesFor("asleep") {
		if s.Labels[discoveryv1.LabelManagedBy] != "endpointslice-controller.k8s.io" {
			resolverSlices = append(resolverSlices, s)
		}
	}
	if len(resolverSlices) != 1 {
		t.Fatalf("%d resolver slices for asleep after KubeElasti's write, want 1", len(resolverSlices))
	}
	s := resolverSlices[0]
	if len(s.Labels) != 1 || len(s.OwnerReferences) != 0 || len(s.Ports) != 1 || ptr.Deref(s.Ports[0].Port, 0) != testenv.KubeElastiProxyPort ||
		!slices.Equal(testenv.SliceIPs(s), kubeElastiResolver) {
		t.Errorf("the slice after KubeElasti's write is not in KubeElasti's form: labels %v owners %v ports %v endpoints %v",
			s.Labels, s.OwnerReferences, s.Ports, testenv.SliceIPs(s))
	}

	// KubeElasti's finalizer releases both, and removes what elasti made.
	for _, svc := range []string{"asleep", "awake"} {
		if err := e.Elasti.ElastiV1alpha1().ElastiServices(e.NS).Delete(e.Ctx(), svc, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := e.KubeElastiFinalize(svc); err != nil {
			t.Fatalf("KubeElasti's finalizer on %s: %v", svc, err)
		}
		e.Eventually(svc+"'s ElastiService and generated objects to be gone", func() (bool, string) {
			_, esErr := e.Elasti.ElastiV1alpha1().ElastiServices(e.NS).Get(e.Ctx(), svc, metav1.GetOptions{})
			_, pvtErr := e.PrivateService(svc)
			_, sliceErr := e.ResolverSlice(svc)
			return apierrors.IsNotFound(esErr) && apierrors.IsNotFound(pvtErr) && apierrors.IsNotFound(sliceErr),
				fmt.Sprintf("ElastiService: %v; private Service: %v; resolver slice: %v", esErr, pvtErr, sliceErr)
		})
	}
	// Unlike elasti, KubeElasti does not scale a target at zero back up
	// when its ElastiService goes (the README's rollback says so).
	if got := e.Replicas(elastiv1alpha1.KindDeployment, "asleep"); got != 0 {
		t.Errorf("asleep has %d replicas after KubeElasti's finalizer, want 0 (KubeElasti leaves it)", got)
	}
}
