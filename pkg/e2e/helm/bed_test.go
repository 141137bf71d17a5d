package helm

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/elasti-dev/elasti/pkg/localcluster"
	"github.com/elasti-dev/elasti/pkg/localcluster/clustertest"
	"github.com/elasti-dev/elasti/pkg/localcluster/realnet"
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
	b := &bed{cluster: c, root: root, helm: filepath.Join(c.BinDir, localcluster.HelmBinary)}
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
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}
