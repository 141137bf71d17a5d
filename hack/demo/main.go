// Command demo is `make demo`: the whole elasti story on the local cluster.
//
// It brings up (or reuses) the local control plane, installs manifests/,
// builds a pod network whose pods really answer, starts the operator and the
// resolver as local processes, applies a sample app, waits for it to go
// idle and scale to zero, then sends a request through the resolver and
// shows the wake. Everything it starts, it stops on exit; the cluster keeps
// running for you to explore (make cluster-down stops it).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	versioned "github.com/elasti-dev/elasti/pkg/generated/clientset/versioned"
	"github.com/elasti-dev/elasti/pkg/localcluster"
	"github.com/elasti-dev/elasti/pkg/localcluster/podnet"
)

const (
	appNamespace = "demo"
	appName      = "hello"
	appPort      = 8080 // the sample app's containerPort
)

func main() {
	hold := flag.Bool("hold", os.Getenv("DEMO_HOLD") == "1", "keep the operator and resolver running after the story, until Ctrl-C")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *hold); err != nil {
		fmt.Fprintf(os.Stderr, "\ndemo failed: %v\n", err)
		os.Exit(1)
	}
}

func step(format string, args ...any) { fmt.Printf("\n==> "+format+"\n", args...) }
func info(format string, args ...any) { fmt.Printf("    "+format+"\n", args...) }

func run(ctx context.Context, hold bool) error {
	root, err := localcluster.RepoRoot()
	if err != nil {
		return err
	}

	step("Starting the local control plane (reused if already running)")
	cluster, err := upCluster(ctx)
	if err != nil {
		return err
	}
	info("KUBECONFIG=%s", cluster.Kubeconfig)
	cfg := cluster.RESTConfig()
	kube := kubernetes.NewForConfigOrDie(cfg)
	elasti := versioned.NewForConfigOrDie(cfg)

	step("Installing elasti: kubectl apply -f manifests/")
	if out, err := cluster.Kubectl(ctx, "apply", "-f", filepath.Join(root, "manifests")); err != nil {
		return err
	} else {
		fmt.Print(indent(string(out)))
	}
	if _, err := cluster.Kubectl(ctx, "wait", "--for=condition=Established", "crd/elastiservices.elasti.truefoundry.com", "--timeout=60s"); err != nil {
		return err
	}

	step("Building a pod network, so pods answer on their IPs (needs root and iproute2)")
	network, err := podnet.Setup(ctx, podnet.Options{Logf: func(f string, a ...any) { info(f, a...) }})
	if err != nil {
		return err
	}
	defer network.Close() // last: nothing dials a pod IP once its route is gone
	kubelet, err := network.RunKubelet(ctx, kube, nil)
	if err != nil {
		return err
	}
	for !kubelet.HasSynced() {
		time.Sleep(20 * time.Millisecond)
	}
	backend, err := network.Listen("tcp", fmt.Sprintf("0.0.0.0:%d", appPort))
	if err != nil {
		return err
	}
	go func() {
		_ = http.Serve(backend, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			host, _, _ := net.SplitHostPort(r.Context().Value(http.LocalAddrContextKey).(net.Addr).String())
			fmt.Fprintf(w, "Hello from pod %s: %s %s\n", host, r.Method, r.URL.Path)
		}))
	}()
	info("the sample app's pods answer on :%d inside namespace %s", appPort, network.Name())

	step("Starting a Prometheus stand-in on loopback that reports no traffic")
	prom, err := listenLoopback()
	if err != nil {
		return err
	}
	go func() {
		_ = http.Serve(prom, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			value := "0" // requests per second: idle
			if strings.HasPrefix(r.URL.Query().Get("query"), "min_over_time(") {
				value = "1" // Prometheus itself has been up
			}
			fmt.Fprintf(w, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[%d,"%s"]}]}}`, time.Now().Unix(), value)
		}))
	}()
	promURL := "http://" + prom.Addr().String()
	info("%s/api/v1/query", promURL)

	step("Building and starting the operator and the resolver as local processes")
	bin := filepath.Join(root, "bin")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin+"/", "./cmd/elasti-operator", "./cmd/elasti-resolver")
	build.Dir, build.Stdout, build.Stderr = root, os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("go build: %w", err)
	}
	scalePort, resolverPort, resolverInternal, opHealth := freePort(), freePort(), freePort(), freePort()
	logDir, err := os.MkdirTemp("", "elasti-demo-")
	if err != nil {
		return err
	}
	operator, err := startProcess(ctx, filepath.Join(logDir, "operator.log"), filepath.Join(bin, "elasti-operator"),
		"--kubeconfig="+cluster.Kubeconfig,
		fmt.Sprintf("--scale-server-bind-address=127.0.0.1:%d", scalePort),
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", opHealth),
		"--metrics-bind-address=0",
		"--polling-interval=2s",
		"--prometheus-server-address="+promURL,
		"--resolver-namespace=elasti", "--resolver-service=elasti-resolver-service",
		"-v=2")
	if err != nil {
		return err
	}
	defer operator.stop()
	resolver, err := startProcess(ctx, filepath.Join(logDir, "resolver.log"), filepath.Join(bin, "elasti-resolver"),
		"--kubeconfig="+cluster.Kubeconfig,
		fmt.Sprintf("--proxy-bind-address=127.0.0.1:%d", resolverPort),
		fmt.Sprintf("--internal-bind-address=127.0.0.1:%d", resolverInternal),
		fmt.Sprintf("--operator-url=http://127.0.0.1:%d", scalePort),
		"-v=2")
	if err != nil {
		return err
	}
	defer resolver.stop()
	for _, url := range []string{fmt.Sprintf("http://127.0.0.1:%d/readyz", opHealth), fmt.Sprintf("http://127.0.0.1:%d/readyz", resolverInternal)} {
		if err := waitHTTP(ctx, url, 60*time.Second); err != nil {
			return fmt.Errorf("%w (logs in %s)", err, logDir)
		}
	}
	info("operator: scale endpoint 127.0.0.1:%d, log %s", scalePort, operator.log)
	info("resolver: proxy 127.0.0.1:%d, log %s", resolverPort, resolver.log)

	step("Applying the sample app: deploy/samples/demo-app.yaml (Deployment, Service, ElastiService)")
	if out, err := cluster.Kubectl(ctx, "apply", "-f", filepath.Join(root, "deploy", "samples", "demo-app.yaml")); err != nil {
		return err
	} else {
		fmt.Print(indent(string(out)))
	}
	es, err := elasti.ElastiV1alpha1().ElastiServices(appNamespace).Get(ctx, appName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if es.Status.Mode == elastiv1alpha1.ModeProxy {
		info("(already idle from an earlier run)")
	}

	step("Waiting for the app to go idle (cooldownPeriod %ds) and scale to zero", es.Spec.CooldownPeriod)
	deadline := time.Now().Add(time.Duration(es.Spec.CooldownPeriod)*time.Second + 2*time.Minute)
	last := ""
	for {
		d, err := kube.AppsV1().Deployments(appNamespace).Get(ctx, appName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		es, err = elasti.ElastiV1alpha1().ElastiServices(appNamespace).Get(ctx, appName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := fmt.Sprintf("replicas=%d ready=%d mode=%s", ptr.Deref(d.Spec.Replicas, 1), d.Status.ReadyReplicas, es.Status.Mode)
		if now != last {
			info("%s  %s", time.Now().Format("15:04:05"), now)
			last = now
		}
		if ptr.Deref(d.Spec.Replicas, 1) == 0 && es.Status.Mode == elastiv1alpha1.ModeProxy {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the app did not scale to zero in time; see %s", operator.log)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	out, _ := cluster.Kubectl(ctx, "-n", appNamespace, "get", "endpointslices", "-l", "kubernetes.io/service-name="+appName)
	info("the Service now points at the resolver:")
	fmt.Print(indent(string(out)))

	step("Sending a request through the resolver with the app's Host header")
	host := fmt.Sprintf("%s.%s.svc.cluster.local", appName, appNamespace)
	info("curl -H 'Host: %s' http://127.0.0.1:%d/", host, resolverPort)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/", resolverPort), nil)
	req.Host = host
	start := time.Now()
	resp, err := (&http.Client{Timeout: 2 * time.Minute}).Do(req)
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	coldStart := time.Since(start)
	info("%s %s", resp.Status, strings.TrimSpace(string(body)))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the request was not served; see %s and %s", operator.log, resolver.log)
	}
	info("cold start: %s from the first byte of the request to the app's answer", coldStart.Round(time.Millisecond))
	d, _ := kube.AppsV1().Deployments(appNamespace).Get(ctx, appName, metav1.GetOptions{})
	es, _ = elasti.ElastiV1alpha1().ElastiServices(appNamespace).Get(ctx, appName, metav1.GetOptions{})
	info("now: replicas=%d mode=%s lastScaledUpTime=%v", ptr.Deref(d.Spec.Replicas, 1), es.Status.Mode, es.Status.LastScaledUpTime)

	kubectl := filepath.Join(cluster.BinDir, "kubectl")
	fmt.Printf(`
Try next (the cluster keeps running):
  export KUBECONFIG=%s
  %s -n demo get elastiservices,deployments,endpointslices
  %s -n demo describe elastiservice hello        # conditions and events
  %s apply -f deploy/samples/kubeelasti-legacy.yaml   # a KubeElasti manifest, unchanged
  DEMO_HOLD=1 make demo                          # keep the operator and resolver up to curl them yourself
  make cluster-down                              # stop the cluster
`, cluster.Kubeconfig, kubectl, kubectl, kubectl)
	if hold {
		fmt.Printf("\nHolding: curl -H 'Host: %s' http://127.0.0.1:%d/   (Ctrl-C to stop)\n", host, resolverPort)
		<-ctx.Done()
	}
	return nil
}

func upCluster(ctx context.Context) (*localcluster.Cluster, error) {
	dir := localcluster.DefaultDir()
	if c, err := localcluster.Load(dir); err == nil && c.Healthy(ctx) == nil {
		return c, nil
	}
	_ = localcluster.StopDir(dir)
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	return localcluster.Start(ctx, localcluster.Options{Dir: dir, Detach: true, Progress: os.Stdout})
}

type process struct {
	cmd *exec.Cmd
	log string
}

func startProcess(ctx context.Context, logPath, bin string, args ...string) (*process, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = cmd.Wait(); f.Close() }()
	return &process{cmd: cmd, log: logPath}, nil
}

// stop asks for a graceful shutdown, as Kubernetes would.
func (p *process) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _, _ = p.cmd.Process.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
	}
}

func listenLoopback() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

func freePort() int {
	l, err := listenLoopback()
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func waitHTTP(ctx context.Context, url string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	var last error
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = errors.New(resp.Status)
		}
		last = err
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not ready after %s: %v", url, limit, last)
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return "    " + strings.Join(lines, "\n    ") + "\n"
}
