package controller

import (
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/names"
	"github.com/elasti-dev/elasti/pkg/scaletarget"
	"github.com/elasti-dev/elasti/pkg/workloop"
)

// The plan is decided on facts alone: each case changes the facts every
// check lets through (ready) and names the stage the sync goes to, the
// check it stops on and whether it fails with the cache's error.
func TestPlan(t *testing.T) {
	notFound := apierrors.NewNotFound(schema.GroupResource{Resource: "services"}, "web-svc")
	timeout := errors.New("timeout")
	cases := []struct {
		name       string
		change     func(*facts)
		wantStage  stage
		wantReason string // "" when the plan does not stop on a check
		wantErr    error
		wantSettle bool
	}{
		{"everything checks out", nil, stageRoute, "", nil, false},
		{"invalid spec: nothing", func(f *facts) { f.es.Spec.Service = "../other" }, stageAdmit, ReasonInvalidSpec, nil, false},
		{"invalid spec comes before the selector", func(f *facts) {
			f.es.Spec.Service = "../other"
			f.service.Spec.Selector = nil
		}, stageAdmit, ReasonInvalidSpec, nil, false},
		{"past the namespace budget: nothing", func(f *facts) { f.overBudget = true }, stageAdmit, ReasonNamespaceBudgetExceeded, nil, false},
		{"invalid spec comes before the budget", func(f *facts) {
			f.es.Spec.Service = "../other"
			f.overBudget = true
		}, stageAdmit, ReasonInvalidSpec, nil, false},
		{"the budget comes before the selector", func(f *facts) {
			f.overBudget = true
			f.service.Spec.Selector = nil
		}, stageAdmit, ReasonNamespaceBudgetExceeded, nil, false},
		{"no selector: settles a handoff", func(f *facts) { f.service.Spec.Selector = nil }, stageAdmit, ReasonServiceHasNoSelector, nil, true},
		{"other pods: settles a handoff", func(f *facts) { f.service.Spec.Selector["app"] = "api" }, stageAdmit, ReasonServiceSelectsOtherPods, nil, true},
		{"claimed by another", func(f *facts) {
			f.claimed, f.claimant = false, types.NamespacedName{Namespace: testNamespace, Name: "older"}
		}, stageClaim, ReasonServiceConflict, nil, false},
		{"the conflict comes before a missing Service", func(f *facts) {
			f.claimed = false
			f.service, f.serviceErr = nil, notFound
		}, stageClaim, ReasonServiceConflict, nil, false},
		{"Service missing: a move goes on", func(f *facts) { f.service, f.serviceErr = nil, notFound }, stageLeave, ReasonServiceNotFound, nil, false},
		{"Service unreadable", func(f *facts) { f.service, f.serviceErr = nil, timeout }, stageLeave, "", timeout, false},
		{"target missing: ports still assigned", func(f *facts) { f.targetErr = scaletarget.ErrRolloutsUnavailable }, stageFront, ReasonTargetNotFound, nil, false},
		{"target kind unsupported", func(f *facts) { f.targetErr = scaletarget.ErrUnsupportedKind }, stageFront, ReasonUnsupportedTarget, nil, false},
		{"target unreadable", func(f *facts) { f.targetErr = timeout }, stageFront, "", timeout, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := ready()
			if c.change != nil {
				c.change(f)
			}
			p := planAdmission(f)
			if p.stage == stageRoute {
				p = plan(f)
			}
			reason := ""
			if p.stop != nil {
				reason = p.stop.reason
			}
			if p.stage != c.wantStage || reason != c.wantReason || !errors.Is(p.err, c.wantErr) || p.settleHandoff != c.wantSettle {
				t.Errorf("plan = stage %d, stop %q, err %v, settle %v; want stage %d, stop %q, err %v, settle %v",
					p.stage, reason, p.err, p.settleHandoff, c.wantStage, c.wantReason, c.wantErr, c.wantSettle)
			}
			if p.stop != nil && p.err != nil {
				t.Errorf("plan both stops on %q and fails with %v", reason, p.err)
			}
		})
	}
}

// The ports status records where a plan stops before assigning them.
func TestPlanPorts(t *testing.T) {
	for _, c := range []struct {
		stage stage
		want  *portStatus
	}{
		{stageAdmit, nil},     // as they are
		{stageClaim, noPorts}, // the claimant's, not ours
	} {
		if got := (syncPlan{stage: c.stage}).ports(); got != c.want {
			t.Errorf("stage %d: ports %+v, want %+v", c.stage, got, c.want)
		}
	}
}

func TestPlanProxy(t *testing.T) {
	fenced := fence{keys: []string{"10.1.0.1"}, at: t0}
	ports := &portStatus{}
	cases := []struct {
		name        string
		change      func(*facts)
		fenced      fence
		wantReason  string // "" for Ready True
		wantCanWait bool
		wantAfter   time.Duration // a RequeueAfter, or 0 for none
	}{
		{"fronting: the status may wait", nil, noFence(), "", true, 0},
		{"a slice there: the status is written now", func(f *facts) { f.slice = &discoveryv1.EndpointSlice{} }, noFence(), "", false, 0},
		{"no resolver pod", func(f *facts) { f.resolverPods = 0 }, noFence(), ReasonResolverUnavailable, false, 0},
		{"up with a fence: look again when it lapses", func(f *facts) { f.state.Replicas = 2 }, fenced, "", true, fenceTimeout},
		{"at zero with a fence: nothing to look at", nil, fenced, "", true, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := ready()
			f.now = t0
			if c.change != nil {
				c.change(f)
			}
			r := planProxy(f, ports, c.fenced)
			if r.mode != elastiv1alpha1.ModeProxy || r.ports != ports {
				t.Errorf("result mode %q, ports %p; want proxy and %p", r.mode, r.ports, ports)
			}
			reason := ""
			if r.notReady != nil {
				reason = r.notReady.reason
			} else if r.ready != readyProxy {
				t.Errorf("ready message %q, want %q", r.ready, readyProxy)
			}
			var after time.Duration
			var requeue workloop.RequeueAfter
			if errors.As(r.after, &requeue) {
				after = time.Duration(requeue)
			}
			if reason != c.wantReason || r.canWait != c.wantCanWait || after != c.wantAfter {
				t.Errorf("result reason %q, canWait %v, after %v; want %q, %v, %v", reason, r.canWait, after, c.wantReason, c.wantCanWait, c.wantAfter)
			}
		})
	}
}

func noFence() fence { return fence{} }

// desiredResolverSlice decides the slice from what is there, with no
// client: created, kept, updated, replaced or refused.
func TestDesiredResolverSlice(t *testing.T) {
	es := newElastiService("web", "web", "web")
	public := newPublicService("web")
	ports := resolverSlicePorts(public, nil, resolverProxyPort)
	resolver := []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}}
	current := func() *discoveryv1.EndpointSlice { return resolverSliceFor(es, public, "10.0.0.1") }
	fenced := &fence{keys: []string{"10.1.0.1"}, at: t0}
	cases := []struct {
		name          string
		existing      *discoveryv1.EndpointSlice
		endpoints     []discoveryv1.Endpoint
		fence         *fence
		want          sliceChange
		wantErr       bool
		wantEndpoints []string
	}{
		{"none there", nil, resolver, nil, sliceCreate, false, []string{"10.0.0.1"}},
		{"none there, no resolver pod", nil, nil, nil, sliceCreate, false, []string{}},
		{"as wanted", current(), resolver, nil, sliceKeep, false, []string{"10.0.0.1"}},
		{"the resolver moved", current(), []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.2"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
			nil, sliceUpdate, false, []string{"10.0.0.2"}},
		{"no resolver pod known: keep the serving ones", current(), nil, nil, sliceKeep, false, []string{"10.0.0.1"}},
		{"a fence to record", current(), resolver, fenced, sliceUpdate, false, []string{"10.0.0.1"}},
		{"a label lost", func() *discoveryv1.EndpointSlice {
			s := current()
			delete(s.Labels, discoveryv1.LabelManagedBy)
			return s
		}(), resolver, nil, sliceUpdate, false, []string{"10.0.0.1"}},
		{"not IPv4", func() *discoveryv1.EndpointSlice {
			s := current()
			s.AddressType = discoveryv1.AddressTypeIPv6
			return s
		}(), resolver, nil, sliceReplace, true, nil},
		{"controlled by another", func() *discoveryv1.EndpointSlice {
			s := current()
			s.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "other", UID: "x", Controller: ptr.To(true)}}
			return s
		}(), resolver, nil, sliceKeep, true, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var before *discoveryv1.EndpointSlice
			if c.existing != nil {
				before = c.existing.DeepCopy()
			}
			want, change, err := desiredResolverSlice(es, public, c.existing, c.endpoints, ports, c.fence)
			if change != c.want || (err != nil) != c.wantErr {
				t.Fatalf("change %d, err %v; want %d, error %v", change, err, c.want, c.wantErr)
			}
			if c.existing != nil && !equality.Semantic.DeepEqual(before, c.existing) {
				t.Errorf("the cached slice was changed")
			}
			if c.wantEndpoints == nil {
				return
			}
			var got []string
			for _, e := range want.Endpoints {
				got = append(got, e.Addresses...)
			}
			if len(got) != len(c.wantEndpoints) || (len(got) > 0 && got[0] != c.wantEndpoints[0]) {
				t.Errorf("endpoints %v, want %v", got, c.wantEndpoints)
			}
			if want.Name != names.ResolverSlice("web") || want.Labels[discoveryv1.LabelServiceName] != "web" {
				t.Errorf("slice %s labels %v, want the resolver slice of web", want.Name, want.Labels)
			}
			if !hasOwnerRef(want.OwnerReferences, es) || want.AddressType != discoveryv1.AddressTypeIPv4 {
				t.Errorf("slice owners %v, addressType %s; want es's, IPv4", want.OwnerReferences, want.AddressType)
			}
			if c.fence != nil && want.Annotations[AnnotationFencedEndpoints] != "10.1.0.1" {
				t.Errorf("annotations %v, want the fence", want.Annotations)
			}
		})
	}
}

// resolverSlicePorts keeps TCP ports only: per port where routed, else on
// the proxy port.
func TestResolverSlicePorts(t *testing.T) {
	public := newPublicService("web")
	public.Spec.Ports = append(public.Spec.Ports, corev1.ServicePort{Name: "grpc", Port: 9090, AppProtocol: ptr.To("kubernetes.io/h2c")})
	got := resolverSlicePorts(public, map[int32]int32{9090: 31000}, resolverProxyPort)
	if len(got) != 2 {
		t.Fatalf("ports %d, want http and grpc (dns is UDP)", len(got))
	}
	if *got[0].Name != "http" || *got[0].Port != resolverProxyPort || got[0].AppProtocol != nil {
		t.Errorf("http port %s:%d, want the proxy port %d", *got[0].Name, *got[0].Port, resolverProxyPort)
	}
	if *got[1].Name != "grpc" || *got[1].Port != 31000 || ptr.Deref(got[1].AppProtocol, "") != "kubernetes.io/h2c" {
		t.Errorf("grpc port %s:%d, want its own resolver port 31000 with its appProtocol", *got[1].Name, *got[1].Port)
	}
}
