package controller

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/scaletarget"
)

// ready are facts every check lets through: a valid ElastiService that
// claimed its Service, which selects its Deployment's pods, with a ready
// resolver pod.
func ready() *facts {
	es := newElastiService("web", "web-svc", "web")
	return &facts{
		es:      es,
		service: &corev1.Service{Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}}},
		target:  scaletarget.RefFor(es), podLabels: map[string]string{"app": "web", "tier": "front"},
		claimant: es.Key(), claimed: true,
		resolverPods: 1, resolverNamespace: "elasti", resolverService: "elasti-resolver-service",
	}
}

func TestReadinessChecks(t *testing.T) {
	notFound := apierrors.NewNotFound(schema.GroupResource{Resource: "services"}, "web-svc")
	cases := []struct {
		name        string
		check       readinessCheck
		change      func(*facts)
		wantReason  string // "" lets the sync go on
		wantMessage string // a part of the message
		wantThen    notReadyFollowUp
	}{
		{"invalid spec", invalidSpec, func(f *facts) { f.es.Spec.Service = "../other" }, ReasonInvalidSpec, "spec.service", awaitChange},
		{"valid spec", invalidSpec, nil, "", "", false},
		{"no selector", serviceWithoutSelector, func(f *facts) { f.service.Spec.Selector = nil }, ReasonServiceHasNoSelector, `Service "" has no selector`, awaitChange},
		{"no selector, Service unread", serviceWithoutSelector, func(f *facts) { f.service, f.serviceErr = nil, notFound }, "", "", false},
		{"a selector", serviceWithoutSelector, nil, "", "", false},
		{"selects other pods", serviceSelectsOtherPods, func(f *facts) { f.service.Spec.Selector["app"] = "api" }, ReasonServiceSelectsOtherPods, `selects app=api, which the pod template of Deployment "web"`, awaitChange},
		{"other pods, target unread", serviceSelectsOtherPods, func(f *facts) {
			f.service.Spec.Selector["app"] = "api"
			f.targetErr = notFound
		}, "", "", false},
		{"a label the Deployment adds", serviceSelectsOtherPods, func(f *facts) { f.service.Spec.Selector["pod-template-hash"] = "5d8f" }, "", "", false},
		{"selects the target's pods", serviceSelectsOtherPods, nil, "", "", false},
		{"claimed by another", serviceClaimedByAnother, func(f *facts) {
			f.claimed, f.claimant = false, types.NamespacedName{Namespace: testNamespace, Name: "older"}
		}, ReasonServiceConflict, `Service "web-svc" is already managed by ElastiService "older"`, awaitChange},
		{"claimed", serviceClaimedByAnother, nil, "", "", false},
		{"Service missing", serviceMissing, func(f *facts) { f.service, f.serviceErr = nil, notFound }, ReasonServiceNotFound, `Service "web-svc" does not exist`, retryWithBackoff},
		{"Service unreadable", serviceMissing, func(f *facts) { f.service, f.serviceErr = nil, errors.New("timeout") }, "", "", false},
		{"Service there", serviceMissing, nil, "", "", false},
		{"unsupported kind", targetKindUnsupported, func(f *facts) {
			f.es.Spec.ScaleTargetRef.Kind = "CronJob"
			f.targetErr = fmt.Errorf("%w: CronJob", scaletarget.ErrUnsupportedKind)
		}, ReasonUnsupportedTarget, `kind "CronJob" is not supported`, awaitChange},
		{"supported kind", targetKindUnsupported, nil, "", "", false},
		{"target missing", targetMissing, func(f *facts) { f.targetErr = notFound }, ReasonTargetNotFound, `scale target Deployment "web" does not exist`, retryWithBackoff},
		{"no Rollouts CRD", targetMissing, func(f *facts) { f.targetErr = scaletarget.ErrRolloutsUnavailable }, ReasonTargetNotFound, "Argo Rollouts CRD", retryWithBackoff},
		{"target unreadable", targetMissing, func(f *facts) { f.targetErr = errors.New("timeout") }, "", "", false},
		{"target there", targetMissing, nil, "", "", false},
		{"no resolver pod", resolverUnavailable, func(f *facts) { f.resolverPods = 0 }, ReasonResolverUnavailable, "no ready pod behind resolver Service elasti/elasti-resolver-service", retryWithBackoff},
		{"a resolver pod", resolverUnavailable, nil, "", "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := ready()
			if c.change != nil {
				c.change(f)
			}
			v := c.check(f)
			switch {
			case c.wantReason == "" && v != nil:
				t.Fatalf("not ready %+v, want the sync to go on", *v)
			case c.wantReason == "":
				return
			case v == nil:
				t.Fatalf("the sync goes on, want %s", c.wantReason)
			}
			if v.reason != c.wantReason || !strings.Contains(v.message, c.wantMessage) || v.then != c.wantThen {
				t.Errorf("not ready %+v, want %s with %q, retry %v", *v, c.wantReason, c.wantMessage, c.wantThen)
			}
		})
	}
}

// The chains let clean facts through, and the first failed check wins.
func TestReadinessChains(t *testing.T) {
	for name, chain := range map[string]readinessChecks{"selector": selectorChecks, "target": targetChecks} {
		if v := chain.First(ready()); v != nil {
			t.Errorf("%s checks fail clean facts: %+v", name, *v)
		}
	}
	f := ready()
	f.service.Spec.Selector = nil
	if v := selectorChecks.First(f); v == nil || v.reason != ReasonServiceHasNoSelector {
		t.Errorf("selector checks: %+v, want %s", v, ReasonServiceHasNoSelector)
	}
	f = ready()
	f.es.Spec.ScaleTargetRef.Kind = elastiv1alpha1.KindRollout
	f.targetErr = errors.Join(scaletarget.ErrUnsupportedKind, scaletarget.ErrRolloutsUnavailable)
	if v := targetChecks.First(f); v == nil || v.reason != ReasonUnsupportedTarget {
		t.Errorf("target checks: %+v, want %s first", v, ReasonUnsupportedTarget)
	}
}
