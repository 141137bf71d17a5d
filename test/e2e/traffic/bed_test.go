package traffic

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/elasti-dev/elasti/test/localcluster"
	"github.com/elasti-dev/elasti/test/localcluster/clustertest"
	"github.com/elasti-dev/elasti/test/localcluster/realnet"
)

const (
	// elastiNamespace and the Deployment names are manifests/' own.
	elastiNamespace    = "elasti"
	operatorDeployment = "elasti-operator-controller-manager"
	resolverDeployment = "elasti-resolver"

	// appPort is where every kwok app pod "listens": one echo server on
	// 0.0.0.0 inside the node namespace answers on every live pod IP.
	appPort = 8080

	readyTimeout = 2 * time.Minute

	// pollingInterval is the operator's POLLING_INTERVAL in the bed.
	pollingInterval = "2s"
)

var (
	bedOnce sync.Once
	bedErr  error
	theBed  *bed
	stopBed = func() {}
)

// bed is the package's real-traffic test bed with elasti installed from
// manifests/.
type bed struct {
	*realnet.Net
	cluster *localcluster.Cluster
	root    string
	binDir  string
}

// testBed starts the bed once per package. A bed that cannot start fails
// the test loudly; nothing skips.
func testBed(t testing.TB) *bed {
	t.Helper()
	bedOnce.Do(func() {
		theBed, bedErr = startBed(t)
		if bedErr != nil {
			bedErr = fmt.Errorf("the real-traffic test bed could not start, so no traffic test can run: %w", bedErr)
		}
	})
	if bedErr != nil {
		t.Fatal(bedErr)
	}
	return theBed
}

func startBed(t testing.TB) (*bed, error) {
	ctx := context.Background()
	c := clustertest.Get(t)
	root, err := localcluster.RepoRoot()
	if err != nil {
		return nil, err
	}
	b := &bed{cluster: c, root: root}
	if b.binDir, err = os.MkdirTemp("", "elasti-images-"); err != nil {
		return nil, err
	}
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "[traffic] "+format+"\n", args...) }
	logf("building elasti's images (the binaries the manifests' pods run)")
	build := exec.Command("go", "build", "-o", b.binDir+"/", "./cmd/elasti-operator", "./cmd/elasti-resolver")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build: %w\n%s", err, out)
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	b.Net, err = realnet.Start(ctx, realnet.Options{
		Cluster: c,
		Binaries: map[string]string{
			"elasti-operator": filepath.Join(b.binDir, "elasti-operator"),
			"elasti-resolver": filepath.Join(b.binDir, "elasti-resolver"),
			// The late app (lateapp_test.go) is this test binary.
			lateAppImage: self,
		},
		Logf: logf,
	})
	if err != nil {
		return nil, err
	}
	kctx, cancel := context.WithCancel(ctx)
	var stopOnce sync.Once
	stopBed = func() {
		stopOnce.Do(func() {
			cancel()
			b.Close()
			os.RemoveAll(b.binDir)
		})
	}
	// Interrupted, the run still removes its namespaces, veths and route.
	clustertest.OnInterrupt(stopBed)
	kube := kubernetes.NewForConfigOrDie(c.RESTConfig())
	// kwok's app pods: their IPs go on the node's lo while Ready, where
	// one echo server answers for all of them.
	if _, err := b.Network.RunKubelet(kctx, kube, nil); err != nil {
		return nil, err
	}
	if err := startEcho(b); err != nil {
		return nil, err
	}
	logf("kubectl apply -f manifests/")
	if _, err := c.Kubectl(ctx, "apply", "-f", filepath.Join(root, "manifests")); err != nil {
		return nil, err
	}
	// The manifests' default Prometheus is the bed's
	// (realnet.PrometheusURL); poll it every 2 s rather than every 30 s,
	// so that the trigger tests (prometheus_test.go) see a verdict soon.
	// A test's ElastiService without triggers is never idle either way.
	if _, err := c.Kubectl(ctx, "-n", elastiNamespace, "set", "env", "deployment/"+operatorDeployment, "POLLING_INTERVAL="+pollingInterval); err != nil {
		return nil, err
	}
	for _, d := range []string{operatorDeployment, resolverDeployment} {
		if err := b.WaitDeploymentReady(ctx, elastiNamespace, d, readyTimeout); err != nil {
			return nil, err
		}
	}
	logf("elasti is Ready from manifests/")
	return b, nil
}

// echoReply is what the app pods answer: who served the request and what
// it looked like on arrival.
type echoReply struct {
	ServedBy string `json:"servedBy"`
	Host     string `json:"host"`
	Path     string `json:"path"`
}

func startEcho(b *bed) error {
	ln, err := b.Network.Listen("tcp", fmt.Sprintf("0.0.0.0:%d", appPort))
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: countRequests(appHandler()), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return nil
}

// echoHandler is the app pods' HTTP answer: which pod served, and the
// request as it arrived.
func echoHandler(w http.ResponseWriter, r *http.Request) {
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	host := ""
	if local != nil {
		host, _, _ = net.SplitHostPort(local.String())
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(echoReply{ServedBy: host, Host: r.Host, Path: r.URL.Path})
}
