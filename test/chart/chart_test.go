package chart_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/elasti-dev/elasti/test/localcluster"
)

// release and namespace of every render: manifests/ installs into elasti,
// and KubeElasti's chart names its objects after the release "elasti".
const (
	release   = "elasti"
	namespace = "elasti"
)

// helmLabels are the labels the chart adds for Helm's bookkeeping; the
// only difference from manifests/ that the comparison allows.
var helmLabels = []string{"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance"}

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

// bins returns the directory holding helm and kubectl, building them on a
// cold machine. Failing to build fails the test; nothing skips.
func bins(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
		defer cancel()
		binDir, binErr = localcluster.EnsureBinaries(ctx, os.Stderr)
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binDir
}

func repo(t *testing.T, rel ...string) string {
	t.Helper()
	root, err := localcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(append([]string{root}, rel...)...)
}

// object is one rendered Kubernetes object as generic JSON.
type object map[string]any

func (o object) key() string {
	md, _ := o["metadata"].(map[string]any)
	return fmt.Sprintf("%s %v/%v", o["kind"], md["namespace"], md["name"])
}

type objects map[string]object

func (objs objects) keys() []string {
	var keys []string
	for k := range objs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func parse(t *testing.T, source string, data []byte) objects {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	objs := objects{}
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", source, err)
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			t.Fatalf("%s: %v\n%s", source, err, doc)
		}
		var o object
		if err := json.Unmarshal(js, &o); err != nil {
			t.Fatalf("%s: %v", source, err)
		}
		if o == nil || o["kind"] == nil {
			continue
		}
		if _, dup := objs[o.key()]; dup {
			t.Fatalf("%s renders %s twice", source, o.key())
		}
		objs[o.key()] = o
	}
	return objs
}

// helmTemplate renders the chart with the given values files and --set
// flags. It returns helm's output and error, so callers can test refusals.
func helmTemplate(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	all := append([]string{"template", release, repo(t, "charts", "elasti"), "--namespace", namespace, "--include-crds"}, args...)
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(bins(t), localcluster.HelmBinary), all...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return stderr.Bytes(), fmt.Errorf("helm %s: %w\n%s", strings.Join(all, " "), err, stderr.Bytes())
	}
	return stdout.Bytes(), nil
}

func render(t *testing.T, args ...string) objects {
	t.Helper()
	out, err := helmTemplate(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return parse(t, "helm template "+strings.Join(args, " "), out)
}

// withoutHelmLabels drops Helm's bookkeeping labels from every object's
// metadata, failing the test if an object lacks them (helm uninstall and
// the README's selectors rely on them).
func withoutHelmLabels(t *testing.T, objs objects) objects {
	t.Helper()
	for k, o := range objs {
		md := o["metadata"].(map[string]any)
		labels, _ := md["labels"].(map[string]any)
		if o["kind"] == "CustomResourceDefinition" {
			// crds/ is not templated: Helm installs it as it is.
			continue
		}
		for _, l := range helmLabels {
			if _, ok := labels[l]; !ok {
				t.Errorf("%s lacks Helm's label %s", k, l)
			}
			delete(labels, l)
		}
		if len(labels) == 0 {
			delete(md, "labels")
		}
	}
	return objs
}

// kustomize renders a directory with kubectl's built-in kustomize.
func kustomize(t *testing.T, dir string) objects {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(bins(t), localcluster.KubectlBinary), "kustomize", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, out)
	}
	return parse(t, dir, out)
}

// plainManifests is manifests/ as kubectl apply -f manifests/ reads it.
func plainManifests(t *testing.T) objects {
	t.Helper()
	files, err := filepath.Glob(repo(t, "manifests", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	all := objects{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for k, o := range parse(t, f, data) {
			all[k] = o
		}
	}
	return all
}

// withoutNamespace drops the Namespace object: helm install
// --create-namespace creates the release namespace, and a chart that also
// templates it fails to install (ENGINEERING.md, "Helm").
func withoutNamespace(t *testing.T, objs objects) objects {
	t.Helper()
	if _, ok := objs["Namespace <nil>/"+namespace]; !ok {
		t.Fatalf("expected a Namespace %s among %v", namespace, objs.keys())
	}
	delete(objs, "Namespace <nil>/"+namespace)
	return objs
}

// sameObjects fails the test for every object that one side has and the
// other lacks, or that differs, showing both.
func sameObjects(t *testing.T, what string, got, want objects) {
	t.Helper()
	for _, k := range want.keys() {
		g, ok := got[k]
		if !ok {
			t.Errorf("%s: the chart does not render %s", what, k)
			continue
		}
		if !reflect.DeepEqual(g, want[k]) {
			gy, _ := yaml.Marshal(g)
			wy, _ := yaml.Marshal(want[k])
			t.Errorf("%s: %s differs\n--- chart\n%s\n--- expected\n%s", what, k, gy, wy)
		}
	}
	for _, k := range got.keys() {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: the chart renders %s, which is not expected", what, k)
		}
	}
}

// uninstallHook is what the chart renders beyond manifests/ and the
// overlays: helm uninstall's pre-delete hook (templates/uninstall-hook.yaml),
// which only Helm runs. kubectl apply -f manifests/ has no uninstall step;
// the README's runbook is its uninstall.
var uninstallHook = []string{
	"Job elasti/elasti-uninstall",
	"Role elasti/elasti-uninstall",
	"RoleBinding elasti/elasti-uninstall",
}

// withoutHooks takes Helm's hooks out of a render, failing the test unless
// they are exactly uninstallHook, each a pre-delete hook: the rest must
// then equal manifests/ or an overlay, object for object.
func withoutHooks(t *testing.T, objs objects) objects {
	t.Helper()
	var hooks []string
	for k, o := range objs {
		md := o["metadata"].(map[string]any)
		ann, _ := md["annotations"].(map[string]any)
		hook, ok := ann["helm.sh/hook"]
		if !ok {
			continue
		}
		if hook != "pre-delete" {
			t.Errorf("%s is a %v hook; the chart's only hook is pre-delete", k, hook)
		}
		hooks = append(hooks, k)
		delete(objs, k)
	}
	sort.Strings(hooks)
	if !reflect.DeepEqual(hooks, uninstallHook) {
		t.Errorf("the chart's hooks are %v, want %v", hooks, uninstallHook)
	}
	return objs
}

// TestChartDefaultsRenderManifests: the chart with its default values is
// manifests/, object for object and field for field, except the Namespace
// (Helm creates it), Helm's own labels and the uninstall hook, which only
// Helm runs.
func TestChartDefaultsRenderManifests(t *testing.T) {
	got := withoutHooks(t, withoutHelmLabels(t, render(t)))
	want := withoutNamespace(t, plainManifests(t))
	sameObjects(t, "default values", got, want)
}

// TestChartOptionsRenderOverlays: each option of the chart renders what the
// deploy/ overlay expressing it renders, so the overlays and the chart
// cannot drift apart.
func TestChartOptionsRenderOverlays(t *testing.T) {
	for _, tc := range []struct{ values, overlay string }{
		{"ha-values.yaml", "ha"},
		{"namespace-scoped-values.yaml", "namespace-scoped"},
		{"monitoring-values.yaml", "monitoring"},
		{"wake-token-values.yaml", "wake-token"},
		{"operator-egress-values.yaml", "operator-egress"},
	} {
		t.Run(tc.overlay, func(t *testing.T) {
			got := withoutHooks(t, withoutHelmLabels(t, render(t, "-f", repo(t, "charts", "elasti", "ci", tc.values))))
			want := withoutNamespace(t, kustomize(t, repo(t, "deploy", "overlays", tc.overlay)))
			sameObjects(t, "ci/"+tc.values+" against deploy/overlays/"+tc.overlay, got, want)
		})
	}
}
