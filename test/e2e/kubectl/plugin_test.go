package kubectl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/idle"
	"github.com/elasti-dev/elasti/test/localcluster"
	"github.com/elasti-dev/elasti/test/localcluster/clustertest"
	"github.com/elasti-dev/elasti/test/testenv"
)

var (
	buildOnce sync.Once
	pluginBin string
	buildErr  error
)

// plugin builds cmd/kubectl-elasti once per test binary.
func plugin(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		root, err := localcluster.RepoRoot()
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "kubectl-elasti-bin-")
		if err != nil {
			buildErr = err
			return
		}
		clustertest.AfterTests(func() { _ = os.RemoveAll(dir) })
		pluginBin = filepath.Join(dir, "kubectl-elasti")
		cmd := exec.Command("go", "build", "-trimpath", "-o", pluginBin, "./cmd/kubectl-elasti")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/kubectl-elasti: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return pluginBin
}

// result is one run of the plugin.
type result struct {
	code        int
	stdout, err string
}

// kubectlElasti runs the plugin with KUBECONFIG=kubeconfig and a HOME of
// its own, so nothing of the machine's ~/.kube is read.
func kubectlElasti(t *testing.T, kubeconfig string, args ...string) result {
	t.Helper()
	return run(t, plugin(t), kubeconfig, args...)
}

// run runs the plugin's binary at bin (or a link to it) as kubectlElasti.
func run(t *testing.T, bin, kubeconfig string, args ...string) result {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), bin, args...)
	cmd.Env = []string{"KUBECONFIG=" + kubeconfig, "HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("kubectl-elasti %s: %v", strings.Join(args, " "), err)
	}
	r := result{code: code, stdout: stdout.String(), err: stderr.String()}
	t.Logf("kubectl elasti %s: exit %d\n%s%s", strings.Join(args, " "), r.code, clip(r.stdout), r.err)
	return r
}

// clip shortens a long output for the log (a completion script is 10 KB),
// so that a failure's own lines stay in what CI keeps of the log.
func clip(out string) string {
	const max = 1024
	if len(out) <= max {
		return out
	}
	return fmt.Sprintf("%s\n[... %d more bytes]\n", out[:max], len(out)-max)
}

// kubeconfigIn writes a kubeconfig for the cluster that authenticates with
// token (the admin's when empty) and whose context's namespace is ns.
func kubeconfigIn(t *testing.T, ns, token string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(clustertest.Get(t).Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	ctx.Namespace = ns
	if token != "" {
		cfg.AuthInfos["sa"] = &clientcmdapi.AuthInfo{Token: token}
		ctx.AuthInfo = "sa"
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// The plugin against a real apiserver and operator: status lists the
// ElastiService; wake brings its sleeping target to serve and sleep puts
// it back to proxy at zero, the Service never without a ready endpoint
// (the resolver in front first); explain names the cooldown; a missing
// object and a ServiceAccount without permission fail non-zero, saying so.
func TestPluginStatusWakeSleepExplain(t *testing.T) {
	e := testenv.New(t)
	prom := testenv.NewFakePrometheus(t)
	prom.Set("5", "1", testenv.PrometheusHealthy) // busy: it never sleeps by itself
	e.Opts.PollingInterval = 200 * time.Millisecond
	e.Opts.QueryTimeout = time.Second
	e.Opts.PrometheusServerAddress = prom.URL
	e.StartOperator()
	e.Resolver(1)
	e.App("web", 0)
	e.ElastiServiceWith("web", "web", elastiv1alpha1.KindDeployment, "web", func(es *elastiv1alpha1.ElastiService) {
		es.Spec.CooldownPeriod = 3600
		es.Spec.Triggers = testenv.IdleTrigger("0.5")
	})
	e.WaitMode("web", elastiv1alpha1.ModeProxy)
	e.Eventually("the resolver slice of web lists a ready endpoint", func() (bool, string) {
		for _, s := range e.SlicesFor("web") {
			for _, ep := range s.Endpoints {
				if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
					return true, ""
				}
			}
		}
		return false, "none"
	})
	dark := e.WatchDark("web")
	// The namespace comes from the kubeconfig's context: no -n.
	admin := kubeconfigIn(t, e.NS, "")

	r := kubectlElasti(t, admin, "status")
	if r.code != 0 || !hasRow(r.stdout, "web", "proxy", "0") {
		t.Fatalf("status: exit %d, want a row web proxy 0:\n%s%s", r.code, r.stdout, r.err)
	}
	// kubectl's printers: -o name pipes into kubectl, -o jsonpath reads
	// the summary.
	r = kubectlElasti(t, admin, "status", "-o", "name")
	if r.code != 0 || r.stdout != "elastiservice.elasti.truefoundry.com/web\n" {
		t.Errorf("status -o name: exit %d, %q%s", r.code, r.stdout, r.err)
	}
	r = kubectlElasti(t, admin, "status", "-o", "jsonpath={.kind} {.items[0].name} {.items[0].mode} {.items[0].targetReplicas}")
	if r.code != 0 || r.stdout != "List web proxy 0" {
		t.Errorf("status -o jsonpath: exit %d, %q%s", r.code, r.stdout, r.err)
	}
	// Completion: the script, the commands, and the ElastiServices'
	// names read from the apiserver, also through the name kubectl 1.26
	// and later run for a plugin's completion.
	r = kubectlElasti(t, admin, "completion", "bash")
	if r.code != 0 || !strings.Contains(r.stdout, "__start_kubectl-elasti") {
		t.Errorf("completion bash: exit %d, %d bytes%s", r.code, len(r.stdout), r.err)
	}
	r = kubectlElasti(t, admin, "__complete", "")
	if r.code != 0 || !hasLines(r.stdout, "status", "wake", "sleep", "explain") {
		t.Errorf("__complete: exit %d\n%s%s", r.code, r.stdout, r.err)
	}
	complete := filepath.Join(t.TempDir(), "kubectl_complete-elasti")
	if err := os.Symlink(plugin(t), complete); err != nil {
		t.Fatal(err)
	}
	r = run(t, complete, admin, "wake", "")
	if r.code != 0 || !hasLines(r.stdout, "web") {
		t.Errorf("kubectl_complete-elasti wake '': exit %d\n%s%s", r.code, r.stdout, r.err)
	}

	// status --watch, started before the wake, prints the change to serve.
	// The watch's first row must be printed before the wake: the wake
	// takes about 100ms, less than the watch may need to start and list.
	watching := startPlugin(t, admin, "status", "web", "--watch")
	watching.waitFor(t, 30*time.Second, func(out string) bool { return hasRow(out, "web", "proxy", "0") })

	r = kubectlElasti(t, admin, "wake", "web", "--timeout=2m")
	if r.code != 0 || !strings.Contains(r.stdout, "elastiservice/web is awake") {
		t.Fatalf("wake: exit %d\n%s%s", r.code, r.stdout, r.err)
	}
	if got := e.Get("web").Status.Mode; got != elastiv1alpha1.ModeServe {
		t.Errorf("after wake: mode %q", got)
	}
	if got := e.Replicas(elastiv1alpha1.KindDeployment, "web"); got != 2 {
		t.Errorf("after wake: %d replicas, want minTargetReplicas 2", got)
	}
	// The watch follows the wake: a serve row after the proxy one.
	watching.waitFor(t, 30*time.Second, func(out string) bool { return hasRow(out, "web", "serve") })

	// Just woken, with a cooldown of an hour: that is what holds it.
	e.Eventually("lastScaledUpTime recorded", func() (bool, string) {
		return e.Get("web").Status.LastScaledUpTime != nil, ""
	})
	r = kubectlElasti(t, admin, "explain", "web")
	if r.code != 0 || !strings.Contains(r.stdout, "Why it is not sleeping:") || !strings.Contains(r.stdout, "of the 1h0m0s cooldown remain") {
		t.Errorf("explain: exit %d, want the cooldown named\n%s%s", r.code, r.stdout, r.err)
	}

	r = kubectlElasti(t, admin, "sleep", "web", "--timeout=2m")
	if r.code != 0 || !strings.Contains(r.stdout, "elastiservice/web is asleep") {
		t.Fatalf("sleep: exit %d\n%s%s", r.code, r.stdout, r.err)
	}
	if got := e.Replicas(elastiv1alpha1.KindDeployment, "web"); got != 0 {
		t.Errorf("after sleep: %d replicas", got)
	}
	e.Eventually("a ScaledToZero event naming the request", func() (bool, string) {
		ok, msg := e.HasEvent("web", idle.ReasonScaledToZero)
		return ok && strings.HasPrefix(msg, "Sleep requested at "), msg
	})
	if samples, darkServices := dark.Stats(); samples == 0 || darkServices != 0 {
		t.Errorf("dark-Service watcher: %d samples, %d Services dark", samples, darkServices)
	}

	// A missing object: non-zero, and said plainly.
	r = kubectlElasti(t, admin, "wake", "nope")
	if want := fmt.Sprintf("error: elastiservice \"nope\" not found in namespace %q\n", e.NS); r.code != 1 || r.err != want {
		t.Errorf("wake nope: exit %d, stderr %q; want 1, %q", r.code, r.err, want)
	}

	// A ServiceAccount without permission, then one that may read but not
	// write ElastiServices.
	viewer := serviceAccountKubeconfig(t, e, "viewer")
	r = kubectlElasti(t, viewer, "status")
	if want := fmt.Sprintf("error: forbidden: you may not list elastiservices in namespace %q", e.NS); r.code != 1 || !strings.HasPrefix(r.err, want) {
		t.Errorf("status as viewer: exit %d, stderr %q; want 1, %q", r.code, r.err, want)
	}
	// The admin impersonating the viewer (--as) is refused the same.
	asViewer := "--as=system:serviceaccount:" + e.NS + ":viewer"
	r = kubectlElasti(t, admin, "status", asViewer)
	if want := fmt.Sprintf("error: forbidden: you may not list elastiservices in namespace %q", e.NS); r.code != 1 || !strings.HasPrefix(r.err, want) {
		t.Errorf("status %s: exit %d, stderr %q; want 1, %q", asViewer, r.code, r.err, want)
	}
	grant(t, e, "viewer",
		rbacv1.PolicyRule{APIGroups: []string{elastiv1alpha1.SchemeGroupVersion.Group}, Resources: []string{"elastiservices"}, Verbs: []string{"get", "list"}},
		rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments/scale"}, Verbs: []string{"get"}})
	e.Eventually("the viewer's role to take effect", func() (bool, string) {
		r := kubectlElasti(t, viewer, "status")
		return r.code == 0 && hasRow(r.stdout, "web", "proxy", "0"), r.err
	})
	// Awake again, by the admin's wake, which also withdraws the admin's
	// sleep request: scaling by hand would leave that request standing,
	// and the operator could honour it again before the viewer's sleep
	// read the target, which then finds it asleep already and patches
	// nothing.
	r = kubectlElasti(t, admin, "wake", "web", "--timeout=2m")
	if r.code != 0 || !strings.Contains(r.stdout, "elastiservice/web is awake") {
		t.Fatalf("wake: exit %d\n%s%s", r.code, r.stdout, r.err)
	}
	r = kubectlElasti(t, viewer, "sleep", "web", "--wait=false")
	if want := fmt.Sprintf("error: forbidden: you may not patch elastiservices in namespace %q", e.NS); r.code != 1 || !strings.HasPrefix(r.err, want) {
		t.Errorf("sleep as viewer: exit %d, stderr %q; want 1, %q", r.code, r.err, want)
	}
	// Impersonated, the viewer may read, and still not write.
	r = kubectlElasti(t, admin, "status", "web", asViewer, "-o", "jsonpath={.items[0].mode}")
	if r.code != 0 || r.stdout != "serve" {
		t.Errorf("status %s: exit %d, %q%s", asViewer, r.code, r.stdout, r.err)
	}
	r = kubectlElasti(t, admin, "sleep", "web", "--wait=false", asViewer)
	if want := fmt.Sprintf("error: forbidden: you may not patch elastiservices in namespace %q", e.NS); r.code != 1 || !strings.HasPrefix(r.err, want) {
		t.Errorf("sleep %s: exit %d, stderr %q; want 1, %q", asViewer, r.code, r.err, want)
	}
	if at, ok := e.Get("web").Annotations[elastiv1alpha1.AnnotationSleepRequestedAt]; ok {
		t.Errorf("the viewer's refused sleep left a request: %s=%s", elastiv1alpha1.AnnotationSleepRequestedAt, at)
	}
	if got := e.Replicas(elastiv1alpha1.KindDeployment, "web"); got != 2 {
		t.Errorf("after the viewer's refused sleep: %d replicas, want 2", got)
	}
}

// running is a plugin process still running, its stdout so far.
type running struct {
	cmd *exec.Cmd
	mu  sync.Mutex
	out bytes.Buffer
}

func (r *running) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.Write(p)
}

func (r *running) stdout() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.String()
}

// startPlugin starts the plugin with args; the test's end stops it.
func startPlugin(t *testing.T, kubeconfig string, args ...string) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	r := &running{}
	r.cmd = exec.CommandContext(ctx, plugin(t), args...)
	r.cmd.Env = []string{"KUBECONFIG=" + kubeconfig, "HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
	r.cmd.Stdout = r
	var stderr bytes.Buffer
	r.cmd.Stderr = &stderr
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = r.cmd.Wait()
		t.Logf("kubectl elasti %s:\n%s%s", strings.Join(args, " "), r.stdout(), stderr.String())
	})
	return r
}

// waitFor waits at most timeout for r's stdout to satisfy done; r keeps
// running (the test's end stops it and logs all it printed).
func (r *running) waitFor(t *testing.T, timeout time.Duration, done func(string) bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !done(r.stdout()) {
		if time.Now().After(deadline) {
			t.Errorf("timed out after %s waiting for the output of %s:\n%s", timeout, strings.Join(r.cmd.Args, " "), r.stdout())
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// hasLines reports whether out has each of lines, a line's text up to a
// tab (a completion's description follows one).
func hasLines(out string, lines ...string) bool {
	have := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		name, _, _ := strings.Cut(l, "\t")
		have[name] = true
	}
	for _, l := range lines {
		if !have[l] {
			return false
		}
	}
	return true
}

// hasRow reports whether table has a row starting with fields.
func hasRow(table string, fields ...string) bool {
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if len(f) >= len(fields) && strings.Join(f[:len(fields)], " ") == strings.Join(fields, " ") {
			return true
		}
	}
	return false
}

// serviceAccountKubeconfig creates ServiceAccount name in e's namespace,
// with no role, and returns a kubeconfig authenticating as it.
func serviceAccountKubeconfig(t *testing.T, e *testenv.Env, name string) string {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.NS}}
	if _, err := e.Kube.CoreV1().ServiceAccounts(e.NS).Create(e.Ctx(), sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := e.Kube.CoreV1().ServiceAccounts(e.NS).CreateToken(e.Ctx(), name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return kubeconfigIn(t, e.NS, tr.Status.Token)
}

// grant gives ServiceAccount name rules in e's namespace.
func grant(t *testing.T, e *testenv.Env, name string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.NS}, Rules: rules}
	if _, err := e.Kube.RbacV1().Roles(e.NS).Create(e.Ctx(), role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.NS},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: e.NS}},
	}
	if _, err := e.Kube.RbacV1().RoleBindings(e.NS).Create(e.Ctx(), binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
