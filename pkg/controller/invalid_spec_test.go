package controller

import (
	"encoding/json"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/directory"
	"github.com/elasti-dev/elasti/pkg/validation"
)

// invalidSpecs are specs the CRD may let through (an older CRD, or
// KubeElasti's) that the operator cannot serve.
var invalidSpecs = []struct {
	name string
	mut  func(*elastiv1alpha1.ElastiServiceSpec)
}{
	{"1 MiB query", func(s *elastiv1alpha1.ElastiServiceSpec) {
		s.Triggers = []elastiv1alpha1.ScaleTrigger{{Type: "prometheus", Metadata: json.RawMessage(
			`{"query":"` + strings.Repeat("x", 1<<20) + `","threshold":"1"}`)}}
	}},
	{"1000 triggers", func(s *elastiv1alpha1.ElastiServiceSpec) {
		s.Triggers = make([]elastiv1alpha1.ScaleTrigger, 1000)
	}},
	{"service ../other", func(s *elastiv1alpha1.ElastiServiceSpec) { s.Service = "../other" }},
	{"service other-ns/name", func(s *elastiv1alpha1.ElastiServiceSpec) { s.Service = "other-ns/web" }},
	{"service upper case", func(s *elastiv1alpha1.ElastiServiceSpec) { s.Service = "Web" }},
	{"service empty", func(s *elastiv1alpha1.ElastiServiceSpec) { s.Service = "" }},
	{"target ../other", func(s *elastiv1alpha1.ElastiServiceSpec) { s.ScaleTargetRef.Name = "../other" }},
	{"target over 253", func(s *elastiv1alpha1.ElastiServiceSpec) { s.ScaleTargetRef.Name = strings.Repeat("w", 300) }},
	{"unknown trigger type", func(s *elastiv1alpha1.ElastiServiceSpec) {
		s.Triggers = []elastiv1alpha1.ScaleTrigger{{Type: "cpu", Metadata: json.RawMessage(`{"value":"50"}`)}}
	}},
	{"probe regexp too large to compile", func(s *elastiv1alpha1.ElastiServiceSpec) {
		s.ProbeResponse = []elastiv1alpha1.ProbeResponseRule{{
			Path:     &elastiv1alpha1.PathMatch{Type: elastiv1alpha1.MatchRegularExpression, Value: "(" + strings.Repeat("x", 3000) + "){1000}"},
			Response: elastiv1alpha1.ProbeCannedAnswer{Status: 200},
		}}
	}},
	{"1000 probe rules", func(s *elastiv1alpha1.ElastiServiceSpec) {
		s.ProbeResponse = make([]elastiv1alpha1.ProbeResponseRule, 1000)
	}},
	{"ftp serverAddress", func(s *elastiv1alpha1.ElastiServiceSpec) {
		s.Triggers = []elastiv1alpha1.ScaleTrigger{{Type: "prometheus", Metadata: json.RawMessage(
			`{"query":"up","threshold":"1","serverAddress":"ftp://prometheus:9090"}`)}}
	}},
}

// proxyClaimed is a converged fixture with "web" in proxy mode, with
// resolver ports, holding its claim in the directory.
func proxyClaimed(t *testing.T) (*fixture, *elastiv1alpha1.ElastiService, directory.Entry) {
	t.Helper()
	f := newFixture(t)
	proxySeed(f)
	f = f.converged(keyOf(f.elastiService("web")))
	es := f.elastiService("web")
	if es.Status.Mode != elastiv1alpha1.ModeProxy || len(es.Status.ResolverPorts) == 0 {
		t.Fatalf("seed: mode %q, ports %v; want proxy with ports", es.Status.Mode, es.Status.ResolverPorts)
	}
	entry := directory.EntryFor(es)
	f.directory.Claim(webKey, entry)
	return f, es, entry
}

// An ElastiService in proxy mode whose spec is edited into one the
// operator cannot serve gets Ready=False with reason InvalidSpec and a
// Warning event, with a bounded message, and nothing else: no Service,
// EndpointSlice or scale write, its mode, resolver ports and directory
// claim as they were, so its Service still reaches the resolver and wakes.
// A second sync writes nothing at all.
func TestSyncInvalidSpecChangesNothing(t *testing.T) {
	for _, tc := range invalidSpecs {
		t.Run(tc.name, func(t *testing.T) {
			f, es, entry := proxyClaimed(t)
			tc.mut(&es.Spec)
			es.Generation++

			f.expectElasti(expectStatusUpdate(expectedStatus(es, elastiv1alpha1.ModeProxy, metav1.ConditionFalse, ReasonInvalidSpec, f.clock.Now())))
			f.expectEvents("Warning " + ReasonInvalidSpec)
			wantNoError(t, f.run(keyOf(es)))

			msg := readyMessage(f.lastStatusUpdate())
			if len(msg) > validation.MaxMessageBytes || !strings.Contains(msg, "spec.") || strings.Contains(msg, strings.Repeat("x", 100)) {
				t.Errorf("condition message of %d bytes: %.300q", len(msg), msg)
			}
			if got, ok := f.directory.Lookup(webKey); !ok || got.ElastiService != webKey || got.Target != entry.Target {
				t.Errorf("directory entry %+v, %v; want the last valid claim kept", got, ok)
			}

			f = f.converged(keyOf(es))
			wantNoError(t, f.run(keyOf(f.elastiService("web"))))
		})
	}
}

// A new ElastiService that was never valid gets its finalizer and the
// condition, and the operator creates nothing for it.
func TestSyncNewInvalidElastiServiceCreatesNothing(t *testing.T) {
	f := newFixture(t)
	es := proxySeed(f)
	es.Finalizers = nil
	es.Spec.Service = "other-ns/web"

	withFinalizer := es.DeepCopy()
	withFinalizer.Finalizers = []string{elastiv1alpha1.Finalizer}
	f.expectElasti(expectFinalizerPatch(es, elastiv1alpha1.Finalizer))
	f.expectElasti(expectStatusUpdate(expectedStatus(withFinalizer, "", metav1.ConditionFalse, ReasonInvalidSpec, t0)))
	f.expectEvents("Warning " + ReasonInvalidSpec)
	wantNoError(t, f.run(keyOf(es)))

	if msg := readyMessage(f.lastStatusUpdate()); !strings.Contains(msg, `spec.service: Invalid value: "other-ns/web"`) {
		t.Errorf("message %q does not say what is wrong", msg)
	}
	if n := f.directory.Len(); n != 0 {
		t.Errorf("%d directory entries for an invalid ElastiService", n)
	}
}
