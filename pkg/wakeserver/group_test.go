package wakeserver

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/directory"
	"github.com/elasti-dev/elasti/pkg/nsbudget"
	"github.com/elasti-dev/elasti/pkg/scaletarget"
	"github.com/elasti-dev/elasti/pkg/scaletarget/scaletargettest"
)

// groupScaler holds several workloads by name; a scale makes none of them
// Ready, which the test does by hand.
type groupScaler struct {
	mu     sync.Mutex
	states map[string]scaletarget.State
	scaled []string
}

func (g *groupScaler) Get(ref scaletarget.Ref) (scaletarget.State, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.states[ref.Name], nil
}

// HPA finds no HorizontalPodAutoscaler: the groups here name none.
func (g *groupScaler) HPA(namespace, name string) (*autoscalingv2.HorizontalPodAutoscaler, error) {
	return (*scaletargettest.Scaler)(nil).HPA(namespace, name)
}

func (g *groupScaler) Scale(_ context.Context, ref scaletarget.Ref, n int32) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	st := g.states[ref.Name]
	st.Replicas = n
	st.Generation++
	g.states[ref.Name] = st
	g.scaled = append(g.scaled, ref.Name)
	return nil
}

func (g *groupScaler) ready(name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	st := g.states[name]
	st.ReadyReplicas = st.Replicas
	g.states[name] = st
}

func (g *groupScaler) SetKEDAPaused(context.Context, string, string, bool) error { return nil }

// A request scales only the first dependency that is not Ready, records
// the wake for the controller to carry on, and names what it waits on;
// the target is scaled once every dependency is Ready.
func TestGroupWakeScalesOneDependencyAtATime(t *testing.T) {
	scaler := &groupScaler{states: map[string]scaletarget.State{"db": {}, "worker": {}, "web": {}}}
	es := &elastiv1alpha1.ElastiService{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"},
		Spec: elastiv1alpha1.ElastiServiceSpec{
			Service:        "web",
			ScaleTargetRef: elastiv1alpha1.ScaleTargetRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			WakeWith: []elastiv1alpha1.Dependency{
				{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", Replicas: 2},
				{APIVersion: "apps/v1", Kind: "Deployment", Name: "worker"},
			},
		},
	}
	dir := directory.New(nsbudget.Limits{})
	dir.Claim(types.NamespacedName{Namespace: "shop", Name: "web"}, directory.EntryFor(es))
	wakes := &fakeWakes{}
	cfg := DefaultConfig()
	cfg.SettleWindow = 0 // every request looks afresh
	s := New(context.Background(), dir, scaler, wakes, func() bool { return true }, &outcomes{}, cfg)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	post := func() string {
		t.Helper()
		resp, err := http.Post(srv.URL+Path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", resp.StatusCode, b)
		}
		return string(b)
	}
	steps := []struct {
		before func()
		// scaled is every scale so far; says is in the answer.
		scaled, says string
	}{
		{func() {}, "[db]", `StatefulSet \"db\", has 0/2 replicas ready`},
		{func() {}, "[db]", `0/2`}, // db is scaled, not Ready: nothing more
		{func() { scaler.ready("db") }, "[db worker]", `Deployment \"worker\", has 0/1`},
		{func() { scaler.ready("worker") }, "[db worker web]", "scaled Deployment web to 1 replicas"},
	}
	for i, st := range steps {
		st.before()
		got := post()
		scaler.mu.Lock()
		scaled := "[" + strings.Join(scaler.scaled, " ") + "]"
		scaler.mu.Unlock()
		if scaled != st.scaled || !strings.Contains(got, st.says) {
			t.Errorf("request %d: scaled %s, answer %s; want %s and %q", i+1, scaled, got, st.scaled, st.says)
		}
	}
	if n := wakes.writes.Load(); n != 4 {
		t.Errorf("%d wakes recorded, want one per request that found the target at zero (4)", n)
	}
}
