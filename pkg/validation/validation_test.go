package validation

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

// valid is a spec as KubeElasti's documentation writes it.
func valid() *v1alpha1.ElastiService {
	return &v1alpha1.ElastiService{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"},
		Spec: v1alpha1.ElastiServiceSpec{
			Service:        "web",
			ScaleTargetRef: v1alpha1.ScaleTargetRef{APIVersion: "apps/v1", Kind: "deployments", Name: "web-v2.1"},
			Triggers: []v1alpha1.ScaleTrigger{{Type: "prometheus", Metadata: json.RawMessage(
				`{"query":"sum(rate(nginx_ingress_controller_nginx_process_requests_total[1m])) or vector(0)",` +
					`"serverAddress":"http://kube-prometheus-stack-prometheus.monitoring.svc.cluster.local:9090","threshold":"0.5"}`)}},
		},
	}
}

func prometheus(metadata string) v1alpha1.ScaleTrigger {
	return v1alpha1.ScaleTrigger{Type: "prometheus", Metadata: json.RawMessage(metadata)}
}

func TestValidateElastiService(t *testing.T) {
	megaQuery := `{"query":"` + strings.Repeat("x", 1<<20) + `","threshold":"1"}`
	cases := []struct {
		name string
		mut  func(*v1alpha1.ElastiServiceSpec)
		// want is every error, as "field: type"; none means valid.
		want []string
	}{
		{"KubeElasti's sample", func(*v1alpha1.ElastiServiceSpec) {}, nil},
		{"no triggers", func(s *v1alpha1.ElastiServiceSpec) { s.Triggers = nil }, nil},
		{"serverAddress left to the default", func(s *v1alpha1.ElastiServiceSpec) {
			s.Triggers = []v1alpha1.ScaleTrigger{prometheus(`{"query":"up","threshold":"1"}`)}
		}, nil},
		{"service and target at their longest", func(s *v1alpha1.ElastiServiceSpec) {
			s.Service = "a" + strings.Repeat("b", 62)
			s.ScaleTargetRef.Name = strings.Repeat(strings.Repeat("c", 62)+".", 4) + "d"
		}, nil},
		{"ten triggers", func(s *v1alpha1.ElastiServiceSpec) {
			for range v1alpha1.MaxTriggers - 1 {
				s.Triggers = append(s.Triggers, s.Triggers[0])
			}
		}, nil},

		{"empty service", func(s *v1alpha1.ElastiServiceSpec) { s.Service = "" }, []string{"spec.service: Required value"}},
		{"service in another namespace", func(s *v1alpha1.ElastiServiceSpec) { s.Service = "other-ns/web" }, []string{"spec.service: Invalid value"}},
		{"service path", func(s *v1alpha1.ElastiServiceSpec) { s.Service = "../other" }, []string{"spec.service: Invalid value"}},
		{"service DNS name", func(s *v1alpha1.ElastiServiceSpec) { s.Service = "web.other" }, []string{"spec.service: Invalid value"}},
		{"service upper case", func(s *v1alpha1.ElastiServiceSpec) { s.Service = "Web" }, []string{"spec.service: Invalid value"}},
		{"service starting with a digit", func(s *v1alpha1.ElastiServiceSpec) { s.Service = "1web" }, []string{"spec.service: Invalid value"}},
		{"service over 63", func(s *v1alpha1.ElastiServiceSpec) { s.Service = strings.Repeat("a", 64) }, []string{"spec.service: Invalid value"}},
		{"empty target", func(s *v1alpha1.ElastiServiceSpec) { s.ScaleTargetRef.Name = "" }, []string{"spec.scaleTargetRef.name: Required value"}},
		{"target in another namespace", func(s *v1alpha1.ElastiServiceSpec) { s.ScaleTargetRef.Name = "other-ns/web" },
			[]string{"spec.scaleTargetRef.name: Invalid value"}},
		{"target path", func(s *v1alpha1.ElastiServiceSpec) { s.ScaleTargetRef.Name = "../other" }, []string{"spec.scaleTargetRef.name: Invalid value"}},
		{"target upper case", func(s *v1alpha1.ElastiServiceSpec) { s.ScaleTargetRef.Name = "Web" }, []string{"spec.scaleTargetRef.name: Invalid value"}},
		{"target over 253", func(s *v1alpha1.ElastiServiceSpec) { s.ScaleTargetRef.Name = strings.Repeat("a", 254) },
			[]string{"spec.scaleTargetRef.name: Invalid value"}},

		{"eleven triggers", func(s *v1alpha1.ElastiServiceSpec) {
			for range v1alpha1.MaxTriggers {
				s.Triggers = append(s.Triggers, s.Triggers[0])
			}
		}, []string{"spec.triggers: Too many"}},
		{"a thousand bad triggers make one error", func(s *v1alpha1.ElastiServiceSpec) {
			s.Triggers = make([]v1alpha1.ScaleTrigger, 1000)
		}, []string{"spec.triggers: Too many"}},
		{"unknown trigger type", func(s *v1alpha1.ElastiServiceSpec) { s.Triggers[0].Type = "cpu" },
			[]string{"spec.triggers[0].type: Unsupported value"}},
		{"empty trigger type", func(s *v1alpha1.ElastiServiceSpec) { s.Triggers[0].Type = "" },
			[]string{"spec.triggers[0].type: Unsupported value"}},
		{"1 MiB query", func(s *v1alpha1.ElastiServiceSpec) { s.Triggers[0] = prometheus(megaQuery) },
			[]string{"spec.triggers[0]: Invalid value"}},
		{"query over 16 KiB", func(s *v1alpha1.ElastiServiceSpec) {
			s.Triggers[0] = prometheus(`{"query":"` + strings.Repeat("x", v1alpha1.MaxTriggerQueryBytes+1) + `","threshold":"1"}`)
		}, []string{"spec.triggers[0]: Invalid value"}},
		{"ftp serverAddress", func(s *v1alpha1.ElastiServiceSpec) {
			s.Triggers = append(s.Triggers, prometheus(`{"query":"up","threshold":"1","serverAddress":"ftp://prometheus:9090"}`))
		}, []string{"spec.triggers[1]: Invalid value"}},
		{"serverAddress without a scheme", func(s *v1alpha1.ElastiServiceSpec) {
			s.Triggers[0] = prometheus(`{"query":"up","threshold":"1","serverAddress":"prometheus:9090"}`)
		}, []string{"spec.triggers[0]: Invalid value"}},
		{"no threshold", func(s *v1alpha1.ElastiServiceSpec) { s.Triggers[0] = prometheus(`{"query":"up"}`) },
			[]string{"spec.triggers[0]: Invalid value"}},
		{"metadata not an object", func(s *v1alpha1.ElastiServiceSpec) { s.Triggers[0] = prometheus(`"up"`) },
			[]string{"spec.triggers[0]: Invalid value"}},
		{"everything wrong at once", func(s *v1alpha1.ElastiServiceSpec) {
			s.Service, s.ScaleTargetRef.Name = "", "A/B"
			s.Triggers = append(s.Triggers, v1alpha1.ScaleTrigger{Type: "cpu"}, prometheus(megaQuery))
		}, []string{"spec.service: Required value", "spec.scaleTargetRef.name: Invalid value",
			"spec.triggers[1].type: Unsupported value", "spec.triggers[2]: Invalid value"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			es := valid()
			c.mut(&es.Spec)
			errs := ValidateElastiService(es)
			var got []string
			for _, e := range errs {
				got = append(got, e.Field+": "+e.Type.String())
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("errors %q, want %q\n%v", got, c.want, errs)
			}
			if msg := Message(errs); len(msg) > MaxMessageBytes || strings.Contains(msg, strings.Repeat("x", 100)) {
				t.Errorf("message of %d bytes repeats the value: %.300s", len(msg), msg)
			}
		})
	}
}

// A value is repeated at most in part, with its length.
func TestLongValuesAreShortened(t *testing.T) {
	es := valid()
	es.Spec.Service = strings.Repeat("S", 300)
	msg := Message(ValidateElastiService(es))
	if strings.Contains(msg, strings.Repeat("S", maxQuotedValue+1)) || !strings.Contains(msg, "(300 bytes)") {
		t.Errorf("message %q", msg)
	}
}

// Message keeps whole errors while they fit and counts the rest.
func TestMessageIsBounded(t *testing.T) {
	var errs field.ErrorList
	for i := range 100 {
		errs = append(errs, field.Invalid(field.NewPath("spec", "triggers").Index(i), "x", strings.Repeat("detail ", 10)))
	}
	msg := Message(errs)
	if len(msg) > MaxMessageBytes || !strings.HasPrefix(msg, errs[0].Error()+"; ") || !strings.HasSuffix(msg, " more") {
		t.Errorf("message of %d bytes: %q", len(msg), msg)
	}
	huge := field.ErrorList{field.Invalid(field.NewPath("spec"), "x", strings.Repeat("é", MaxMessageBytes)), errs[0]}
	if msg := Message(huge); len(msg) > MaxMessageBytes || !strings.HasSuffix(msg, "…; and 1 more") || !strings.HasPrefix(msg, "spec: ") {
		t.Errorf("an oversized first error: %d bytes, %q", len(msg), msg)
	}
	if msg := Message(errs[:2]); msg != errs[0].Error()+"; "+errs[1].Error() {
		t.Errorf("two short errors: %q", msg)
	}
}
