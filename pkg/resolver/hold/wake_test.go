package hold

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
	"github.com/elasti-dev/elasti/pkg/wakeapi"
	"github.com/elasti-dev/elasti/pkg/waketoken"
)

// tokenOperator stands in for an operator's wake endpoint that requires
// want as its token when want is set, and records what it was sent.
type tokenOperator struct {
	srv *httptest.Server

	mu   sync.Mutex
	want string
	got  []string // Authorization headers, "" when absent
}

func newTokenOperator(t *testing.T, want string) *tokenOperator {
	o := &tokenOperator{want: want}
	o.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		o.got = append(o.got, r.Header.Get("Authorization"))
		want := o.want
		o.mu.Unlock()
		if tok, _ := wakeapi.Bearer(r.Header); want != "" && tok != want {
			w.Header().Set("WWW-Authenticate", wakeapi.Challenge(r.Header))
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte(`{"outcome":"scaled"}`))
	}))
	t.Cleanup(o.srv.Close)
	return o
}

func (o *tokenOperator) last() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.got[len(o.got)-1]
}

func writeTokenFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil { // replaced, as a Secret volume does
		t.Fatal(err)
	}
}

// newTestWakeClient returns a client of the operator at url with the
// resolver tests' timeouts.
func newTestWakeClient(t *testing.T, url string, token TokenSource) (*WakeClient, Metrics) {
	t.Helper()
	metrics := NewMetrics()
	cfg := Config{OperatorURL: url, OperatorTimeout: 2 * time.Second, DialTimeout: time.Second}
	return NewWakeClient(cfg, nil, token, metrics), metrics
}

// Without a token the POST is KubeElasti's, with no Authorization header.
func TestWakeSendsNoTokenUnlessConfigured(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	op := newTokenOperator(t, "")
	n, _ := newTestWakeClient(t, op.srv.URL, nil)
	if outcome := n.Wake(ctx, klog.FromContext(ctx), testSvc); outcome != OutcomeSuccess {
		t.Fatalf("outcome %q, want %q", outcome, OutcomeSuccess)
	}
	if got := op.last(); got != "" {
		t.Errorf("Authorization %q sent without a token configured", got)
	}
}

// With a token file the POST carries its first token, the operator's 401
// is told apart from other refusals, and a rotated file is sent from the
// next POST on.
func TestWakeSendsTheTokenAndFollowsRotation(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	logger := klog.FromContext(ctx)
	path := filepath.Join(t.TempDir(), "token")
	writeTokenFile(t, path, "token-one\n")
	tokens, err := waketoken.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	op := newTokenOperator(t, "token-one")
	n, metrics := newTestWakeClient(t, op.srv.URL, tokens)

	if outcome := n.Wake(ctx, logger, testSvc); outcome != OutcomeSuccess || op.last() != "Bearer token-one" {
		t.Fatalf("outcome %q with Authorization %q; want success with Bearer token-one", outcome, op.last())
	}

	// The operator moved on before this resolver did: refused, and counted
	// as such rather than as any other rejection.
	op.mu.Lock()
	op.want = "token-two"
	op.mu.Unlock()
	if outcome := n.Wake(ctx, logger, testSvc); outcome != OutcomeUnauthorized {
		t.Fatalf("wrong token: outcome %q, want %q", outcome, OutcomeUnauthorized)
	}
	if got := testutil.ToFloat64(metrics.WakeRequests.WithLabelValues(OutcomeUnauthorized)); got != 1 {
		t.Errorf("unauthorized wake requests = %v, want 1", got)
	}
	if got := testutil.ToFloat64(metrics.WakeRequests.WithLabelValues(OutcomeRejected)); got != 0 {
		t.Errorf("a 401 was counted as rejected too (%v)", got)
	}

	writeTokenFile(t, path, "token-two\ntoken-one\n")
	if outcome := n.Wake(ctx, logger, testSvc); outcome != OutcomeSuccess || op.last() != "Bearer token-two" {
		t.Errorf("after rotation: outcome %q with Authorization %q; want success with Bearer token-two", outcome, op.last())
	}
}

// An unreachable operator is logged at the default verbosity, so a held
// request's wait is explained without -v, but at most once per
// failureLogEvery: every held Service's wake loop keeps retrying.
func TestWakeFailureLoggedOncePerInterval(t *testing.T) {
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true), ktesting.Verbosity(0)))
	ctx := klog.NewContext(context.Background(), logger)
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close() // refused from now on
	n, _ := newTestWakeClient(t, down.URL, nil)
	for range 3 {
		if outcome := n.Wake(ctx, logger, testSvc); outcome != OutcomeUnreachable {
			t.Fatalf("outcome %q, want %q", outcome, OutcomeUnreachable)
		}
	}
	logs := logger.GetSink().(ktesting.Underlier).GetBuffer().String()
	if got := strings.Count(logs, "Wake request to the operator failed"); got != 1 {
		t.Errorf("3 failures within %s logged %d times at -v=0, want once:\n%s", failureLogEvery, got, logs)
	}
}

var testSvc = clusterview.ServiceRef{Namespace: "team", Name: "web"}
