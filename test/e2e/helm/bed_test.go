package helm

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/elasti-dev/elasti/test/localcluster"
	"github.com/elasti-dev/elasti/test/localcluster/clustertest"
	"github.com/elasti-dev/elasti/test/localcluster/realnet"
)

const (
	// release and namespace are what the README installs.
	release   = "elasti"
	namespace = "elasti"
	// appPort is where every kwok app pod "listens": one echo server on
	// 0.0.0.0 inside the node namespace answers on every live pod IP.
	appPort      = 8080
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
	binDir := t.TempDir()
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "[helm-e2e] "+format+"\n", args...) }
	logf("building elasti's images (the binaries the chart's pods run)")
	build := exec.Command("go", "build", "-o", binDir+"/", "./cmd/elasti-operator", "./cmd/elasti-resolver")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	b.Net, err = realnet.Start(ctx, realnet.Options{
		Cluster: c,
		Binaries: map[string]string{
			"elasti-operator": filepath.Join(binDir, "elasti-operator"),
			"elasti-resolver": filepath.Join(binDir, "elasti-resolver"),
		},
		Logf: logf,
	})
	if err != nil {
		t.Fatalf("the real-traffic bed could not start: %v", err)
	}
	kctx, cancel := context.WithCancel(ctx)
	var once sync.Once
	stopBed = func() { once.Do(func() { cancel(); b.Close() }) }
	clustertest.OnInterrupt(stopBed)
	kube := kubernetes.NewForConfigOrDie(c.RESTConfig())
	if _, err := b.Network.RunKubelet(kctx, kube, nil); err != nil {
		t.Fatal(err)
	}
	ln, err := b.Network.Listen("tcp", fmt.Sprintf("0.0.0.0:%d", appPort))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(echo), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return b
}

// echoReply is what the app pods answer: which pod served, and the path.
type echoReply struct {
	ServedBy string `json:"servedBy"`
	Path     string `json:"path"`
}

func echo(w http.ResponseWriter, r *http.Request) {
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	host := ""
	if local != nil {
		host, _, _ = net.SplitHostPort(local.String())
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(echoReply{ServedBy: host, Path: r.URL.Path})
}

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
	raw, err := os.ReadFile(filepath.Join(b.root, "charts", "elasti", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	}
	if err := yaml.Unmarshal(raw, &chart); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	b.runHelm(t, time.Minute, "package", filepath.Join(b.root, "charts", "elasti"), "--destination", dir)
	repo := strings.TrimPrefix(srv.URL, "http://") + "/charts"
	b.runHelm(t, time.Minute, "push", filepath.Join(dir, chart.Name+"-"+chart.Version+".tgz"), "oci://"+repo, "--plain-http")
	return "oci://" + repo + "/" + chart.Name, chart.Version
}
