package triggers

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

const cooldown = 15 * time.Minute

var defaultHealthQuery = UptimeQuery(DefaultUptimeFilter, cooldown)

// promAnswers answers the health query with up and every other query from
// values, by PromQL; an unknown query gets an empty result.
func promAnswers(up string, values map[string]string) func(string) (int, string) {
	return func(q string) (int, string) {
		if strings.HasPrefix(q, "min_over_time((max(up{") {
			return http.StatusOK, vector(up)
		}
		if v, ok := values[q]; ok {
			return http.StatusOK, vector(v)
		}
		return http.StatusOK, vector()
	}
}

func trigger(meta string) v1alpha1.ScaleTrigger {
	return v1alpha1.ScaleTrigger{Type: v1alpha1.TriggerTypePrometheus, Metadata: json.RawMessage(meta)}
}

func promTrigger(server, query, threshold string) v1alpha1.ScaleTrigger {
	return trigger(fmt.Sprintf(`{"serverAddress":%q,"query":%q,"threshold":%q}`, server, query, threshold))
}

func TestEvaluate(t *testing.T) {
	values := map[string]string{"low": `"0.1"`, "half": `"0.5"`, "high": `"3"`, "zero": `"0"`, "nan": `"NaN"`}

	tests := []struct {
		name     string
		up       string
		triggers func(server string) []v1alpha1.ScaleTrigger
		want     Verdict
		wantErr  string
		queries  []string
	}{
		{
			name:     "no triggers",
			triggers: func(string) []v1alpha1.ScaleTrigger { return nil },
			want:     Verdict{Reason: ReasonNoTriggers, Detail: "no triggers, so nothing says the service is idle"},
		},
		{
			name:     "below threshold",
			up:       `"1"`,
			triggers: func(s string) []v1alpha1.ScaleTrigger { return []v1alpha1.ScaleTrigger{promTrigger(s, "low", "0.5")} },
			want:     Verdict{Idle: true, Reason: ReasonIdle, Detail: "all 1 triggers below threshold"},
			queries:  []string{defaultHealthQuery, "low"},
		},
		{
			name:     "zero below zero threshold is not idle",
			up:       `"1"`,
			triggers: func(s string) []v1alpha1.ScaleTrigger { return []v1alpha1.ScaleTrigger{promTrigger(s, "zero", "0")} },
			want:     Verdict{Reason: ReasonAboveThreshold, Detail: "triggers[0]: value 0 is not below threshold 0"},
			queries:  []string{defaultHealthQuery, "zero"},
		},
		{
			name:     "equal to threshold",
			up:       `"1"`,
			triggers: func(s string) []v1alpha1.ScaleTrigger { return []v1alpha1.ScaleTrigger{promTrigger(s, "half", "0.5")} },
			want:     Verdict{Reason: ReasonAboveThreshold, Detail: "triggers[0]: value 0.5 is not below threshold 0.5"},
			queries:  []string{defaultHealthQuery, "half"},
		},
		{
			name:     "above threshold",
			up:       `"1"`,
			triggers: func(s string) []v1alpha1.ScaleTrigger { return []v1alpha1.ScaleTrigger{promTrigger(s, "high", "0.5")} },
			want:     Verdict{Reason: ReasonAboveThreshold, Detail: "triggers[0]: value 3 is not below threshold 0.5"},
			queries:  []string{defaultHealthQuery, "high"},
		},
		{
			name: "all triggers below",
			up:   `"1"`,
			triggers: func(s string) []v1alpha1.ScaleTrigger {
				return []v1alpha1.ScaleTrigger{promTrigger(s, "low", "0.5"), promTrigger(s, "high", "10")}
			},
			want:    Verdict{Idle: true, Reason: ReasonIdle, Detail: "all 2 triggers below threshold"},
			queries: []string{defaultHealthQuery, "low", "high"},
		},
		{
			name: "one trigger busy; every trigger still runs",
			up:   `"1"`,
			triggers: func(s string) []v1alpha1.ScaleTrigger {
				return []v1alpha1.ScaleTrigger{promTrigger(s, "high", "1"), promTrigger(s, "low", "0.5")}
			},
			want:    Verdict{Reason: ReasonAboveThreshold, Detail: "triggers[0]: value 3 is not below threshold 1"},
			queries: []string{defaultHealthQuery, "high", "low"},
		},
		{
			name: "a later trigger's error wins over a busy one",
			up:   `"1"`,
			triggers: func(s string) []v1alpha1.ScaleTrigger {
				return []v1alpha1.ScaleTrigger{promTrigger(s, "high", "1"), promTrigger(s, "missing", "0.5")}
			},
			want:    Verdict{Reason: ReasonEmptyResult},
			wantErr: "triggers[1]: prometheus at ",
			queries: []string{defaultHealthQuery, "high", "missing"},
		},
		{
			name: "empty result",
			up:   `"1"`,
			triggers: func(s string) []v1alpha1.ScaleTrigger {
				return []v1alpha1.ScaleTrigger{promTrigger(s, "missing", "0.5")}
			},
			want:    Verdict{Reason: ReasonEmptyResult},
			wantErr: "query returned no series",
			queries: []string{defaultHealthQuery, "missing"},
		},
		{
			name:     "NaN value",
			up:       `"1"`,
			triggers: func(s string) []v1alpha1.ScaleTrigger { return []v1alpha1.ScaleTrigger{promTrigger(s, "nan", "0.5")} },
			want:     Verdict{Reason: ReasonNotFinite},
			wantErr:  `"NaN" is not finite`,
			queries:  []string{defaultHealthQuery, "nan"},
		},
		{
			name:     "prometheus restarted within the cooldown",
			up:       `"0"`,
			triggers: func(s string) []v1alpha1.ScaleTrigger { return []v1alpha1.ScaleTrigger{promTrigger(s, "low", "0.5")} },
			want:     Verdict{Reason: ReasonPrometheusDown},
			wantErr:  `has not been up{container="prometheus"} for the whole cooldown of 15m0s`,
			queries:  []string{defaultHealthQuery},
		},
		{
			name: "one health check per server",
			up:   `"1"`,
			triggers: func(s string) []v1alpha1.ScaleTrigger {
				return []v1alpha1.ScaleTrigger{promTrigger(s, "low", "1"), promTrigger(s, "zero", "1"), promTrigger(s, "half", "1")}
			},
			want:    Verdict{Idle: true, Reason: ReasonIdle, Detail: "all 3 triggers below threshold"},
			queries: []string{defaultHealthQuery, "low", "zero", "half"},
		},
		{
			name: "a different uptime filter is checked separately",
			up:   `"1"`,
			triggers: func(s string) []v1alpha1.ScaleTrigger {
				return []v1alpha1.ScaleTrigger{
					promTrigger(s, "low", "1"),
					trigger(fmt.Sprintf(`{"serverAddress":%q,"query":"zero","threshold":"1","uptimeFilter":"job=\"p\""}`, s)),
				}
			},
			want:    Verdict{Idle: true, Reason: ReasonIdle, Detail: "all 2 triggers below threshold"},
			queries: []string{defaultHealthQuery, UptimeQuery(`job="p"`, cooldown), "low", "zero"},
		},
		{
			name: "unsupported type",
			triggers: func(s string) []v1alpha1.ScaleTrigger {
				return []v1alpha1.ScaleTrigger{promTrigger(s, "low", "1"), {Type: "cpu", Metadata: json.RawMessage(`{}`)}}
			},
			want:    Verdict{Reason: ReasonInvalidMetadata},
			wantErr: `triggers[1]: unsupported type "cpu"; only "prometheus" is supported`,
		},
		{
			name: "bad metadata stops before any query",
			triggers: func(s string) []v1alpha1.ScaleTrigger {
				return []v1alpha1.ScaleTrigger{promTrigger(s, "low", "1"), promTrigger(s, "low", "many")}
			},
			want:    Verdict{Reason: ReasonInvalidMetadata},
			wantErr: `triggers[1]: metadata.threshold: "many" is not a number`,
		},
		{
			name: "too many triggers stops before any query",
			triggers: func(s string) []v1alpha1.ScaleTrigger {
				list := make([]v1alpha1.ScaleTrigger, v1alpha1.MaxTriggers+1)
				for i := range list {
					list[i] = promTrigger(s, "low", "1")
				}
				return list
			},
			want:    Verdict{Reason: ReasonInvalidMetadata},
			wantErr: "11 triggers, more than the 10 allowed",
		},
		{
			name: "a 1 MiB query stops before any query",
			triggers: func(s string) []v1alpha1.ScaleTrigger {
				return []v1alpha1.ScaleTrigger{promTrigger(s, "low", "1"), promTrigger(s, strings.Repeat("x", 1<<20), "1")}
			},
			want:    Verdict{Reason: ReasonInvalidMetadata},
			wantErr: "bytes of JSON, more than the 32768 allowed", // the length depends on the server port
		},
		{
			name: "a query over 16 KiB stops before any query",
			triggers: func(s string) []v1alpha1.ScaleTrigger {
				return []v1alpha1.ScaleTrigger{promTrigger(s, strings.Repeat("x", v1alpha1.MaxTriggerQueryBytes+1), "1")}
			},
			want:    Verdict{Reason: ReasonInvalidMetadata},
			wantErr: "triggers[0]: metadata.query is 16385 bytes, more than the 16384 allowed",
		},
		{
			name: "missing metadata",
			triggers: func(string) []v1alpha1.ScaleTrigger {
				return []v1alpha1.ScaleTrigger{{Type: v1alpha1.TriggerTypePrometheus}}
			},
			want:    Verdict{Reason: ReasonInvalidMetadata},
			wantErr: "triggers[0]: metadata is missing",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeProm(t, promAnswers(tt.up, values))
			got, err := Evaluate(t.Context(), testClient(), tt.triggers(f.URL), cooldown, Defaults{})
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Evaluate: %v", err)
				}
				if got != tt.want {
					t.Errorf("Evaluate = %+v, want %+v", got, tt.want)
				}
			} else {
				if err == nil {
					t.Fatalf("Evaluate = %+v, want error containing %q", got, tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("error %q does not contain %q", err, tt.wantErr)
				}
				if got.Idle || got.Reason != tt.want.Reason || got.Reason != ReasonOf(err) || got.Detail != err.Error() {
					t.Errorf("Evaluate = %+v with error %v; want not idle, reason %s, the error as detail", got, err, tt.want.Reason)
				}
			}
			if q := f.queries(); !reflect.DeepEqual(q, tt.queries) {
				t.Errorf("queries run:\n got %q\nwant %q", q, tt.queries)
			}
		})
	}
}

func TestEvaluateServers(t *testing.T) {
	t.Run("one health check per distinct server", func(t *testing.T) {
		a := newFakeProm(t, promAnswers(`"1"`, map[string]string{"qa": `"0"`}))
		b := newFakeProm(t, promAnswers(`"1"`, map[string]string{"qb": `"0"`}))
		v, err := Evaluate(t.Context(), testClient(), []v1alpha1.ScaleTrigger{
			promTrigger(a.URL, "qa", "1"), promTrigger(b.URL, "qb", "1"), promTrigger(a.URL, "qa", "1"),
		}, cooldown, Defaults{})
		if err != nil || !v.Idle {
			t.Fatalf("Evaluate = %+v, %v; want idle", v, err)
		}
		if q := a.queries(); !reflect.DeepEqual(q, []string{defaultHealthQuery, "qa", "qa"}) {
			t.Errorf("server a ran %q", q)
		}
		if q := b.queries(); !reflect.DeepEqual(q, []string{defaultHealthQuery, "qb"}) {
			t.Errorf("server b ran %q", q)
		}
	})

	t.Run("second server down", func(t *testing.T) {
		a := newFakeProm(t, promAnswers(`"1"`, map[string]string{"qa": `"0"`}))
		b := newFakeProm(t, promAnswers(`"0"`, map[string]string{"qb": `"0"`}))
		v, err := Evaluate(t.Context(), testClient(), []v1alpha1.ScaleTrigger{
			promTrigger(a.URL, "qa", "1"), promTrigger(b.URL, "qb", "1"),
		}, cooldown, Defaults{})
		if v.Idle || ReasonOf(err) != ReasonPrometheusDown || v.Reason != ReasonPrometheusDown {
			t.Fatalf("Evaluate = %+v, %v; want not idle with PrometheusDown", v, err)
		}
		if !strings.Contains(err.Error(), "triggers[1]: prometheus at "+b.URL) {
			t.Errorf("error %q does not name the second server", err)
		}
		if len(a.queries()) != 1 || len(b.queries()) != 1 {
			t.Errorf("trigger queries ran although a Prometheus is down: a=%q b=%q", a.queries(), b.queries())
		}
	})

	t.Run("unreachable", func(t *testing.T) {
		v, err := Evaluate(t.Context(), testClient(), []v1alpha1.ScaleTrigger{promTrigger(closedServerURL(t), "q", "1")}, cooldown, Defaults{})
		if v.Idle || ReasonOf(err) != ReasonUnreachable || v.Reason != ReasonUnreachable {
			t.Fatalf("Evaluate = %+v, %v; want not idle with Unreachable", v, err)
		}
		if !strings.Contains(err.Error(), "triggers[0]: health check: prometheus at ") {
			t.Errorf("error %q does not say the health check failed", err)
		}
	})

	t.Run("timeout", func(t *testing.T) {
		s := newFakeProm(t, func(q string) (int, string) {
			time.Sleep(200 * time.Millisecond)
			return promAnswers(`"1"`, nil)(q)
		})
		start := time.Now()
		v, err := Evaluate(t.Context(), &Client{Timeout: 20 * time.Millisecond}, []v1alpha1.ScaleTrigger{promTrigger(s.URL, "q", "1")}, cooldown, Defaults{})
		if v.Idle || ReasonOf(err) != ReasonTimeout {
			t.Fatalf("Evaluate = %+v, %v; want not idle with Timeout", v, err)
		}
		if elapsed := time.Since(start); elapsed > time.Second {
			t.Errorf("Evaluate took %v", elapsed)
		}
	})
}

func TestEvaluateDefaults(t *testing.T) {
	f := newFakeProm(t, promAnswers(`"1"`, map[string]string{"q": `"0"`}))
	// The operator allows these two on its default server.
	allowed, err := ParseTenantHeaders(" authorization ,X-SCOPE-ORGID")
	if err != nil {
		t.Fatal(err)
	}
	d := Defaults{ServerAddress: f.URL, AuthorizationHeader: "Bearer operator", UptimeFilter: `app="prometheus"`, TenantHeaders: allowed}

	v, err := Evaluate(t.Context(), nil, []v1alpha1.ScaleTrigger{
		trigger(`{"query":"q","threshold":"1"}`),
		trigger(`{"query":"q","threshold":"1","headers":{"authorization":"Bearer mine","X-Scope-OrgID":"a"}}`),
	}, 90*time.Second, d)
	if err != nil || !v.Idle {
		t.Fatalf("Evaluate = %+v, %v; want idle", v, err)
	}
	// Each trigger's Prometheus is checked with that trigger's headers: a
	// tenant header can change what "up" is.
	reqs := f.seen()
	if len(reqs) != 4 {
		t.Fatalf("got %d requests, want 4: a health check and a query for each trigger", len(reqs))
	}
	health := `min_over_time((max(up{app="prometheus"}) or vector(0))[90s:])`
	for i, want := range []struct{ query, auth, tenant string }{
		{health, "Bearer operator", ""},
		{health, "Bearer mine", "a"},
		{"q", "Bearer operator", ""},
		{"q", "Bearer mine", "a"},
	} {
		if reqs[i].Query != want.query || reqs[i].Header.Get("Authorization") != want.auth || reqs[i].Header.Get("X-Scope-OrgID") != want.tenant {
			t.Errorf("request %d: %s with Authorization %q and X-Scope-OrgID %q; want %s with %q and %q", i,
				reqs[i].Query, reqs[i].Header.Get("Authorization"), reqs[i].Header.Get("X-Scope-OrgID"), want.query, want.auth, want.tenant)
		}
	}
}
