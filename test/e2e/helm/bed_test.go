package helm

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/elasti-dev/elasti/test/e2e/e2ebed"
	"github.com/elasti-dev/elasti/test/localcluster"
	"github.com/elasti-dev/elasti/test/localcluster/clustertest"
	"github.com/elasti-dev/elasti/test/localcluster/realnet"
)

const (
	// release and namespace are what the README installs.
	release      = "elasti"
	namespace    = "elasti"
	appPort      = e2ebed.AppPort
	readyTimeout = 3 * time.Minute
)

var stopBed = func() {}

// bed is the real-traffic bed without elasti: the test installs it with
// helm.
type bed struct {
	*realnet.Net
	cluster *localcluster.Cluster
	root    string
	helm    string
	// helmHome keeps helm's config, cache and data (its OCI registry
	// config among them) out of the user's home.
	helmHome string
}

// startBed builds elasti's binaries (the images the chart's pods run) and
// starts the real-traffic bed. A bed that cannot start fails the test.
func startBed(t *testing.T) *bed {
	t.Helper()
	ctx := context.Background()
	c := clustertest.Get(t)
	root, err := localcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b := &bed{cluster: c, root: root, helm: filepath.Join(c.BinDir, localcluster.HelmBinary), helmHome: t.TempDir()}
	logf := e2ebed.Logf("helm-e2e")
	logf("building elasti's images (the binaries the chart's pods run): %s, and %s for the upgrade", b.appVersion(t), upgradeTag)
	installBins, upgradeBins := b.build(t, b.appVersion(t)), b.build(t, upgradeTag)
	binaries := map[string]string{}
	for _, name := range []string{"elasti-operator", "elasti-resolver"} {
		// The chart's tag (appVersion) runs the install build; the upgrade's
		// tag runs another binary, built as another release.
		binaries[name] = filepath.Join(installBins, name)
		binaries[name+":"+upgradeTag] = filepath.Join(upgradeBins, name)
	}
	b.Net, err = realnet.Start(ctx, realnet.Options{
		Cluster:  c,
		Binaries: binaries,
		Logf:     logf,
	})
	if err != nil {
		t.Fatalf("the real-traffic bed could not start: %v", err)
	}
	kctx, cancel := context.WithCancel(ctx)
	stopBed = e2ebed.Stopper(func() { cancel(); b.Close() })
	kube := kubernetes.NewForConfigOrDie(c.RESTConfig())
	if err := e2ebed.ServeApps(kctx, b.Net, kube, http.HandlerFunc(e2ebed.Echo)); err != nil {
		t.Fatal(err)
	}
	return b
}

// build builds elasti's two binaries as release version, as make build
// does (the version ldflag), into a directory of their own.
func (b *bed) build(t *testing.T, version string) string {
	t.Helper()
	dir := t.TempDir()
	if err := e2ebed.BuildElasti(b.root, dir, version); err != nil {
		t.Fatal(err)
	}
	return dir
}

// chartMeta is what the tests read of charts/elasti/Chart.yaml.
type chartMeta struct {
	Name       string `json:"name"`
	Version    string `json:"version"`
	AppVersion string `json:"appVersion"`
}

func (b *bed) chart(t *testing.T) chartMeta {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(b.root, "charts", "elasti", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c chartMeta
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// appVersion is the release the chart installs: its images' tag.
func (b *bed) appVersion(t *testing.T) string { return b.chart(t).AppVersion }

// startedVersion is the version the container last logged at its start
// ("Starting" ... version="..."), read from the process node's log of it:
// which build runs, not which image tag the pod names.
func (b *bed) startedVersion(namespace, pod, container string) string {
	data, err := os.ReadFile(b.Node.LogPath(namespace, pod, container))
	if err != nil {
		return err.Error()
	}
	version := "no start logged"
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, `"Starting"`) {
			if m := versionRE.FindStringSubmatch(line); m != nil {
				version = m[1]
			}
		}
	}
	return version
}

var versionRE = regexp.MustCompile(`version="([^"]+)"`)

// echoReply is what the app pods answer (e2ebed.Echo).
type echoReply = e2ebed.EchoReply

// runHelm runs the pinned helm against the bed's cluster.
func (b *bed) runHelm(t *testing.T, timeout time.Duration, args ...string) string {
	t.Helper()
	out, err := b.tryHelm(timeout, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (b *bed) tryHelm(timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, b.helm, append([]string{"--kubeconfig", b.cluster.Kubeconfig}, args...)...)
	cmd.Env = os.Environ()
	for _, v := range []string{"HELM_CONFIG_HOME", "HELM_CACHE_HOME", "HELM_DATA_HOME"} {
		cmd.Env = append(cmd.Env, v+"="+filepath.Join(b.helmHome, v))
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// publishChart packages charts/elasti and pushes it, as make release does,
// to a registry on loopback that lives as long as the test, so the test
// installs what users install: the chart from an OCI registry. It returns
// the chart's oci:// reference and version. (hack/images' tests check what
// make release changes in the package: its values pinned to the images.)
func (b *bed) publishChart(t *testing.T) (ref, version string) {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	chart := b.chart(t)
	dir := t.TempDir()
	b.runHelm(t, time.Minute, "package", filepath.Join(b.root, "charts", "elasti"), "--destination", dir)
	repo := strings.TrimPrefix(srv.URL, "http://") + "/charts"
	b.runHelm(t, time.Minute, "push", filepath.Join(dir, chart.Name+"-"+chart.Version+".tgz"), "oci://"+repo, "--plain-http")
	return "oci://" + repo + "/" + chart.Name, chart.Version
}
