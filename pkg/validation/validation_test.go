package validation

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

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

		{"a database and a worker", func(s *v1alpha1.ElastiServiceSpec) {
			s.WakeWith = []v1alpha1.Dependency{
				{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", Replicas: 3},
				{APIVersion: "apps/v1", Kind: "deployments", Name: "worker"},
				{APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout", Name: "cache"},
			}
		}, nil},
		{"eight dependencies", func(s *v1alpha1.ElastiServiceSpec) {
			for i := range v1alpha1.MaxWakeWith {
				s.WakeWith = append(s.WakeWith, v1alpha1.Dependency{APIVersion: "apps/v1", Kind: "Deployment", Name: fmt.Sprintf("d%d", i)})
			}
		}, nil},
		{"nine dependencies", func(s *v1alpha1.ElastiServiceSpec) {
			for i := range v1alpha1.MaxWakeWith + 1 {
				s.WakeWith = append(s.WakeWith, v1alpha1.Dependency{APIVersion: "apps/v1", Kind: "Deployment", Name: fmt.Sprintf("d%d", i)})
			}
		}, []string{"spec.wakeWith: Too many"}},
		{"dependency of an unknown kind", func(s *v1alpha1.ElastiServiceSpec) {
			s.WakeWith = []v1alpha1.Dependency{{APIVersion: "batch/v1", Kind: "Job", Name: "migrate"}}
		}, []string{"spec.wakeWith[0].kind: Unsupported value"}},
		{"dependency with the wrong apiVersion", func(s *v1alpha1.ElastiServiceSpec) {
			s.WakeWith = []v1alpha1.Dependency{{APIVersion: "apps/v1", Kind: "Rollout", Name: "cache"}}
		}, []string{"spec.wakeWith[0].apiVersion: Invalid value"}},
		{"dependency in another namespace", func(s *v1alpha1.ElastiServiceSpec) {
			s.WakeWith = []v1alpha1.Dependency{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "other/db"}}
		}, []string{"spec.wakeWith[0].name: Invalid value"}},
		{"dependency without a name", func(s *v1alpha1.ElastiServiceSpec) {
			s.WakeWith = []v1alpha1.Dependency{{APIVersion: "apps/v1", Kind: "StatefulSet"}}
		}, []string{"spec.wakeWith[0].name: Required value"}},
		{"negative dependency replicas", func(s *v1alpha1.ElastiServiceSpec) {
			s.WakeWith = []v1alpha1.Dependency{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", Replicas: -1}}
		}, []string{"spec.wakeWith[0].replicas: Invalid value"}},
		{"dependency named twice", func(s *v1alpha1.ElastiServiceSpec) {
			s.WakeWith = []v1alpha1.Dependency{
				{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db"},
				{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", Replicas: 2},
			}
		}, []string{"spec.wakeWith[1]: Duplicate value"}},
		{"the target as its own dependency", func(s *v1alpha1.ElastiServiceSpec) {
			s.WakeWith = []v1alpha1.Dependency{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web-v2.1"}}
		}, []string{"spec.wakeWith[0]: Invalid value"}},
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
		{"ordinary probe rules", func(s *v1alpha1.ElastiServiceSpec) {
			s.ProbeResponse = []v1alpha1.ProbeResponseRule{
				{Path: &v1alpha1.PathMatch{Type: v1alpha1.MatchExact, Value: "/healthz"}, Response: v1alpha1.ProbeCannedAnswer{Status: 200, Body: "ok"}},
				probeRule(`^/health(z)?$`), probeRule(`/api/v[0-9]+/.*`),
				{Headers: []v1alpha1.NameValueMatch{{Name: "User-Agent", Type: v1alpha1.MatchRegularExpression, Value: `kube-probe/.*`}}},
			}
		}, nil},
		{"probe rules at every bound", func(s *v1alpha1.ElastiServiceSpec) { s.ProbeResponse = largestProbeResponse() }, nil},
		{"too many probe rules", func(s *v1alpha1.ElastiServiceSpec) {
			s.ProbeResponse = make([]v1alpha1.ProbeResponseRule, v1alpha1.MaxProbeRules+1)
		}, []string{"spec.probeResponse: Too many"}},
		{"probe values one past every bound", func(s *v1alpha1.ElastiServiceSpec) {
			s.ProbeResponse = largestProbeResponse()[:1]
			r := &s.ProbeResponse[0]
			r.Method += "x"
			r.Path.Value += "x"
			r.Headers = append(r.Headers, r.Headers[0])
			r.QueryParams[1].Name += "x"
			r.QueryParams[2].Value += "x"
			r.Response.Body += "x"
		}, []string{"spec.probeResponse[0].method: Too long", "spec.probeResponse[0].path.value: Too long",
			"spec.probeResponse[0].headers: Too many", "spec.probeResponse[0].queryParams[1].name: Too long",
			"spec.probeResponse[0].queryParams[2].value: Too long", "spec.probeResponse[0].response.body: Too long"}},
		{"probe status 199 and 600", func(s *v1alpha1.ElastiServiceSpec) {
			s.ProbeResponse = []v1alpha1.ProbeResponseRule{probeRule("/a"), probeRule("/b")}
			s.ProbeResponse[0].Response.Status = 199
			s.ProbeResponse[1].Response.Status = 600
		}, []string{"spec.probeResponse[0].response.status: Invalid value", "spec.probeResponse[1].response.status: Invalid value"}},
		{"probe status left to the default", func(s *v1alpha1.ElastiServiceSpec) {
			s.ProbeResponse = []v1alpha1.ProbeResponseRule{probeRule("/a")}
			s.ProbeResponse[0].Response.Status = 0
		}, nil},
		{"probe regexp that does not parse", func(s *v1alpha1.ElastiServiceSpec) {
			s.ProbeResponse = []v1alpha1.ProbeResponseRule{probeRule("/healthz)|(?:.*")}
		}, []string{"spec.probeResponse[0].path.value: Invalid value"}},
		{"probe regexp too large to compile", func(s *v1alpha1.ElastiServiceSpec) {
			s.ProbeResponse = []v1alpha1.ProbeResponseRule{probeRule("(" + strings.Repeat("x", 100) + "){1000}")}
		}, []string{"spec.probeResponse[0].path.value: Invalid value"}},
		{"probe regexps past the budget together", func(s *v1alpha1.ElastiServiceSpec) {
			half := fmt.Sprintf("/x{%d}", v1alpha1.MaxProbeRegexpCost/2)
			s.ProbeResponse = []v1alpha1.ProbeResponseRule{probeRule(half), probeRule(half)}
		}, []string{"spec.probeResponse[1].path.value: Invalid value"}},
		{"an exact value is never parsed", func(s *v1alpha1.ElastiServiceSpec) {
			s.ProbeResponse = []v1alpha1.ProbeResponseRule{{Path: &v1alpha1.PathMatch{Type: v1alpha1.MatchExact, Value: "(x{1000}){1000}"}}}
		}, nil},
		{"enabledPeriod in local time with pre-warm", func(s *v1alpha1.ElastiServiceSpec) {
			s.EnabledPeriod = &v1alpha1.EnabledPeriod{Schedule: "0 20 * * 1-5", Duration: "12h", TimeZone: "Europe/Berlin", PreWarm: "15m"}
		}, nil},
		{"KubeElasti's enabledPeriod, in UTC", func(s *v1alpha1.ElastiServiceSpec) {
			s.EnabledPeriod = &v1alpha1.EnabledPeriod{Schedule: "0 9 * * 1-5", Duration: "8h"}
		}, nil},
		{"unknown time zone", func(s *v1alpha1.ElastiServiceSpec) {
			s.EnabledPeriod = &v1alpha1.EnabledPeriod{TimeZone: "Europe/Berlinn"}
		}, []string{"spec.enabledPeriod.timeZone: Invalid value"}},
		{"the operator's own zone", func(s *v1alpha1.ElastiServiceSpec) {
			s.EnabledPeriod = &v1alpha1.EnabledPeriod{TimeZone: "Local"}
		}, []string{"spec.enabledPeriod.timeZone: Invalid value"}},
		{"time zone of a megabyte", func(s *v1alpha1.ElastiServiceSpec) {
			s.EnabledPeriod = &v1alpha1.EnabledPeriod{TimeZone: strings.Repeat("x", 1<<20)}
		}, []string{"spec.enabledPeriod.timeZone: Invalid value"}},
		{"pre-warm over an hour", func(s *v1alpha1.ElastiServiceSpec) {
			s.EnabledPeriod = &v1alpha1.EnabledPeriod{PreWarm: "2h"}
		}, []string{"spec.enabledPeriod.preWarm: Invalid value"}},
		{"pre-warm not a duration", func(s *v1alpha1.ElastiServiceSpec) {
			s.EnabledPeriod = &v1alpha1.EnabledPeriod{PreWarm: "15 minutes"}
		}, []string{"spec.enabledPeriod.preWarm: Invalid value"}},
		{"waiting page at once", func(s *v1alpha1.ElastiServiceSpec) {
			s.WaitingPage = &v1alpha1.WaitingPage{Enabled: true}
		}, nil},
		{"waiting page after the bound", func(s *v1alpha1.ElastiServiceSpec) {
			s.WaitingPage = &v1alpha1.WaitingPage{Enabled: true, After: "1m"}
		}, nil},
		{"waiting page after one past the bound", func(s *v1alpha1.ElastiServiceSpec) {
			s.WaitingPage = &v1alpha1.WaitingPage{Enabled: true, After: "1m0.001s"}
		}, []string{"spec.waitingPage.after: Invalid value"}},
		{"waiting page after negative", func(s *v1alpha1.ElastiServiceSpec) {
			s.WaitingPage = &v1alpha1.WaitingPage{Enabled: true, After: "-1s"}
		}, []string{"spec.waitingPage.after: Invalid value"}},
		{"waiting page after not a duration", func(s *v1alpha1.ElastiServiceSpec) {
			s.WaitingPage = &v1alpha1.WaitingPage{After: "one second"}
		}, []string{"spec.waitingPage.after: Invalid value"}},
		{"waiting page after of a megabyte", func(s *v1alpha1.ElastiServiceSpec) {
			s.WaitingPage = &v1alpha1.WaitingPage{After: strings.Repeat("1", 1<<20) + "s"}
		}, []string{"spec.waitingPage.after: Invalid value"}},
		{"hold at its bounds", func(s *v1alpha1.ElastiServiceSpec) {
			s.Hold = &v1alpha1.Hold{Timeout: "1h", MaxRequests: v1alpha1.MaxHoldRequests}
		}, nil},
		{"hold of one request for a nanosecond", func(s *v1alpha1.ElastiServiceSpec) {
			s.Hold = &v1alpha1.Hold{Timeout: "1ns", MaxRequests: 1}
		}, nil},
		{"hold with nothing set", func(s *v1alpha1.ElastiServiceSpec) {
			s.Hold = &v1alpha1.Hold{}
		}, nil},
		{"hold timeout one past the bound", func(s *v1alpha1.ElastiServiceSpec) {
			s.Hold = &v1alpha1.Hold{Timeout: "1h0m0.001s"}
		}, []string{"spec.hold.timeout: Invalid value"}},
		{"hold timeout zero", func(s *v1alpha1.ElastiServiceSpec) {
			s.Hold = &v1alpha1.Hold{Timeout: "0s"}
		}, []string{"spec.hold.timeout: Invalid value"}},
		{"hold timeout negative", func(s *v1alpha1.ElastiServiceSpec) {
			s.Hold = &v1alpha1.Hold{Timeout: "-5m"}
		}, []string{"spec.hold.timeout: Invalid value"}},
		{"hold timeout not a duration", func(s *v1alpha1.ElastiServiceSpec) {
			s.Hold = &v1alpha1.Hold{Timeout: "5 minutes"}
		}, []string{"spec.hold.timeout: Invalid value"}},
		{"hold timeout in upper case", func(s *v1alpha1.ElastiServiceSpec) {
			s.Hold = &v1alpha1.Hold{Timeout: "5M"}
		}, []string{"spec.hold.timeout: Invalid value"}},
		{"hold timeout of a megabyte", func(s *v1alpha1.ElastiServiceSpec) {
			s.Hold = &v1alpha1.Hold{Timeout: strings.Repeat("1", 1<<20) + "s"}
		}, []string{"spec.hold.timeout: Invalid value"}},
		{"hold of one request past the bound", func(s *v1alpha1.ElastiServiceSpec) {
			s.Hold = &v1alpha1.Hold{MaxRequests: v1alpha1.MaxHoldRequests + 1}
		}, []string{"spec.hold.maxRequests: Invalid value"}},
		{"hold of a negative count", func(s *v1alpha1.ElastiServiceSpec) {
			s.Hold = &v1alpha1.Hold{MaxRequests: -1}
		}, []string{"spec.hold.maxRequests: Invalid value"}},
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

func probeRule(pathRegexp string) v1alpha1.ProbeResponseRule {
	return v1alpha1.ProbeResponseRule{
		Path:     &v1alpha1.PathMatch{Type: v1alpha1.MatchRegularExpression, Value: pathRegexp},
		Response: v1alpha1.ProbeCannedAnswer{Status: 200, Body: "ok"},
	}
}

// largestProbeResponse is at every bound, lengths counted in characters
// (é is two bytes), with a regular expression in each rule's first header
// that together spend all but a little of the budget.
func largestProbeResponse() []v1alpha1.ProbeResponseRule {
	str := func(n int) string { return strings.Repeat("é", n) }
	match := func() v1alpha1.NameValueMatch {
		return v1alpha1.NameValueMatch{Name: str(v1alpha1.MaxProbeNameLength), Type: v1alpha1.MatchExact, Value: str(v1alpha1.MaxProbeValueLength)}
	}
	var rules []v1alpha1.ProbeResponseRule
	for range v1alpha1.MaxProbeRules {
		r := v1alpha1.ProbeResponseRule{
			Method:   str(v1alpha1.MaxProbeMethodLength),
			Path:     &v1alpha1.PathMatch{Type: v1alpha1.MatchPathPrefix, Value: str(v1alpha1.MaxProbeValueLength)},
			Response: v1alpha1.ProbeCannedAnswer{Status: v1alpha1.MaxProbeStatus, Body: str(v1alpha1.MaxProbeBodyLength)},
		}
		for range v1alpha1.MaxProbeMatches {
			r.Headers = append(r.Headers, match())
			r.QueryParams = append(r.QueryParams, match())
		}
		r.Headers[0] = v1alpha1.NameValueMatch{Name: "User-Agent", Type: v1alpha1.MatchRegularExpression, Value: `kube-probe/.*`}
		rules = append(rules, r)
	}
	return rules
}

// The attack measured before the budget existed, a 3,000-character group
// repeated {1000} (about 120 MiB once compiled), one within the length
// bound (4 MiB), and nested repeats, which multiply, are refused while
// allocating next to nothing.
func TestOversizedRegexpsRefusedCheaply(t *testing.T) {
	for _, re := range []string{
		"(" + strings.Repeat("ab", 1500) + "){1000}",
		"(" + strings.Repeat("a", 100) + "){1000}",
		`((a{1000}){1000}){1000}`,
		`(((a{10}){10}){10})`,
	} {
		es := valid()
		for range 2 {
			es.Spec.ProbeResponse = append(es.Spec.ProbeResponse, probeRule(re))
		}
		var errs field.ErrorList
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		start := time.Now()
		errs = ValidateElastiService(es)
		took := time.Since(start)
		runtime.ReadMemStats(&after)
		if len(errs) != 2 {
			t.Errorf("%.20q: %d errors, want one per rule: %v", re, len(errs), errs)
		}
		if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 1<<20 || took > time.Second {
			t.Errorf("%.20q: validating allocated %d bytes in %s", re, allocated, took)
		}
		if msg := Message(errs); strings.Contains(msg, strings.Repeat("ab", 40)) || strings.Contains(msg, strings.Repeat("a", 80)) {
			t.Errorf("message repeats the pattern: %s", msg)
		}
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

// TestUnknownTimeZoneMessage is what the InvalidSpec condition and event
// say: the field, the zone as written, and what to write instead.
func TestUnknownTimeZoneMessage(t *testing.T) {
	es := valid()
	es.Spec.EnabledPeriod = &v1alpha1.EnabledPeriod{Schedule: "0 20 * * *", Duration: "12h", TimeZone: "Europe/Berlinn"}
	want := `spec.enabledPeriod.timeZone: Invalid value: "Europe/Berlinn": unknown time zone; use an IANA name such as Europe/Berlin or America/New_York`
	if got := Message(ValidateElastiService(es)); got != want {
		t.Errorf("message %q\nwant    %q", got, want)
	}
}
