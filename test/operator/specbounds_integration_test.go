package operator_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/controller"
	"github.com/elasti-dev/elasti/pkg/names"
	"github.com/elasti-dev/elasti/test/install"
	"github.com/elasti-dev/elasti/test/localcluster"
	"github.com/elasti-dev/elasti/test/localcluster/clustertest"
	"github.com/elasti-dev/elasti/test/testenv"
)

// With a CRD that does not bound probeResponse (elasti's before the
// bounds, which an upgrade may leave installed), the attack measured on
// issue #20 reaches the operator: a rule whose regular expression is a
// 3,000-character group repeated {1000}, and one within every length bound
// that no schema can refuse, a 100-character group repeated {1000} (4 MiB
// compiled). The operator refuses it as it
// refuses any invalid spec, with Ready=False reason InvalidSpec and a
// Warning event, and writes nothing for it but its finalizer and status,
// while it serves a valid ElastiService of the same namespace as usual.
//
// Not parallel: it swaps the cluster's CRD, which no other test of this
// package may see. Go runs it while every parallel test is paused, and
// puts the real CRD back when it ends. (On a cluster shared by several
// packages, ELASTI_TEST_CLUSTER, run it alone.)
func TestOversizedProbeResponseIsInvalidSpecWithAnUnboundedCRD(t *testing.T) {
	e := testenv.New(t)
	applyCRDWithoutProbeBounds(t)
	e.StartOperator()
	e.Resolver(1)
	e.App("web", 0)
	e.App("other", 0)

	attack := "(" + strings.Repeat("ab", 1500) + "){1000}"
	es := &elastiv1alpha1.ElastiService{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: e.NS},
		Spec: elastiv1alpha1.ElastiServiceSpec{
			Service:           "web",
			ScaleTargetRef:    elastiv1alpha1.ScaleTargetRef{APIVersion: elastiv1alpha1.APIVersionApps, Kind: elastiv1alpha1.KindDeployment, Name: "web"},
			MinTargetReplicas: 1,
			CooldownPeriod:    60,
		},
	}
	for _, re := range []string{attack, "(" + strings.Repeat("a", 100) + "){1000}"} {
		es.Spec.ProbeResponse = append(es.Spec.ProbeResponse, elastiv1alpha1.ProbeResponseRule{
			Path:     &elastiv1alpha1.PathMatch{Type: elastiv1alpha1.MatchRegularExpression, Value: re},
			Response: elastiv1alpha1.ProbeCannedAnswer{Status: 200, Body: "ok"},
		})
	}
	// The apiserver takes up a CRD's new schema a moment after it is
	// Established: until then it still refuses this with the old bounds.
	err := wait.PollUntilContextTimeout(e.Ctx(), 200*time.Millisecond, testenv.WaitTimeout, true, func(ctx context.Context) (bool, error) {
		_, err := e.Elasti.ElastiV1alpha1().ElastiServices(e.NS).Create(ctx, es, metav1.CreateOptions{})
		return err == nil || apierrors.IsAlreadyExists(err), nil
	})
	if err != nil {
		t.Fatalf("the CRD without bounds never let the oversized spec through: %v", err)
	}
	e.ElastiService("other", "other", elastiv1alpha1.KindDeployment, "other")

	got := e.WaitReason("web", metav1.ConditionFalse, controller.ReasonInvalidSpec)
	msg := testenv.Describe(got)
	if !strings.Contains(msg, "spec.probeResponse[0].path.value: Too long") || !strings.Contains(msg, "spec.probeResponse[1].path.value: Invalid value") ||
		!strings.Contains(msg, "too large") || strings.Contains(msg, strings.Repeat("ab", 40)) || strings.Contains(msg, strings.Repeat("a", 80)) {
		t.Errorf("condition does not name the field, or repeats the pattern: %.600s", msg)
	}
	e.Eventually("a Warning InvalidSpec event", func() (bool, string) { return e.HasEvent("web", controller.ReasonInvalidSpec) })
	// The operator is not stuck: the valid one next to it is served.
	e.WaitMode("other", elastiv1alpha1.ModeProxy)
	e.HoldsReplicas(elastiv1alpha1.KindDeployment, "web", 0, 3*time.Second)

	if got := e.Get("web"); got.Status.Mode != "" || len(got.Status.ResolverPorts) != 0 {
		t.Errorf("the invalid ElastiService got mode %q and resolver ports %v", got.Status.Mode, got.Status.ResolverPorts)
	}
	if _, err := e.PrivateService("web"); !apierrors.IsNotFound(err) {
		t.Errorf("private Service of web: %v, want none", err)
	}
	if _, err := e.ResolverSlice("web"); !apierrors.IsNotFound(err) {
		t.Errorf("resolver EndpointSlice of web: %v, want none", err)
	}
	// Every write of this operator concerning web, from the audit log: only
	// the ElastiService's finalizer and status.
	operator := func(userAgent string) bool { return strings.HasSuffix(userAgent, " "+e.UserAgentSuffix()) }
	webObjects := []string{"web", names.PrivateService("web"), names.ResolverSlice("web")}
	allowed := []string{
		fmt.Sprintf("patch elastiservices %s/web", e.NS),
		fmt.Sprintf("update elastiservices/status %s/web", e.NS),
	}
	var statusWrites int
	for _, w := range testenv.Writes(t, operator) {
		name := w[strings.LastIndex(w, "/")+1:]
		if !slices.Contains(webObjects, name) {
			continue
		}
		if !slices.Contains(allowed, w) {
			t.Errorf("the operator wrote %q for an invalid spec", w)
		}
		if w == allowed[1] {
			statusWrites++
		}
	}
	if statusWrites == 0 {
		t.Errorf("no status write for web in the audit log; the filter sees nothing")
	}
}

// applyCRDWithoutProbeBounds installs elasti's CRD with every bound of
// spec.probeResponse removed, and the real one again when t ends (after the
// Env's own cleanups registered later, which finalize its ElastiServices).
func applyCRDWithoutProbeBounds(t *testing.T) {
	t.Helper()
	root, err := localcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	crds, err := install.ReadCRDs(filepath.Join(root, install.CRDFile))
	if err != nil {
		t.Fatal(err)
	}
	cfg := clustertest.Get(t).RESTConfig()
	var loose []*apiextensionsv1.CustomResourceDefinition
	for _, crd := range crds {
		crd = crd.DeepCopy()
		for i := range crd.Spec.Versions {
			spec := crd.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"]
			probes, ok := spec.Properties["probeResponse"]
			if !ok {
				continue
			}
			unbound(&probes)
			spec.Properties["probeResponse"] = probes
			crd.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"] = spec
		}
		loose = append(loose, crd)
	}
	t.Cleanup(func() {
		if err := install.ApplyCRDs(context.WithoutCancel(t.Context()), cfg, crds...); err != nil {
			t.Errorf("cleanup: restore the CRD: %v", err)
		}
	})
	if err := install.ApplyCRDs(t.Context(), cfg, loose...); err != nil {
		t.Fatal(err)
	}
}

// unbound removes every count, length and range bound from s and below.
func unbound(s *apiextensionsv1.JSONSchemaProps) {
	s.MaxItems, s.MaxLength, s.Minimum, s.Maximum = nil, nil, nil, nil
	if s.Items != nil && s.Items.Schema != nil {
		unbound(s.Items.Schema)
	}
	for k, p := range s.Properties {
		unbound(&p)
		s.Properties[k] = p
	}
}
