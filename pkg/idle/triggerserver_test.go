package idle

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/outcome"
	"github.com/elasti-dev/elasti/pkg/scaletarget/scaletargettest"
	"github.com/elasti-dev/elasti/pkg/triggers"
)

// A trigger's server that is refused, redirects or fails leaves the target
// alone; the event gives a fixed reason and never the server's words or the
// operator's credential, and the outcome's reason is bounded.
func TestTriggerServerFailuresAreReportedWithoutItsText(t *testing.T) {
	const secret = "SECRET-MARKER-c41d"
	var requests atomic.Int64
	server := func(t *testing.T, h http.HandlerFunc) string {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			requests.Add(1)
			if r.Header.Get("Authorization") != "" {
				t.Errorf("the trigger's own server got Authorization %q", r.Header.Get("Authorization"))
			}
			h(w, r)
		}))
		t.Cleanup(s.Close)
		return s.URL
	}
	failing := func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"status":"error","errorType":"internal","error":"` + secret + `"}`))
	}
	redirecting := func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://127.0.0.1:1/"+secret, http.StatusFound)
	}
	for _, c := range []struct {
		name      string
		handler   http.HandlerFunc
		allowList bool
		reason    triggers.Reason
		requests  int64
		says      string
	}{
		{"not allowed", failing, true, triggers.ReasonServerNotAllowed, 0, "--prometheus-allowed-servers"},
		{"500", failing, false, triggers.ReasonBadStatus, 1, "HTTP 500 Internal Server Error (internal)"},
		{"redirect", redirecting, false, triggers.ReasonRedirected, 1, "HTTP 302 Found, a redirect"},
	} {
		t.Run(c.name, func(t *testing.T) {
			requests.Store(0)
			addr := server(t, c.handler)
			d := triggers.Defaults{ServerAddress: prometheus(t, "0"), AuthorizationHeader: "Bearer " + secret}
			if c.allowList {
				d.AllowedServers, _ = triggers.ParseServerPrefixes("http://prometheus.monitoring:9090")
			}
			es := elastiService(func(es *elastiv1alpha1.ElastiService) {
				es.Spec.Triggers[0].Metadata = []byte(`{"query":"q","threshold":"1","serverAddress":"` + addr + `"}`)
			})
			scaler := scaletargettest.New(2)
			recorder := record.NewFakeRecorder(10)
			p := New(nil, scaler, fakeRouter{}, wakeLog(nil), recorder, observer{}, noEvaluations{}, Config{QueryTimeout: time.Second, Defaults: d})
			p.clock = clocktesting.NewFakePassiveClock(now)
			got, reason := p.Evaluate(context.Background(), es)
			if got != outcome.IdleTriggerError || reason != c.reason {
				t.Errorf("outcome %q reason %q, want %q %q", got, reason, outcome.IdleTriggerError, c.reason)
			}
			if len(scaler.Scaled()) != 0 {
				t.Errorf("scaled %v on a failing trigger", scaler.Scaled())
			}
			if n := requests.Load(); n != c.requests {
				t.Errorf("the trigger's server got %d requests, want %d", n, c.requests)
			}
			select {
			case ev := <-recorder.Events:
				if !strings.HasPrefix(ev, "Warning "+ReasonTriggerError+" ") || !strings.Contains(ev, c.says) || strings.Contains(ev, secret) {
					t.Errorf("event %q; want a %s warning saying %q, without the secret", ev, ReasonTriggerError, c.says)
				}
			default:
				t.Error("no event")
			}
		})
	}
}
