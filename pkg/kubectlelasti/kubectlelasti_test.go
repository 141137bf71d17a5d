package kubectlelasti

import (
	"k8s.io/utils/ptr"

	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	elastifake "github.com/elasti-dev/elasti/pkg/generated/clientset/versioned/fake"
)

var now = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC) // a Wednesday

func at(ago time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(-ago)} }

func dur(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

func durations(ds ...time.Duration) []metav1.Duration {
	out := make([]metav1.Duration, len(ds))
	for i, d := range ds {
		out[i] = metav1.Duration{Duration: d}
	}
	return out
}

func readyCondition(status metav1.ConditionStatus, reason string) metav1.Condition {
	return metav1.Condition{Type: elastiv1alpha1.ConditionReady, Status: status, Reason: reason, Message: "m", LastTransitionTime: *at(time.Hour)}
}

func elastiService(ns, name string, mutate func(*elastiv1alpha1.ElastiService)) *elastiv1alpha1.ElastiService {
	es := &elastiv1alpha1.ElastiService{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: *at(24 * time.Hour)},
		Spec: elastiv1alpha1.ElastiServiceSpec{
			Service:           name,
			ScaleTargetRef:    elastiv1alpha1.ScaleTargetRef{APIVersion: "apps/v1", Kind: "Deployment", Name: name},
			MinTargetReplicas: 2,
			CooldownPeriod:    900,
			Triggers:          []elastiv1alpha1.ScaleTrigger{{Type: "prometheus", Metadata: []byte(`{"query":"sum(rate(x[1m]))","threshold":"0.5","headers":{"Authorization":"secret"}}`)}},
		},
		Status: elastiv1alpha1.ElastiServiceStatus{
			Mode: elastiv1alpha1.ModeServe, TargetReplicas: ptr.To[int32](2),
			Conditions: []metav1.Condition{readyCondition(metav1.ConditionTrue, "Reconciled")},
		},
	}
	if mutate != nil {
		mutate(es)
	}
	return es
}

// fixture is an App on fake clients in namespace "shop", with Deployment
// targets whose scale subresources it keeps in replicas.
type fixture struct {
	app      *App
	out, err bytes.Buffer
	elasti   *elastifake.Clientset
	kube     *kubefake.Clientset
	replicas map[string]int32
	ns       string
	flags    *genericclioptions.ConfigFlags
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	f := &fixture{elasti: elastifake.NewSimpleClientset(objs...), kube: kubefake.NewSimpleClientset(), replicas: map[string]int32{}}
	f.kube.PrependReactor("get", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
		g := a.(k8stesting.GetAction)
		r, ok := f.replicas[g.GetName()]
		if a.GetSubresource() != "scale" {
			return false, nil, nil
		}
		if !ok {
			return true, nil, apierrors.NewNotFound(autoscalingv1.Resource("deployments"), g.GetName())
		}
		return true, &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: r}}, nil
	})
	f.kube.PrependReactor("patch", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.PatchAction)
		var body struct {
			Spec struct{ Replicas int32 } `json:"spec"`
		}
		if err := json.Unmarshal(p.GetPatch(), &body); err != nil {
			t.Fatal(err)
		}
		f.replicas[p.GetName()] = body.Spec.Replicas
		// The typed client decodes a scale patch's answer as the workload.
		return true, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: p.GetName(), Namespace: p.GetNamespace()}}, nil
	})
	f.app = &App{Out: &f.out, Err: &f.err, Now: func() time.Time { return now }}
	f.app.Connect = func(c *genericclioptions.ConfigFlags) (*Clients, error) {
		f.flags = c
		ns := *c.Namespace
		if ns == "" {
			ns = "shop"
		}
		f.ns = ns
		return &Clients{Elasti: f.elasti, Kube: f.kube, Namespace: ns, ServerNow: func() time.Time { return now }}, nil
	}
	return f
}

func (f *fixture) run(args ...string) int {
	f.out.Reset()
	f.err.Reset()
	return f.app.Run(context.Background(), args)
}

// writes lists the fake clients' writes as "verb resource[/sub] name body".
func (f *fixture) writes() []string {
	var out []string
	for _, a := range append(f.elasti.Actions(), f.kube.Actions()...) {
		if p, ok := a.(k8stesting.PatchAction); ok {
			res := p.GetResource().Resource
			if p.GetSubresource() != "" {
				res += "/" + p.GetSubresource()
			}
			out = append(out, fmt.Sprintf("patch %s %s %s", res, p.GetName(), p.GetPatch()))
		}
	}
	return out
}

func TestTimeAsleep(t *testing.T) {
	for _, c := range []struct {
		name string
		st   elastiv1alpha1.ElastiServiceStatus
		want time.Duration
		ok   bool
	}{
		{"never slept", elastiv1alpha1.ElastiServiceStatus{Mode: "serve", TargetReplicas: ptr.To[int32](2)}, 0, false},
		{"ended sleeps only while awake", elastiv1alpha1.ElastiServiceStatus{Mode: "serve", TargetReplicas: ptr.To[int32](2),
			TimeAsleep: dur(time.Hour), LastScaledDownTime: at(3 * time.Hour)}, time.Hour, true},
		{"asleep now adds the current sleep", elastiv1alpha1.ElastiServiceStatus{Mode: "proxy", TargetReplicas: ptr.To[int32](0),
			TimeAsleep: dur(time.Hour), LastScaledDownTime: at(30 * time.Minute)}, 90 * time.Minute, true},
		{"first sleep, still asleep", elastiv1alpha1.ElastiServiceStatus{Mode: "proxy", LastScaledDownTime: at(time.Minute)}, time.Minute, true},
		{"waking: proxy with replicas is not asleep", elastiv1alpha1.ElastiServiceStatus{Mode: "proxy", TargetReplicas: ptr.To[int32](1),
			TimeAsleep: dur(time.Hour), LastScaledDownTime: at(30 * time.Minute)}, time.Hour, true},
	} {
		if got, ok := TimeAsleep(c.st, now); got != c.want || ok != c.ok {
			t.Errorf("%s: %v, %v; want %v, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

func statusFixture(t *testing.T) *fixture {
	return newFixture(t,
		elastiService("shop", "web", func(es *elastiv1alpha1.ElastiService) {
			es.Status.LastScaledUpTime = at(5 * time.Minute)
			es.Status.LastColdStart = dur(1200 * time.Millisecond)
			es.Status.RecentColdStarts = durations(2*time.Second, 800*time.Millisecond, 1200*time.Millisecond)
			es.Status.LastHeld = dur(603 * time.Millisecond) // the resolver's check passed before the kubelet's
			es.Status.Wakes = 3
			es.Status.TimeAsleep = dur(2 * time.Hour)
		}),
		elastiService("shop", "api", func(es *elastiv1alpha1.ElastiService) {
			es.Status.Mode, es.Status.TargetReplicas = elastiv1alpha1.ModeProxy, ptr.To[int32](0)
			es.Status.LastScaledDownTime = at(3 * time.Hour)
		}),
		elastiService("shop", "new", func(es *elastiv1alpha1.ElastiService) { es.Status = elastiv1alpha1.ElastiServiceStatus{} }),
		elastiService("other", "db", nil),
	)
}

func TestStatusTable(t *testing.T) {
	f := statusFixture(t)
	if code := f.run("status"); code != ExitOK {
		t.Fatalf("exit %d: %s", code, f.err.String())
	}
	want := `NAME   MODE    REPLICAS   LAST WAKE   READY AFTER P50   LAST HELD   TIME ASLEEP   WAKING
api    proxy   0          -           -                 -           3h            -
new    -       -          -           -                 -           -             -
web    serve   2          5m          1.2s              603ms       120m          -
`
	if f.out.String() != want {
		t.Errorf("status:\n%s\nwant:\n%s", f.out.String(), want)
	}

	if code := f.run("status", "-A", "-owide"); code != ExitOK {
		t.Fatalf("exit %d: %s", code, f.err.String())
	}
	lines := strings.Split(strings.TrimSpace(f.out.String()), "\n")
	if got := strings.Fields(lines[0]); !slices.Equal(got, strings.Fields("NAMESPACE NAME MODE REPLICAS LAST WAKE READY AFTER P50 LAST HELD TIME ASLEEP WAKING WAKES LAST READY AFTER READY SERVICE TARGET")) {
		t.Errorf("wide header %q", lines[0])
	}
	if len(lines) != 5 || !strings.HasPrefix(lines[1], "other ") || !slices.Equal(strings.Fields(lines[4]),
		strings.Fields("shop web serve 2 5m 1.2s 603ms 120m - 3 1.2s True web Deployment/web")) {
		t.Errorf("wide rows:\n%s", f.out.String())
	}
}

func TestStatusJSONAndYAML(t *testing.T) {
	f := statusFixture(t)
	if code := f.run("status", "web", "api", "--output", "json"); code != ExitOK {
		t.Fatalf("exit %d: %s", code, f.err.String())
	}
	var list SummaryList
	if err := json.Unmarshal(f.out.Bytes(), &list); err != nil {
		t.Fatalf("%v\n%s", err, f.out.String())
	}
	if len(list.Items) != 2 || list.Items[0].Name != "web" || list.Items[1].Name != "api" {
		t.Fatalf("items %+v", list.Items)
	}
	// A typed List, as kubectl prints one, of typed items.
	if list.APIVersion != "v1" || list.Kind != "List" {
		t.Errorf("list apiVersion %q kind %q, want v1 List", list.APIVersion, list.Kind)
	}
	for _, it := range list.Items {
		if it.APIVersion != "elasti.truefoundry.com/v1alpha1" || it.Kind != "ElastiServiceSummary" {
			t.Errorf("item %s: apiVersion %q kind %q", it.Name, it.APIVersion, it.Kind)
		}
	}
	web, api := list.Items[0], list.Items[1]
	if web.ColdStartP50.Duration != 1200*time.Millisecond || web.LastHeld.Duration != 603*time.Millisecond || web.Wakes != 3 || web.Asleep ||
		web.TimeAsleep.Duration != 2*time.Hour {
		t.Errorf("web %+v", web)
	}
	if !api.Asleep || api.TimeAsleep.Duration != 3*time.Hour || api.ColdStartP50 != nil {
		t.Errorf("api %+v", api)
	}
	if code := f.run("status", "web", "-o", "yaml"); code != ExitOK || !strings.Contains(f.out.String(), "coldStartP50: 1.2s") ||
		!strings.HasPrefix(f.out.String(), "apiVersion: v1\nitems:\n- apiVersion: elasti.truefoundry.com/v1alpha1\n") || !strings.Contains(f.out.String(), "\nkind: List\n") {
		t.Errorf("yaml (exit %d):\n%s", code, f.out.String())
	}
}

func TestStatusEmptyAndMissing(t *testing.T) {
	f := statusFixture(t)
	if code := f.run("status", "-n", "empty"); code != ExitOK || f.out.Len() != 0 || f.err.String() != "No resources found in empty namespace.\n" {
		t.Errorf("exit %d, out %q, err %q", code, f.out.String(), f.err.String())
	}
	if code := f.run("status", "-A", "web", "db"); code != ExitOK || !hasRows(f.out.String(), "shop web", "other db") {
		t.Errorf("-A by name: exit %d\n%s", code, f.out.String())
	}
	if code := f.run("status", "-A", "nope"); code != ExitError || f.err.String() != "error: elastiservice \"nope\" not found in any namespace\n" {
		t.Errorf("exit %d, err %q", code, f.err.String())
	}
	if code := f.run("status", "nope"); code != ExitError || f.err.String() != "error: elastiservice \"nope\" not found in namespace \"shop\"\n" {
		t.Errorf("exit %d, err %q", code, f.err.String())
	}
}

func TestFlags(t *testing.T) {
	f := statusFixture(t)
	f.replicas["web"] = 2
	// Flags after the name, joined short forms, connection flags.
	if code := f.run("explain", "web", "-nshop", "--context", "prod", "--kubeconfig=/k"); code != ExitOK {
		t.Fatalf("exit %d: %s", code, f.err.String())
	}
	if *f.flags.Namespace != "shop" || *f.flags.Context != "prod" || *f.flags.KubeConfig != "/k" {
		t.Errorf("connection flags -n %q --context %q --kubeconfig %q", *f.flags.Namespace, *f.flags.Context, *f.flags.KubeConfig)
	}
	for _, c := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"status", "-o", "xml"}, ExitUsage, `error: unknown output format "xml": use json, yaml or wide`},
		{[]string{"wake"}, ExitUsage, "error: NAME is required"},
		{[]string{"wake", "a", "b"}, ExitUsage, "error: one NAME expected, got 2: a b"},
		{[]string{"sleep", "--wait=maybe", "web"}, ExitUsage, `error: invalid argument "maybe" for "--wait" flag`},
		{[]string{"nap"}, ExitUsage, `error: unknown command "nap"`},
		{[]string{"status", "--", "-n"}, ExitError, `error: elastiservice "-n" not found`},
	} {
		if code := f.run(c.args...); code != c.code || !strings.HasPrefix(f.err.String(), c.err) {
			t.Errorf("%q: exit %d, stderr %q; want %d, %q", c.args, code, f.err.String(), c.code, c.err)
		}
	}
	// --help per command, on stdout, exit 0.
	for _, cmd := range []string{"status", "wake", "sleep", "explain"} {
		if code := f.run(cmd, "--help"); code != ExitOK || !strings.Contains(f.out.String(), "kubectl elasti "+cmd) || !strings.Contains(f.out.String(), "-n, --namespace string") {
			t.Errorf("%s --help: exit %d\n%s", cmd, code, f.out.String())
		}
	}
}

func TestForbiddenNamesTheVerbAndResource(t *testing.T) {
	f := statusFixture(t)
	f.elasti.PrependReactor("*", "elastiservices", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(elastiv1alpha1.Resource("elastiservices"), "", fmt.Errorf("User %q cannot %s resource", "viewer", a.GetVerb()))
	})
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"status"}, `error: forbidden: you may not list elastiservices in namespace "shop"`},
		{[]string{"status", "-A"}, `error: forbidden: you may not list elastiservices in any namespace`},
		{[]string{"wake", "web"}, `error: forbidden: you may not get elastiservices in namespace "shop"`},
	} {
		if code := f.run(c.args...); code != ExitError || !strings.HasPrefix(f.err.String(), c.want) {
			t.Errorf("%q: exit %d, %q; want %q", c.args, code, f.err.String(), c.want)
		}
	}
}

func TestWakeScalesUpAndWithdrawsAPendingSleep(t *testing.T) {
	f := newFixture(t, elastiService("shop", "web", func(es *elastiv1alpha1.ElastiService) {
		es.Status.Mode, es.Status.TargetReplicas = elastiv1alpha1.ModeProxy, ptr.To[int32](0)
		es.Status.LastScaledUpTime = at(time.Hour)
		es.Annotations = map[string]string{elastiv1alpha1.AnnotationSleepRequestedAt: now.Add(-time.Minute).Format(time.RFC3339)}
	}))
	f.replicas["web"] = 0
	if code := f.run("wake", "web", "--wait=false"); code != ExitOK {
		t.Fatalf("exit %d: %s", code, f.err.String())
	}
	want := []string{
		`patch elastiservices web {"metadata":{"annotations":{"elasti.truefoundry.com/sleep-requested-at":null}}}`,
		`patch deployments/scale web {"spec":{"replicas":2}}`,
	}
	if got := f.writes(); !slices.Equal(got, want) {
		t.Errorf("writes %q, want %q", got, want)
	}
	if !strings.Contains(f.out.String(), "scaled Deployment/web from 0 to 2 replicas") {
		t.Errorf("out %q", f.out.String())
	}

	// Up already: no scale write, and a stale request stays.
	f = newFixture(t, elastiService("shop", "web", func(es *elastiv1alpha1.ElastiService) {
		es.Status.LastScaledUpTime = at(time.Minute)
		es.Annotations = map[string]string{elastiv1alpha1.AnnotationSleepRequestedAt: now.Add(-time.Hour).Format(time.RFC3339)}
	}))
	f.replicas["web"] = 3
	if code := f.run("wake", "web"); code != ExitOK || len(f.writes()) != 0 || !strings.Contains(f.out.String(), "is awake") {
		t.Errorf("exit %d, writes %q, out %q", code, f.writes(), f.out.String())
	}
}

// --wait follows the status until the operator serves, printing each new
// state once.
func TestWakeWaitsForServe(t *testing.T) {
	f := newFixture(t, elastiService("shop", "web", func(es *elastiv1alpha1.ElastiService) {
		es.Status.Mode, es.Status.TargetReplicas = elastiv1alpha1.ModeProxy, ptr.To[int32](0)
	}))
	f.replicas["web"] = 0
	// The watch reports the operator's status writes: one that changes
	// nothing shown, then serve. No read but the watch's sees them.
	w := watch.NewFakeWithChanSize(2, false)
	w.Modify(elastiService("shop", "web", func(es *elastiv1alpha1.ElastiService) { es.Status.Mode = elastiv1alpha1.ModeProxy }))
	w.Modify(elastiService("shop", "web", nil))
	f.elasti.PrependWatchReactor("elastiservices", func(k8stesting.Action) (bool, watch.Interface, error) { return true, w, nil })
	if code := f.run("wake", "web", "--timeout=1m"); code != ExitOK {
		t.Fatalf("exit %d: %s", code, f.err.String())
	}
	want := "elastiservice/web: scaled Deployment/web from 0 to 2 replicas\n" +
		"  0s: mode proxy, Deployment/web at 2 replicas\n" +
		"  0s: mode serve, Deployment/web at 2 replicas\n" +
		"elastiservice/web is awake: serving from Deployment/web after 0s\n"
	if f.out.String() != want {
		t.Errorf("out:\n%s\nwant:\n%s", f.out.String(), want)
	}

	// Never serving: a timeout, non-zero, pointing at explain.
	f = newFixture(t, elastiService("shop", "web", func(es *elastiv1alpha1.ElastiService) {
		es.Status.Mode, es.Status.TargetReplicas = elastiv1alpha1.ModeProxy, ptr.To[int32](0)
	}))
	f.replicas["web"] = 0
	if code := f.run("wake", "web", "--timeout=20ms"); code != ExitError || !strings.Contains(f.err.String(), "timed out after 20ms waiting for elastiservice \"web\" to serve") ||
		!strings.Contains(f.err.String(), "kubectl elasti explain web -n shop") {
		t.Errorf("exit %d, err %q", code, f.err.String())
	}
}

// sleep writes only the request: the operator scales, resolver first.
func TestSleepOnlyRequests(t *testing.T) {
	f := newFixture(t, elastiService("shop", "web", nil))
	f.replicas["web"] = 2
	if code := f.run("sleep", "web", "--wait=false"); code != ExitOK {
		t.Fatalf("exit %d: %s", code, f.err.String())
	}
	want := []string{`patch elastiservices web {"metadata":{"annotations":{"elasti.truefoundry.com/sleep-requested-at":"2026-11-25T12:00:01Z"}}}`}
	if got := f.writes(); !slices.Equal(got, want) {
		t.Errorf("writes %q, want %q", got, want)
	}

	// Outside the enabled period (weekends only; now is a Wednesday): refused.
	f = newFixture(t, elastiService("shop", "web", func(es *elastiv1alpha1.ElastiService) {
		es.Spec.EnabledPeriod = &elastiv1alpha1.EnabledPeriod{Schedule: "0 0 * * 6", Duration: "48h"}
	}))
	f.replicas["web"] = 2
	if code := f.run("sleep", "web"); code != ExitError || len(f.writes()) != 0 || !strings.Contains(f.err.String(), "outside its enabled period") {
		t.Errorf("exit %d, writes %q, err %q", code, f.writes(), f.err.String())
	}

	// Asleep already: nothing to do.
	f = newFixture(t, elastiService("shop", "web", func(es *elastiv1alpha1.ElastiService) { es.Status.Mode = elastiv1alpha1.ModeProxy }))
	f.replicas["web"] = 0
	if code := f.run("sleep", "web"); code != ExitOK || len(f.writes()) != 0 || !strings.Contains(f.out.String(), "asleep already") {
		t.Errorf("exit %d, writes %q, out %q", code, f.writes(), f.out.String())
	}

	// A missing target is named.
	f = newFixture(t, elastiService("shop", "web", nil))
	if code := f.run("sleep", "web"); code != ExitError || f.err.String() != "error: deployment \"web\" not found in namespace \"shop\"\n" {
		t.Errorf("exit %d, err %q", code, f.err.String())
	}
}

func TestExplain(t *testing.T) {
	for _, c := range []struct {
		name     string
		es       *elastiv1alpha1.ElastiService
		replicas int32
		want     []string
	}{
		{"cooldown after a wake", elastiService("shop", "web", func(es *elastiv1alpha1.ElastiService) {
			es.Status.LastScaledUpTime = at(5 * time.Minute)
		}), 2, []string{"State:       awake", "Why it is not sleeping:", "cooldown: last woken 5m ago, so 10m0s of the 15m0s cooldown remain"}},
		{"cooldown after a slow wake's first Ready pod", elastiService("shop", "web", func(es *elastiv1alpha1.ElastiService) {
			es.Status.LastScaledUpTime, es.Status.LastColdStart = at(20*time.Minute), &metav1.Duration{Duration: 10 * time.Minute}
		}), 2, []string{"cooldown: the last wake's first pod Ready 10m ago, so 5m0s of the 15m0s cooldown remain"}},
		{"a wake under way", elastiService("shop", "web", func(es *elastiv1alpha1.ElastiService) {
			es.Status.Wakes, es.Status.LastScaledDownTime, es.Status.LastScaledUpTime = 1, at(time.Hour), at(20*time.Minute)
		}), 1, []string{"the cooldown (15m0s) since last woken 20m ago is over",
			"a wake is under way (woken 20m ago, no Ready pod yet): it is not scaled down while the resolver holds a request for it"}},
		{"triggers failing", elastiService("shop", "web", func(es *elastiv1alpha1.ElastiService) {
			es.Status.Conditions = append(es.Status.Conditions, metav1.Condition{Type: elastiv1alpha1.ConditionTriggersEvaluated,
				Status: metav1.ConditionFalse, Reason: "Unreachable", Message: "Not scaling to zero: dial tcp: refused", LastTransitionTime: *at(time.Minute)})
		}), 2, []string{"the triggers cannot be evaluated (Unreachable: Not scaling to zero: dial tcp: refused)",
			"TriggersEvaluated=False (Unreachable) since 60s ago"}},
		{"not ready", elastiService("shop", "web", func(es *elastiv1alpha1.ElastiService) {
			es.Status.Conditions = []metav1.Condition{readyCondition(metav1.ConditionFalse, "ServiceNotFound")}
		}), 2, []string{"not Ready (ServiceNotFound: m): the operator scales down only"}},
		{"outside the window", elastiService("shop", "web", func(es *elastiv1alpha1.ElastiService) {
			es.Spec.EnabledPeriod = &elastiv1alpha1.EnabledPeriod{Schedule: "0 0 * * 6", Duration: "48h"}
		}), 2, []string{"outside the enabled period"}},
		{"pending sleep request", elastiService("shop", "web", func(es *elastiv1alpha1.ElastiService) {
			es.Status.LastScaledUpTime = at(5 * time.Minute)
			es.Annotations = map[string]string{elastiv1alpha1.AnnotationSleepRequestedAt: now.Add(-time.Minute).Format(time.RFC3339)}
		}), 2, []string{"Nothing but the triggers", "a sleep request from 60s ago is pending"}},
		{"idle-only", elastiService("shop", "web", nil), 2, []string{"Nothing but the triggers",
			"1. prometheus query=sum(rate(x[1m])) threshold=0.5"}},
		{"asleep", elastiService("shop", "web", func(es *elastiv1alpha1.ElastiService) { es.Status.Mode = elastiv1alpha1.ModeProxy }), 0,
			[]string{"State:       asleep", `the next request to Service "web" wakes it`}},
		{"asleep, its group waiting on a dependency", elastiService("shop", "web", func(es *elastiv1alpha1.ElastiService) {
			es.Status.Mode = elastiv1alpha1.ModeProxy
			es.Spec.WakeWith = []elastiv1alpha1.Dependency{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db"}}
			es.Status.Conditions = append(es.Status.Conditions, metav1.Condition{Type: elastiv1alpha1.ConditionDependenciesReady,
				Status: metav1.ConditionFalse, Reason: elastiv1alpha1.ReasonDependencyNotReady, LastTransitionTime: *at(time.Minute),
				Message: `Waking in order, the target waits: dependency 1 of 1, StatefulSet "db", has 0/1 replicas ready`})
		}), 0, []string{`its wake group waits on a dependency (DependencyNotReady: Waking in order, the target waits: dependency 1 of 1, StatefulSet "db", has 0/1 replicas ready)`,
			"a wake first scales its 1 dependencies in spec.wakeWith"}},
	} {
		var b bytes.Buffer
		Explain(&b, c.es, c.replicas, now)
		for _, w := range c.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s: no %q in\n%s", c.name, w, b.String())
			}
		}
		if strings.Contains(b.String(), "secret") {
			t.Errorf("%s: a trigger header shown:\n%s", c.name, b.String())
		}
	}
}

// hasRows reports whether table has, in order, rows starting with each of
// rows' fields.
func hasRows(table string, rows ...string) bool {
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != len(rows)+1 {
		return false
	}
	for i, r := range rows {
		if !strings.HasPrefix(strings.Join(strings.Fields(lines[i+1]), " "), r+" ") {
			return false
		}
	}
	return true
}
