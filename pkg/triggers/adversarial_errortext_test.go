package triggers

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
	"k8s.io/klog/v2"

	"github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

// manyToMany is Prometheus's answer to a query whose binary operation
// matches another namespace's series: its text carries their label sets.
const manyToMany = `{"status":"error","errorType":"execution","error":"found duplicate series for the match group ` +
	`{namespace=\"payments\"} on the right hand side of the operation: [{__name__=\"http_requests_total\", namespace=\"payments\", ` +
	`pod=\"card-vault-7d9f\", customer=\"acme-bank\"}, {__name__=\"http_requests_total\", namespace=\"payments\", pod=\"card-vault-5c2a\"}];` +
	`many-to-many matching not allowed: matching labels must be unique on one side"}`

// otherNamespaceText is what of manyToMany must not reach an event or a
// condition.
var otherNamespaceText = []string{"payments", "card-vault", "acme-bank", "__name__", "http_requests_total", "namespace="}

// logSink collects what the operator logs, at a verbosity.
type logSink struct {
	mu    sync.Mutex
	lines []string
}

func (l *logSink) context(ctx context.Context, verbosity int) context.Context {
	return klog.NewContext(ctx, funcr.New(func(prefix, args string) {
		l.mu.Lock()
		l.lines = append(l.lines, prefix+" "+args)
		l.mu.Unlock()
	}, funcr.Options{Verbosity: verbosity}))
}

func (l *logSink) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// The default server's error for a query that matched another namespace's
// series (issue 30, item 8) reaches the verdict, and so the events and the
// TriggersEvaluated condition, as its class only: the status, the
// errorType and a fixed description. The full text goes to the operator's
// log at -v=4, and only there.
func TestDefaultServerErrorTextNamesNoOtherNamespace(t *testing.T) {
	for _, status := range []int{http.StatusUnprocessableEntity, http.StatusOK} {
		def := newFakeProm(t, func(q string) (int, string) {
			if strings.HasPrefix(q, "min_over_time") {
				return promAnswers(`"1"`, nil)(q)
			}
			return status, manyToMany
		})
		d := Defaults{ServerAddress: def.URL, AuthorizationHeader: "Bearer operator"}
		var verbose, quiet logSink
		for _, run := range []struct {
			sink      *logSink
			verbosity int
		}{{&verbose, 4}, {&quiet, 3}} {
			v, err := Evaluate(run.sink.context(t.Context(), run.verbosity), testClient(),
				[]v1alpha1.ScaleTrigger{trigger(`{"query":"sum(rate(x[1m])) / on(namespace) rate(y[1m])","threshold":"1"}`)}, cooldown, d)
			if v.Idle || err == nil {
				t.Fatalf("HTTP %d: Evaluate = %+v, %v; want a failure", status, v, err)
			}
			for _, text := range []string{v.Detail, err.Error()} {
				for _, leak := range otherNamespaceText {
					if strings.Contains(text, leak) {
						t.Errorf("HTTP %d: %q repeats %q from the server's text", status, text, leak)
					}
				}
				if !strings.Contains(text, "(execution): many-to-many matching") || len(text) > 512 {
					t.Errorf("HTTP %d: %q does not give the error's class in a short message", status, text)
				}
			}
			if status != http.StatusOK && !strings.Contains(err.Error(), "HTTP 422 Unprocessable Entity") {
				t.Errorf("error %q lacks the status", err)
			}
		}
		if !strings.Contains(verbose.text(), "card-vault-7d9f") {
			t.Errorf("HTTP %d: at -v=4 the operator's log lacks the server's text:\n%s", status, verbose.text())
		}
		if strings.Contains(quiet.text(), "card-vault") {
			t.Errorf("HTTP %d: below -v=4 the log has the server's text:\n%s", status, quiet.text())
		}
	}
}

// Every class of Prometheus error is told by a fixed phrase, whatever
// labels or values its text carries; an unknown one by nothing but its
// status and errorType.
func TestErrorClassesAreFixedText(t *testing.T) {
	for _, c := range errorClasses {
		text := `{foo="` + marker + `"} ` + strings.ToUpper(c.phrase) + ` near "` + marker + `"`
		if got := errorClass(text); got != c.class {
			t.Errorf("errorClass(%q) = %q, want %q", text, got, c.class)
		}
		if strings.ContainsAny(c.class, `{}"=`) {
			t.Errorf("class %q looks like a label set", c.class)
		}
	}
	r := apiResponse{ErrorType: "execution", Error: `unexpected {namespace="` + marker + `"}`}
	if got := r.errorText(); strings.Contains(got, marker) || !strings.HasPrefix(got, " (execution); ") {
		t.Errorf("errorText of an unknown error = %q", got)
	}
}
