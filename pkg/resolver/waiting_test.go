package resolver

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/elasti-dev/elasti/pkg/resolver/internal/resolvertest"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
)

// WaitingOn gives the DependenciesReady message of the ElastiService whose
// spec.service the Service is, while its group waits on a dependency.
func TestWaitingOnNamesTheBlockingDependency(t *testing.T) {
	f, idx := clusterview.NewMemoryNamedIndex()
	es := resolvertest.ElastiService("team", "shop", "web", 1)
	if err := idx.Add(es); err != nil {
		t.Fatal(err)
	}
	if got := f.WaitingOn(testSvc); got != "" {
		t.Errorf("without the condition: %q, want nothing", got)
	}
	waiting := es.DeepCopy()
	waiting.Status.Conditions = []metav1.Condition{{Type: v1.ConditionDependenciesReady, Status: metav1.ConditionFalse,
		Reason: v1.ReasonDependencyNotReady, Message: `Waking in order, the target waits: dependency 1 of 1, StatefulSet "db", has 0/1 replicas ready`}}
	if err := idx.Update(waiting); err != nil {
		t.Fatal(err)
	}
	if got := f.WaitingOn(testSvc); got != `ElastiService team/shop: Waking in order, the target waits: dependency 1 of 1, StatefulSet "db", has 0/1 replicas ready` {
		t.Errorf("WaitingOn = %q", got)
	}
	if got := f.WaitingOn(clusterview.ServiceRef{Namespace: "team", Name: "other"}); got != "" {
		t.Errorf("another Service: %q", got)
	}
}

type waitingOn string

func (w waitingOn) WaitingOn(clusterview.ServiceRef) string { return string(w) }

// A hold that times out while a wake group waits on a dependency says so in
// its answer.
func TestTimedOutHoldNamesTheDependencyItWaitedOn(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	cfg := testConfig()
	cfg.RequestTimeout = 300 * time.Millisecond
	const on = `ElastiService team/web: Waking in order, the target waits: dependency 1 of 2, StatefulSet "db", has 0/1 replicas ready`
	e := newEnv(t, cfg, func(o *Options) { o.Waiting = waitingOn(on) })
	resp, err := newClient(t).Do(e.request(t, context.Background(), "GET", "/", nil))
	if err != nil {
		t.Fatal(err)
	}
	body, err := readBody(resp)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusGatewayTimeout || !strings.Contains(body, "timed out") || !strings.Contains(body, on) {
		t.Errorf("got %d %q, want 504 naming the dependency", resp.StatusCode, body)
	}
}
