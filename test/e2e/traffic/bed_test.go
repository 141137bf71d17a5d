package traffic

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/elasti-dev/elasti/test/e2e/e2ebed"
	"github.com/elasti-dev/elasti/test/localcluster"
	"github.com/elasti-dev/elasti/test/localcluster/clustertest"
	"github.com/elasti-dev/elasti/test/localcluster/realnet"
)

const (
	elastiNamespace    = e2ebed.ElastiNamespace
	operatorDeployment = e2ebed.OperatorDeployment
	resolverDeployment = e2ebed.ResolverDeployment
	appPort            = e2ebed.AppPort

	readyTimeout = 2 * time.Minute

	// pollingInterval is the operator's POLLING_INTERVAL in the bed.
	pollingInterval = "2s"
)

var (
	theBed  e2ebed.Once[*bed]
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
	return theBed.Get(t, "real-traffic test bed, so no traffic test can run", startBed)
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
	logf := e2ebed.Logf("traffic")
	logf("building elasti's images (the binaries the manifests' pods run)")
	if err := e2ebed.BuildElasti(root, b.binDir, ""); err != nil {
		return nil, err
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
	stopBed = e2ebed.Stopper(func() {
		cancel()
		b.Close()
		os.RemoveAll(b.binDir)
	})
	kube := kubernetes.NewForConfigOrDie(c.RESTConfig())
	if err := e2ebed.ServeApps(kctx, b.Net, kube, countRequests(appHandler())); err != nil {
		return nil, err
	}
	logf("kubectl apply -f manifests/")
	if err := b.installElasti(ctx); err != nil {
		return nil, err
	}
	logf("elasti is Ready from manifests/")
	return b, nil
}

// echoReply is what the app pods answer (echoHandler).
type echoReply = e2ebed.EchoReply

// echoHandler is the app pods' HTTP answer: which pod served, and the
// request as it arrived.
func echoHandler(w http.ResponseWriter, r *http.Request) { e2ebed.Echo(w, r) }

// installElasti applies manifests/, gives the operator the bed's
// POLLING_INTERVAL and waits until elasti is Ready: the bed as startBed
// leaves it, and as a test that took elasti away (the switch from
// KubeElasti) must leave it again. The manifests' default Prometheus is
// the bed's (realnet.PrometheusURL); the bed polls it every 2 s rather
// than the manifests' 30 s, so that the trigger tests
// (prometheus_test.go) see a verdict soon and the slow-wake test its
// scale-down. A test's ElastiService without triggers is never idle
// either way.
func (b *bed) installElasti(ctx context.Context) error {
	if out, err := b.cluster.Kubectl(ctx, "apply", "-f", filepath.Join(b.root, "manifests")); err != nil {
		return fmt.Errorf("kubectl apply -f manifests/: %w\n%s", err, out)
	}
	if out, err := b.cluster.Kubectl(ctx, "-n", elastiNamespace, "set", "env", "deployment/"+operatorDeployment, "POLLING_INTERVAL="+pollingInterval); err != nil {
		return fmt.Errorf("kubectl set env POLLING_INTERVAL: %w\n%s", err, out)
	}
	return e2ebed.WaitElastiReady(ctx, b.Net, readyTimeout)
}

// checkInstalled fails t when the bed's operator does not poll every
// pollingInterval: a test before it left elasti as another install would
// (manifests/' 30 s), and a test that times the idle poller would fail
// for the bed's sake, seemingly at random (CI, 1 Dec 2026: the slow-wake
// test's scale-down came a 30 s poll late, after the switch from
// KubeElasti had reapplied manifests/).
func (b *bed) checkInstalled(t testing.TB) {
	t.Helper()
	d, err := b.Kube.AppsV1().Deployments(elastiNamespace).Get(t.Context(), operatorDeployment, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	polls := "unset"
	for _, env := range d.Spec.Template.Spec.Containers[0].Env {
		if env.Name == "POLLING_INTERVAL" {
			polls = env.Value
		}
	}
	if polls != pollingInterval {
		t.Fatalf("the bed's operator has POLLING_INTERVAL %s, not %s: a test before this one left elasti's install changed", polls, pollingInterval)
	}
}
