package kubectlelasti

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/command"
)

func TestStatusOutputNameJSONPathCustomColumns(t *testing.T) {
	f := statusFixture(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "-o", "name"}, "elastiservice.elasti.truefoundry.com/api\nelastiservice.elasti.truefoundry.com/new\nelastiservice.elasti.truefoundry.com/web\n"},
		{[]string{"status", "web", "-oname"}, "elastiservice.elasti.truefoundry.com/web\n"},
		{[]string{"status", "-o", "jsonpath={.items[*].name}"}, "api new web"},
		{[]string{"status", "-o", `jsonpath={range .items[*]}{.name}={.coldStartP50} {end}`}, "api= new= web=1.2s "},
		{[]string{"status", "web", "-o", "jsonpath={.kind} {.items[0].kind}"}, "List ElastiServiceSummary"},
		{[]string{"status", "-o", "go-template={{range .items}}{{.name}}:{{.wakes}};{{end}}"}, "api:0;new:0;web:3;"},
		{[]string{"status", "-A", "-o", "custom-columns=NS:.namespace,NAME:name,P50:{.coldStartP50},TARGET:{target}"},
			"NS      NAME   P50      TARGET\nother   db     <none>   Deployment/db\nshop    api    <none>   Deployment/api\nshop    new    <none>   Deployment/new\nshop    web    1.2s     Deployment/web\n"},
	} {
		if code := f.run(c.args...); code != ExitOK || f.out.String() != c.want {
			t.Errorf("%q: exit %d, stderr %q, out:\n%s\nwant:\n%s", c.args, code, f.err.String(), f.out.String(), c.want)
		}
	}
	for _, c := range []struct {
		args []string
		err  string
	}{
		{[]string{"status", "-o", "custom-columns=NAME"}, "error: unexpected custom-columns spec: NAME, expected <header>:<json-path-expr>"},
		{[]string{"status", "-o", "custom-columns="}, "error: custom-columns format specified but no custom columns given"},
		{[]string{"status", "-o", "custom-columns=A:{.a"}, "error: custom-columns A: unrecognized character in action"},
		{[]string{"status", "-o", "custom-columns=" + strings.Repeat("A:.a,", maxColumns) + "A:.a"}, "error: custom-columns: 65 columns, at most 64"},
		{[]string{"status", "-o", "jsonpath={.items[0"}, "error: error parsing jsonpath {.items[0"},
	} {
		if code := f.run(c.args...); code != ExitUsage || !strings.HasPrefix(f.err.String(), c.err) || f.out.Len() != 0 {
			t.Errorf("%q: exit %d, stderr %q, out %q; want %d, %q", c.args, code, f.err.String(), f.out.String(), ExitUsage, c.err)
		}
	}
}

// kubectl's auth and connection flags reach the client configuration.
func TestConnectionFlagsReachTheRESTConfig(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: u
  user: {token: from-file}
contexts:
- name: ctx
  context: {cluster: c, user: u, namespace: ctxns}
current-context: ctx
`), 0o600); err != nil {
		t.Fatal(err)
	}
	f := statusFixture(t)
	var cfg *rest.Config
	var ns string
	f.app.Connect = func(flags *genericclioptions.ConfigFlags) (*Clients, error) {
		var err error
		if cfg, ns, err = RESTConfig(flags); err != nil {
			return nil, err
		}
		return &Clients{Elasti: f.elasti, Kube: f.kube, Namespace: "shop"}, nil
	}
	if code := f.run("status", "--kubeconfig", kubeconfig); code != ExitOK {
		t.Fatalf("exit %d: %s", code, f.err.String())
	}
	if cfg.Host != "https://127.0.0.1:1" || cfg.BearerToken != "from-file" || cfg.Impersonate.UserName != "" || cfg.Timeout != requestTimeout || ns != "ctxns" ||
		!strings.HasPrefix(cfg.UserAgent, "kubectl-elasti/") {
		t.Errorf("from the kubeconfig: host %q token %q as %q timeout %v namespace %q agent %q", cfg.Host, cfg.BearerToken, cfg.Impersonate.UserName, cfg.Timeout, ns, cfg.UserAgent)
	}
	// The flags, before and after the command, as kubectl takes them.
	if code := f.run("--kubeconfig", kubeconfig, "--as=jane", "status", "--as-group=devs", "--as-group", "ops", "--token=T",
		"--server", "https://127.0.0.2:6443", "--request-timeout=7s", "-nx", "--insecure-skip-tls-verify"); code != ExitOK {
		t.Fatalf("exit %d: %s", code, f.err.String())
	}
	if cfg.Impersonate.UserName != "jane" || !slices.Equal(cfg.Impersonate.Groups, []string{"devs", "ops"}) || cfg.BearerToken != "T" ||
		cfg.Host != "https://127.0.0.2:6443" || cfg.Timeout != 7*time.Second || ns != "x" || !cfg.Insecure {
		t.Errorf("from the flags: as %q groups %q token %q host %q timeout %v namespace %q insecure %v",
			cfg.Impersonate.UserName, cfg.Impersonate.Groups, cfg.BearerToken, cfg.Host, cfg.Timeout, ns, cfg.Insecure)
	}
	// A bad flag value is the user's error, said before any request.
	if code := f.run("status", "--kubeconfig", kubeconfig, "--request-timeout=soon"); code != ExitError || !strings.HasPrefix(f.err.String(), "error: kubeconfig: Invalid timeout value") {
		t.Errorf("--request-timeout=soon: exit %d, %q", code, f.err.String())
	}
	// --context completes from the kubeconfig.
	if code := f.run("__complete", "--kubeconfig", kubeconfig, "status", "--context", ""); code != ExitOK || f.out.String() != "ctx\n:4\n" {
		t.Errorf("--context completion: exit %d, %q", code, f.out.String())
	}
	// Connect's watches are bounded by --request-timeout only when given.
	for _, c := range []struct {
		timeout string
		want    time.Duration
	}{{"0", 0}, {"7s", 7 * time.Second}} {
		flags := genericclioptions.NewConfigFlags(false)
		flags.KubeConfig, flags.Timeout = &kubeconfig, &c.timeout
		clients, err := Connect(flags)
		if err != nil {
			t.Fatal(err)
		}
		if clients.WatchTimeout != c.want || clients.ElastiWatch == nil || clients.Namespace != "ctxns" {
			t.Errorf("--request-timeout=%s: watch timeout %v, watch client %v, namespace %q", c.timeout, clients.WatchTimeout, clients.ElastiWatch != nil, clients.Namespace)
		}
	}
	if code := f.run("status", "--kubeconfig", filepath.Join(t.TempDir(), "none"), "--context=nope"); code != ExitError ||
		!strings.HasPrefix(f.err.String(), "error: kubeconfig: ") {
		t.Errorf("a missing kubeconfig: exit %d, %q", code, f.err.String())
	}
}

func TestCompletion(t *testing.T) {
	f := statusFixture(t)
	for _, ns := range []string{"shop", "other", "kube-system"} {
		if _, err := f.kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		if code := f.run("completion", shell); code != ExitOK || !strings.Contains(f.out.String(), "kubectl-elasti") || !strings.Contains(f.out.String(), "__complete") {
			t.Errorf("completion %s: exit %d, %d bytes", shell, code, f.out.Len())
		}
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		// The commands, then ElastiService names of the namespace.
		{[]string{"__complete", ""}, []string{"completion", "explain", "help", "sleep", "status", "version", "wake", ":4"}},
		{[]string{"__complete", "wake", ""}, []string{"api", "new", "web", ":4"}},
		{[]string{"__complete", "wake", "w"}, []string{"web", ":4"}},
		{[]string{"__complete", "wake", "web", ""}, []string{":4"}},
		{[]string{"__complete", "status", "web", ""}, []string{"api", "new", ":4"}},
		{[]string{"__complete", "-n", "other", "explain", ""}, []string{"db", ":4"}},
		{[]string{"__complete", "status", "-n", "o"}, []string{"other", ":4"}},
		{[]string{"__complete", "status", "-o", ""}, []string{"wide", "json", "yaml", "name", "jsonpath=", "jsonpath-as-json=", "custom-columns=", "go-template=", ":6"}},
	} {
		if code := f.run(c.args...); code != ExitOK {
			t.Fatalf("%q: exit %d: %s", c.args, code, f.err.String())
		}
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(f.out.String()), "\n") {
			name, _, _ := strings.Cut(line, "\t") // a command's description follows a tab
			got = append(got, name)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%q: %q, want %q", c.args, got, c.want)
		}
	}
}

// status --watch prints the list, then each change as a row, by a watch.
func TestStatusWatch(t *testing.T) {
	f := statusFixture(t)
	w := watch.NewFakeWithChanSize(3, false)
	w.Modify(elastiService("shop", "web", func(es *elastiv1alpha1.ElastiService) {
		es.Status.Mode, es.Status.TargetReplicas = elastiv1alpha1.ModeProxy, ptr.To[int32](0)
	}))
	w.Modify(elastiService("shop", "api", nil)) // not asked for
	w.Delete(elastiService("shop", "web", nil))
	var watched []string
	f.elasti.PrependWatchReactor("elastiservices", func(a k8stesting.Action) (bool, watch.Interface, error) {
		watched = append(watched, a.GetNamespace())
		return true, w, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	f.out.Reset()
	if code := f.app.Run(ctx, []string{"status", "web", "new", "--watch"}); code != ExitOK {
		t.Fatalf("exit %d: %s", code, f.err.String())
	}
	want := `NAME   MODE    REPLICAS   LAST WAKE   READY AFTER P50   LAST HELD   TIME ASLEEP   WAKING
web    serve   2          5m          1.2s              603ms       120m          -
new    -       -          -           -                 -           -             -
web    proxy   0          -           -                 -           -             -
web    serve   2          -           -                 -           -             -
`
	if f.out.String() != want || !slices.Equal(watched, []string{"shop"}) {
		t.Errorf("watches %q, out:\n%s\nwant:\n%s", watched, f.out.String(), want)
	}

	// --request-timeout ends a watch, as kubectl get --watch's.
	connect := f.app.Connect
	f.app.Connect = func(flags *genericclioptions.ConfigFlags) (*Clients, error) {
		c, err := connect(flags)
		if err == nil {
			c.WatchTimeout = 50 * time.Millisecond
		}
		return c, err
	}
	w = watch.NewFakeWithChanSize(1, false)
	start := time.Now()
	if code := f.run("status", "web", "-w", "-o", "name"); code != ExitOK || f.out.String() != "elastiservice.elasti.truefoundry.com/web\n" || time.Since(start) > 10*time.Second {
		t.Errorf("exit %d after %v, out %q", code, time.Since(start), f.out.String())
	}
	f.app.Connect = connect

	// -o json: the List, then each change by itself.
	w = watch.NewFakeWithChanSize(1, false)
	w.Modify(elastiService("shop", "web", nil))
	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	f.out.Reset()
	if code := f.app.Run(ctx, []string{"status", "web", "-w", "-o", "jsonpath={.kind} "}); code != ExitOK || f.out.String() != "List ElastiServiceSummary " {
		t.Errorf("exit %d, out %q", code, f.out.String())
	}
}

// A wait ends with an error when the ElastiService goes away.
func TestWaitEndsWhenDeleted(t *testing.T) {
	f := newFixture(t, elastiService("shop", "web", func(es *elastiv1alpha1.ElastiService) {
		es.Status.Mode, es.Status.TargetReplicas = elastiv1alpha1.ModeProxy, ptr.To[int32](0)
	}))
	f.replicas["web"] = 0
	w := watch.NewFakeWithChanSize(1, false)
	w.Delete(elastiService("shop", "web", nil))
	f.elasti.PrependWatchReactor("elastiservices", func(k8stesting.Action) (bool, watch.Interface, error) { return true, w, nil })
	if code := f.run("wake", "web", "--timeout=1m"); code != ExitError || f.err.String() != "error: elastiservice \"web\" was deleted while waiting for it to serve\n" {
		t.Errorf("exit %d, err %q", code, f.err.String())
	}
}

var _ runtime.Object = &Summary{}

// A wait resumes a watch the server closed from the last version it saw,
// and lists again after 410 Gone; the state it prints stays the same.
func TestWaitResumesAndRelists(t *testing.T) {
	proxy := func(rv string) *elastiv1alpha1.ElastiService {
		return elastiService("shop", "web", func(es *elastiv1alpha1.ElastiService) {
			es.ResourceVersion = rv
			es.Status.Mode, es.Status.TargetReplicas = elastiv1alpha1.ModeProxy, ptr.To[int32](0)
		})
	}
	f := newFixture(t, proxy(""))
	f.replicas["web"] = 0
	var watches []string
	lists := 0
	f.elasti.PrependReactor("list", "elastiservices", func(k8stesting.Action) (bool, runtime.Object, error) {
		lists++
		return true, &elastiv1alpha1.ElastiServiceList{ListMeta: metav1.ListMeta{ResourceVersion: "3"}, Items: []elastiv1alpha1.ElastiService{*proxy("3")}}, nil
	})
	f.elasti.PrependWatchReactor("elastiservices", func(a k8stesting.Action) (bool, watch.Interface, error) {
		watches = append(watches, a.(k8stesting.WatchAction).GetWatchRestrictions().ResourceVersion)
		w := watch.NewFakeWithChanSize(2, false)
		switch len(watches) {
		case 1: // seen up to 5, then too old
			w.Modify(proxy("5"))
			w.Error(&metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old resource version"})
		case 2: // seen up to 9, then closed by the server
			w.Modify(proxy("9"))
			w.Stop()
		default:
			w.Modify(elastiService("shop", "web", func(es *elastiv1alpha1.ElastiService) { es.ResourceVersion = "12" }))
		}
		return true, w, nil
	})
	if code := f.run("wake", "web", "--timeout=1m"); code != ExitOK {
		t.Fatalf("exit %d: %s", code, f.err.String())
	}
	if !slices.Equal(watches, []string{"3", "3", "9"}) || lists != 2 {
		t.Errorf("watched from %q after %d lists; want from 3, 3 again after the relist, then 9; 2 lists", watches, lists)
	}
	want := "elastiservice/web: scaled Deployment/web from 0 to 2 replicas\n" +
		"  0s: mode proxy, Deployment/web at 2 replicas\n" +
		"  0s: mode serve, Deployment/web at 2 replicas\n" +
		"elastiservice/web is awake: serving from Deployment/web after 0s\n"
	if f.out.String() != want {
		t.Errorf("out:\n%s\nwant:\n%s", f.out.String(), want)
	}
}

func TestVersionAndHelp(t *testing.T) {
	f := statusFixture(t)
	want := command.VersionLine("kubectl-elasti") + "\n"
	for _, args := range [][]string{{"version"}, {"--version"}} {
		if code := f.run(args...); code != ExitOK || f.out.String() != want {
			t.Errorf("%q: exit %d, %q; want %q", args, code, f.out.String(), want)
		}
	}
	for _, args := range [][]string{{}, {"--help"}, {"help"}} {
		if code := f.run(args...); code != ExitOK || !strings.Contains(f.out.String(), "kubectl elasti [command]") || !strings.Contains(f.out.String(), "--as string") {
			t.Errorf("%q: exit %d\n%s", args, code, f.out.String())
		}
	}
	if code := f.run("status", "--bogus"); code != ExitUsage || f.err.String() != "error: unknown flag: --bogus\nSee 'kubectl elasti status --help'.\n" {
		t.Errorf("--bogus: exit %d, %q", code, f.err.String())
	}
}
