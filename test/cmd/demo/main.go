// Command demo is `make demo`: the whole elasti story on the local cluster,
// on the paths real clients take.
//
// It brings up (or reuses) the local control plane and the real-traffic
// test bed (kube-proxy, CoreDNS, the Traefik ingress controller, a real
// Prometheus and a node that really runs pods), builds elasti's images from
// this tree, starts a real node (kubelet, containerd, runc) that imports
// them with the sample app's (hack/sampleapp), installs elasti with
// `kubectl apply -f manifests/` (its Deployments placed on the real node,
// where they run as containers under the manifests' securityContext and
// limits; it prints each elasti pod's image digest and container ID),
// applies a sample app with an Ingress (the app a real container on the
// real node too, which listens 300 ms after its process starts and keeps
// the kubelet's default probe period; its wake group's pods on kwok),
// waits for it to go idle (its request rate, scraped by Prometheus from
// the app's own /metrics, is 0) and scale to zero, its wake group (a
// database StatefulSet and a worker, spec.wakeWith) after it, and wakes it
// twice: once by its short name from a client pod, once through the
// ingress by its public host, each time showing the group waking in
// dependency order, and the new pod's node, its start delay, its
// periodSeconds and the cold start. Only the story is printed; every
// component's log goes to a folder named at the end. Everything it starts
// on this machine it stops on exit; the control plane keeps running for
// you to explore (make cluster-down stops it).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/elasti-dev/elasti/hack/sampleapp/answer"
	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	versioned "github.com/elasti-dev/elasti/pkg/generated/clientset/versioned"
	"github.com/elasti-dev/elasti/pkg/resolver"
	"github.com/elasti-dev/elasti/test/localcluster"
	"github.com/elasti-dev/elasti/test/localcluster/realnet"
	"github.com/elasti-dev/elasti/test/localcluster/realnode"
)

const (
	appNamespace = "demo"
	appName      = "hello"
	// publicHost is the sample Ingress's host (deploy/samples/demo-ingress.yaml).
	publicHost = "hello.example.com"
	// pollingInterval makes the idle check quick enough for a demo.
	pollingInterval = "2s"
)

func main() {
	// A client pod is this binary again, run inside its sandbox.
	realnet.ClientMain()
	hold := flag.Bool("hold", os.Getenv("DEMO_HOLD") == "1", "keep everything running after the story, until Ctrl-C")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logDir, err := os.MkdirTemp("", "elasti-demo-")
	if err == nil {
		err = logToFile(filepath.Join(logDir, "demo.log"))
	}
	if err == nil {
		d := &demo{ctx: ctx, logDir: logDir}
		err = d.run(*hold)
		d.close()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "\ndemo failed: %v\n(logs in %s)\n", err, logDir)
		os.Exit(1)
	}
}

// logToFile sends klog's lines (the test bed's own controllers log
// through it) to path, so the terminal shows only the story.
func logToFile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("alsologtostderr", "false")
	_ = fs.Set("stderrthreshold", "FATAL")
	klog.SetOutput(f)
	return nil
}

func step(format string, args ...any) { fmt.Printf("\n==> "+format+"\n", args...) }
func info(format string, args ...any) { fmt.Printf("    "+format+"\n", args...) }

type demo struct {
	ctx      context.Context
	logDir   string
	root     string
	cluster  *localcluster.Cluster
	net      *realnet.Net
	kube     kubernetes.Interface
	elasti   versioned.Interface
	client   *realnet.Client
	node     *realnode.Node
	stopKwok context.CancelFunc
}

func (d *demo) run(hold bool) error {
	var err error
	if d.root, err = localcluster.RepoRoot(); err != nil {
		return err
	}
	for _, f := range []func() error{d.startCluster, d.startNode, d.install, d.startPrometheus, d.applyApp} {
		if err := f(); err != nil {
			return err
		}
	}
	// The short name, as a client in the app's namespace calls it, and the
	// Ingress's public host: the resolver knows the Service by the port the
	// connection arrives on, whatever the Host says.
	byName := realnet.Request{URL: "http://" + appName + "/"}
	viaIngress := realnet.Request{URL: fmt.Sprintf("http://%s.%s/", realnet.IngressService, realnet.IngressNamespace), Host: publicHost}
	if err := d.showAwake(byName, viaIngress); err != nil {
		return err
	}
	for _, w := range []struct {
		how string
		req realnet.Request
	}{{"by its short name from a client pod", byName}, {"through the ingress controller, by its public host", viaIngress}} {
		if err := d.waitIdle(); err != nil {
			return err
		}
		// The ingress controller follows EndpointSlice changes after a
		// short throttle; until then it would dial the gone pod.
		if err := d.net.WaitIngressFollows(d.ctx, d.client, appNamespace, appName, time.Minute); err != nil {
			return err
		}
		if err := d.wake(w.how, w.req); err != nil {
			return err
		}
	}
	if err := d.pluginStatus(); err != nil {
		return err
	}
	d.summary()
	if hold {
		fmt.Printf("\nHolding everything up (Ctrl-C to stop). From the node's network namespace:\n  ip netns exec %s curl http://<ClusterIP of demo/hello>/\n",
			d.net.Network.Name())
		<-d.ctx.Done()
	}
	return nil
}

func (d *demo) startCluster() error {
	step("Starting the local control plane (reused if already running)")
	dir := localcluster.DefaultDir()
	c, err := localcluster.Load(dir)
	if err != nil || c.Healthy(d.ctx) != nil {
		_ = localcluster.StopDir(dir)
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
		progress, err := os.Create(filepath.Join(d.logDir, "control-plane.log"))
		if err != nil {
			return err
		}
		defer progress.Close()
		info("first start: building or reusing the binaries (progress in %s)", progress.Name())
		if c, err = localcluster.Start(d.ctx, localcluster.Options{Dir: dir, Detach: true, Progress: progress}); err != nil {
			return err
		}
	}
	d.cluster = c
	d.kube = kubernetes.NewForConfigOrDie(c.RESTConfig())
	d.elasti = versioned.NewForConfigOrDie(c.RESTConfig())
	info("KUBECONFIG=%s", c.Kubeconfig)
	return nil
}

func (d *demo) startNode() error {
	step("Starting the real traffic paths: kube-proxy (nftables), CoreDNS, Traefik, Prometheus, a real node (kubelet, containerd, runc) for elasti, CoreDNS, Traefik and the app, and kwok for the app's wake group")
	dir := filepath.Join(d.logDir, "images")
	var tarballs []string
	for _, cmd := range []string{"elasti-operator", "elasti-resolver"} {
		img, err := realnode.BuildElastiImage(d.ctx, d.root, cmd, dir)
		if err != nil {
			return err
		}
		info("built image %s (%s) from this tree", img.Ref, img.ID)
		tarballs = append(tarballs, img.Tarball)
	}
	sample, err := realnode.BuildSampleApp(d.ctx, d.root, dir)
	if err != nil {
		return err
	}
	info("built image %s (%s) of the sample app, hack/sampleapp", sample.Ref, sample.ID)
	tarballs = append(tarballs, sample.Tarball)
	addonImages, err := realnode.BuildAddonImages(d.cluster, dir)
	if err != nil {
		return err
	}
	for _, img := range addonImages {
		info("built image %s (%s) from the bed's binary", img.Ref, img.ID)
		tarballs = append(tarballs, img.Tarball)
	}
	d.net, err = realnet.Start(d.ctx, realnet.Options{
		Cluster:  d.cluster,
		StateDir: filepath.Join(d.logDir, "node"),
		Logf:     func(f string, a ...any) { info(f, a...) },
	})
	if err != nil {
		return err
	}
	progress, err := os.Create(filepath.Join(d.logDir, "realnode.log"))
	if err != nil {
		return err
	}
	defer progress.Close()
	info("starting the real node %s and importing the images (progress in %s)", realnode.NodeName, progress.Name())
	if d.node, err = realnode.Start(d.ctx, realnode.Options{Cluster: d.cluster, Net: d.net, Images: tarballs, Progress: progress}); err != nil {
		return err
	}
	info("moving CoreDNS and Traefik from processes onto %s as containers (a rolling update: both keep answering)", realnode.NodeName)
	if err := d.node.RunAddons(d.ctx, d.kube); err != nil {
		return err
	}
	// kwok runs the app's wake group: a database and a worker that serve
	// nothing, so pods that are Ready at once show the order alone.
	kctx, cancel := context.WithCancel(d.ctx)
	d.stopKwok = cancel
	_, err = d.net.Network.RunKubelet(kctx, d.kube, nil)
	return err
}

func (d *demo) install() error {
	step("Installing elasti: kubectl apply -f manifests/ (its Deployments placed on the real node)")
	out, err := d.node.InstallManifests(d.ctx, d.cluster, d.kube, filepath.Join(d.root, "manifests"))
	fmt.Print(indent(out))
	if err != nil {
		return err
	}
	info("the operator and resolver run as real containers, under the manifests' securityContext and limits; waiting for their readiness probes")
	return d.waitElasti()
}

func (d *demo) waitElasti() error {
	for _, name := range []string{"elasti-operator-controller-manager", "elasti-resolver"} {
		if err := d.net.WaitDeploymentReady(d.ctx, "elasti", name, 3*time.Minute); err != nil {
			return err
		}
	}
	out, err := d.cluster.Kubectl(d.ctx, "-n", "elasti", "get", "pods", "-o", "wide")
	if err != nil {
		return err
	}
	fmt.Print(indent(string(out)))
	pods, err := d.kube.CoreV1().Pods("elasti").List(d.ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		for _, st := range p.Status.ContainerStatuses {
			info("%s on %s: image %s", p.Name, p.Spec.NodeName, st.ImageID)
			info("%s container %s", strings.Repeat(" ", len(p.Name)), st.ContainerID)
		}
	}
	return nil
}

// startPrometheus shows the bed's Prometheus, which the manifests'
// default PROMETHEUS_TRIGGER_SERVER_ADDRESS already names, and shortens the
// operator's polling interval for the demo.
func (d *demo) startPrometheus() error {
	step("The operator queries the cluster's Prometheus (%s), which scrapes the pods through Kubernetes service discovery", realnet.PrometheusURL)
	args := []string{"-n", "elasti", "set", "env", "deployment/elasti-operator-controller-manager", "POLLING_INTERVAL=" + pollingInterval}
	info("kubectl %s", strings.Join(args, " "))
	if _, err := d.cluster.Kubectl(d.ctx, args...); err != nil {
		return err
	}
	return d.waitElasti()
}

func (d *demo) applyApp() error {
	step("Applying the sample app and its Ingress: deploy/samples/demo-app.yaml, demo-ingress.yaml")
	for _, f := range []string{"demo-app.yaml", "demo-ingress.yaml"} {
		out, err := d.cluster.Kubectl(d.ctx, "apply", "-f", filepath.Join(d.root, "deploy", "samples", f))
		if err != nil {
			return err
		}
		fmt.Print(indent(string(out)))
	}
	// The sample names the real node and the sample app's image as
	// literals, for a reader; they must be what this bed runs.
	dep, err := d.kube.AppsV1().Deployments(appNamespace).Get(d.ctx, appName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	spec := dep.Spec.Template.Spec
	if spec.NodeSelector[corev1.LabelHostname] != realnode.NodeName || !slices.Contains(spec.Tolerations, realnode.Toleration()) ||
		len(spec.Containers) == 0 || spec.Containers[0].Image != realnode.SampleAppImage {
		return fmt.Errorf("deploy/samples/demo-app.yaml: %s must run %s on %s (nodeSelector %s, toleration %s)",
			appName, realnode.SampleAppImage, realnode.NodeName, corev1.LabelHostname, realnode.TaintKey)
	}
	d.client, err = d.net.Client(d.ctx, appNamespace)
	return err
}

// showAwake waits until the app answers by name and through the ingress.
func (d *demo) showAwake(reqs ...realnet.Request) error {
	step("While the app is up, a client pod in namespace %s reaches it straight", appNamespace)
	for _, req := range reqs {
		info("%s", curl(req))
		deadline := time.Now().Add(2 * time.Minute)
		for {
			req.Timeout = 3 * time.Second
			resp, err := d.client.Do(d.ctx, req)
			if err != nil {
				return err
			}
			if resp.Status == http.StatusOK {
				info("→ %d %s", resp.Status, strings.TrimSpace(resp.Body))
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("the app did not answer: %s", resp)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	return nil
}

func curl(req realnet.Request) string {
	if req.Host != "" {
		return fmt.Sprintf("curl -H 'Host: %s' %s", req.Host, req.URL)
	}
	return "curl " + req.URL
}

// waitIdle waits for the operator to scale the app to zero and put the
// resolver in front.
func (d *demo) waitIdle() error {
	es, err := d.elasti.ElastiV1alpha1().ElastiServices(appNamespace).Get(d.ctx, appName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	step("Waiting for the app to go idle (cooldownPeriod %ds) and scale to zero", es.Spec.CooldownPeriod)
	query := triggerQuery(es)
	info("its trigger, asked of Prometheus: %s (idle below %s)", query, triggerThreshold(es))
	deadline := time.Now().Add(time.Duration(es.Spec.CooldownPeriod)*time.Second + 2*time.Minute)
	last, lastValue := "", ""
	for {
		dep, err := d.kube.AppsV1().Deployments(appNamespace).Get(d.ctx, appName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if es, err = d.elasti.ElastiV1alpha1().ElastiServices(appNamespace).Get(d.ctx, appName, metav1.GetOptions{}); err != nil {
			return err
		}
		mode := es.Status.Mode
		if mode == "" {
			mode = "(not yet reconciled)"
		}
		now := fmt.Sprintf("replicas=%d ready=%d mode=%s", ptr.Deref(dep.Spec.Replicas, 1), dep.Status.ReadyReplicas, mode)
		value := d.queryValue(query)
		if now != last || value != lastValue {
			info("%s  %s  request rate=%s", time.Now().Format("15:04:05"), now, value)
			last, lastValue = now, value
		}
		if ptr.Deref(dep.Spec.Replicas, 1) == 0 && es.Status.Mode == elastiv1alpha1.ModeProxy && d.groupAsleep(es) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the app did not scale to zero in time")
		}
		select {
		case <-d.ctx.Done():
			return d.ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	out, _ := d.cluster.Kubectl(d.ctx, "-n", appNamespace, "get", "endpointslices", "-l", "kubernetes.io/service-name="+appName)
	info("the Service now points at the resolver pods, on the resolver port the operator gave its port 80:")
	fmt.Print(indent(string(out)))
	for _, p := range es.Status.ResolverPorts {
		info("status.resolverPorts: Service %s port %d (%s) → resolver port %d", p.Service, p.Port, p.Name, p.ResolverPort)
	}
	return nil
}

// triggerQuery and triggerThreshold read the ElastiService's first
// trigger, to show its value as Prometheus computes it.
func triggerQuery(es *elastiv1alpha1.ElastiService) string {
	var md struct {
		Query string `json:"query"`
	}
	if len(es.Spec.Triggers) > 0 {
		_ = json.Unmarshal(es.Spec.Triggers[0].Metadata, &md)
	}
	return md.Query
}

func triggerThreshold(es *elastiv1alpha1.ElastiService) string {
	var md struct {
		Threshold string `json:"threshold"`
	}
	if len(es.Spec.Triggers) > 0 {
		_ = json.Unmarshal(es.Spec.Triggers[0].Metadata, &md)
	}
	return md.Threshold
}

// queryValue asks Prometheus for query's value from the client pod, as
// the operator's pod does, rounded for display; "?" if it has none.
func (d *demo) queryValue(query string) string {
	resp, err := d.client.Do(d.ctx, realnet.Request{
		URL: realnet.PrometheusURL + "/api/v1/query?" + url.Values{"query": {query}}.Encode(), Timeout: 5 * time.Second})
	if err != nil || resp.Status != http.StatusOK {
		return "?"
	}
	var r struct {
		Data struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if json.Unmarshal([]byte(resp.Body), &r) != nil || len(r.Data.Result) != 1 {
		return "?"
	}
	v, err := strconv.ParseFloat(fmt.Sprint(r.Data.Result[0].Value[1]), 64)
	if err != nil {
		return "?"
	}
	return strconv.FormatFloat(v, 'f', 2, 64) + "/s"
}

// wake sends req while the app is at zero and shows the answer from a new
// pod.
func (d *demo) wake(how string, req realnet.Request) error {
	step("Waking the app %s", how)
	info("%s", curl(req))
	req.Timeout = 2 * time.Minute
	order := d.watchGroup()
	resp, err := d.client.Do(d.ctx, req)
	order.stop()
	if err != nil {
		return err
	}
	if resp.Status != http.StatusOK {
		return fmt.Errorf("the request was not served: %s", resp)
	}
	info("→ %d %s", resp.Status, strings.TrimSpace(resp.Body))
	if err := d.showPod(resp); err != nil {
		return err
	}
	info("cold start: %s from the client's request to the new pod's answer (the resolver held it %s, says its %s header)",
		resp.Duration.Round(time.Millisecond), resp.Header.Get(resolver.DefaultColdStartHeader), resolver.DefaultColdStartHeader)
	dep, err := d.kube.AppsV1().Deployments(appNamespace).Get(d.ctx, appName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	info("now: replicas=%d", ptr.Deref(dep.Spec.Replicas, 1))
	order.show()
	return nil
}

// showPod prints where the answer's pod ran and how it started: its node,
// its start delay and its readiness probe's periodSeconds (the sample
// app's answer names its pod), and, from the app's own clock, how long
// after listening its readiness path first answered 200 and how long
// after that the held request arrived.
func (d *demo) showPod(resp realnet.Response) error {
	var reply answer.Reply
	if err := json.Unmarshal([]byte(resp.Body), &reply); err != nil || reply.ServedBy == "" {
		return fmt.Errorf("not the sample app's answer (%v): %s", err, resp)
	}
	pod, err := d.kube.CoreV1().Pods(appNamespace).Get(d.ctx, reply.ServedBy, metav1.GetOptions{})
	if err != nil {
		return err
	}
	period := "none"
	if len(pod.Spec.Containers) > 0 && pod.Spec.Containers[0].ReadinessProbe != nil {
		period = fmt.Sprintf("%ds", pod.Spec.Containers[0].ReadinessProbe.PeriodSeconds)
	}
	node := pod.Spec.NodeName
	if len(pod.Status.ContainerStatuses) > 0 {
		node += ", " + pod.Status.ContainerStatuses[0].ContainerID
	}
	info("the new pod %s: a real container on %s", pod.Name, node)
	info("  it listened %s after its process started (start delay %s); readiness probe every %s (periodSeconds)",
		reply.ListenedAfter().Round(time.Millisecond), reply.ListenDelay, period)
	info("  its readiness path first answered 200 %s after it listened, to the %s's check; the held request reached it %s after that",
		reply.ReadyAfterListening().Round(time.Millisecond), reply.FirstReadyBy, reply.BeyondReady().Round(time.Millisecond))
	return nil
}

// member is one workload of the app's wake group, as the demo shows it.
type member struct{ kind, name string }

// group is the app's wake group in wake order: spec.wakeWith, then the
// target.
func (d *demo) group() ([]member, error) {
	es, err := d.elasti.ElastiV1alpha1().ElastiServices(appNamespace).Get(d.ctx, appName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var out []member
	for _, w := range es.Spec.WakeWith {
		out = append(out, member{w.Ref().Kind, w.Name})
	}
	return append(out, member{elastiv1alpha1.KindDeployment, appName}), nil
}

// replicas reads a group member's spec.replicas and ready replicas.
func (d *demo) replicas(m member) (int32, int32, error) {
	if m.kind == elastiv1alpha1.KindStatefulSet {
		st, err := d.kube.AppsV1().StatefulSets(appNamespace).Get(d.ctx, m.name, metav1.GetOptions{})
		if err != nil {
			return 0, 0, err
		}
		return ptr.Deref(st.Spec.Replicas, 1), st.Status.ReadyReplicas, nil
	}
	dep, err := d.kube.AppsV1().Deployments(appNamespace).Get(d.ctx, m.name, metav1.GetOptions{})
	if err != nil {
		return 0, 0, err
	}
	return ptr.Deref(dep.Spec.Replicas, 1), dep.Status.ReadyReplicas, nil
}

// groupAsleep reports whether every dependency of es is at zero too, and
// says so once.
func (d *demo) groupAsleep(es *elastiv1alpha1.ElastiService) bool {
	for _, w := range es.Spec.WakeWith {
		r, _, err := d.replicas(member{w.Ref().Kind, w.Name})
		if err != nil || r > 0 {
			return false
		}
	}
	if len(es.Spec.WakeWith) > 0 {
		info("its wake group sleeps after it: %d dependencies at zero", len(es.Spec.WakeWith))
	}
	return true
}

// wakeOrder records, while a wake is under way, when each member of the
// group was first seen scaled up and first seen Ready.
type wakeOrder struct {
	mu      sync.Mutex // guards scaled and ready, written by the watch
	start   time.Time
	members []member
	scaled  []time.Duration
	ready   []time.Duration
	done    chan struct{}
	stopped chan struct{}
}

// watchGroup polls the group every 20ms until stop.
func (d *demo) watchGroup() *wakeOrder {
	o := &wakeOrder{start: time.Now(), done: make(chan struct{}), stopped: make(chan struct{})}
	o.members, _ = d.group()
	o.scaled = make([]time.Duration, len(o.members))
	o.ready = make([]time.Duration, len(o.members))
	go func() {
		defer close(o.stopped)
		for {
			for i, m := range o.members {
				r, ready, err := d.replicas(m)
				if err != nil {
					continue
				}
				o.mu.Lock()
				if o.scaled[i] == 0 && r > 0 {
					o.scaled[i] = time.Since(o.start)
				}
				if o.ready[i] == 0 && r > 0 && ready >= r {
					o.ready[i] = time.Since(o.start)
				}
				o.mu.Unlock()
			}
			select {
			case <-o.done:
				return
			case <-d.ctx.Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return o
}

// stop ends the watch once every member was seen Ready, or after
// readySeenWithin: the answer can come before the target's own status
// shows the pod Ready, and an unseen Ready must not print as +0s.
func (o *wakeOrder) stop() {
	deadline := time.Now().Add(readySeenWithin)
	for time.Now().Before(deadline) && slices.Contains(o.seenReady(), false) {
		time.Sleep(20 * time.Millisecond)
	}
	close(o.done)
	<-o.stopped
}

// readySeenWithin bounds stop's wait for the last Ready.
const readySeenWithin = 10 * time.Second

// seenReady says, per member, whether it was seen Ready yet.
func (o *wakeOrder) seenReady() []bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	seen := make([]bool, len(o.ready))
	for i, r := range o.ready {
		seen[i] = r > 0
	}
	return seen
}

// show prints the group in wake order, with when each was scaled and Ready.
func (o *wakeOrder) show() {
	if len(o.members) < 2 {
		return
	}
	info("the wake group, in dependency order (each Ready before the next is scaled), after the request:")
	for i, m := range o.members {
		ready := "not seen Ready"
		if o.ready[i] > 0 {
			ready = "Ready +" + o.ready[i].Round(time.Millisecond).String()
		}
		info("  %d. %-11s %-13s scaled +%-7s %s", i+1, m.kind, m.name, o.scaled[i].Round(time.Millisecond), ready)
	}
}

// pluginStatus builds the kubectl plugin from this tree and shows what it
// reports after the two wakes: mode, replicas, last wake, the cold-start
// median and the time asleep, read from the ElastiService's status.
func (d *demo) pluginStatus() error {
	step("kubectl elasti status: what slept, for how long, and how fast it woke")
	bin := filepath.Join(d.logDir, "kubectl-elasti")
	build := exec.CommandContext(d.ctx, "go", "build", "-o", bin, "./cmd/kubectl-elasti")
	build.Dir = d.root
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build the kubectl plugin: %w\n%s", err, out)
	}
	status := exec.CommandContext(d.ctx, bin, "status", "-n", appNamespace, "-o", "wide")
	status.Env = append(os.Environ(), "KUBECONFIG="+d.cluster.Kubeconfig)
	out, err := status.CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubectl elasti status: %w\n%s", err, out)
	}
	fmt.Print(indent(string(out)))
	info("(the plugin is built by make build as bin/kubectl-elasti; see docs/reference/kubectl-elasti.md)")
	return nil
}

func (d *demo) summary() {
	kubectl := filepath.Join(d.cluster.BinDir, "kubectl")
	fmt.Printf(`
Logs of everything the demo ran: %s
  (node/pods/logs: CoreDNS, Traefik and Prometheus; kubelet.log and containerd.log: the real node that ran the
   operator, the resolver and the app; node/kube-proxy.log; demo.log)

Try next. The control plane keeps running, but the demo stops the real node and the
node network when it exits, so elasti's own pods show Pending afterwards; run with
DEMO_HOLD=1 to keep them running while you look:
  export KUBECONFIG=%s
  %s -n demo get elastiservices,deployments,endpointslices,ingress
  %s -n demo describe elastiservice hello        # conditions and events
  %s apply -f deploy/samples/kubeelasti-legacy.yaml   # a KubeElasti manifest, unchanged
  DEMO_HOLD=1 make demo                          # keep the pods and the node network up
  make cluster-down                              # stop the control plane
`, d.logDir, d.cluster.Kubeconfig, kubectl, kubectl, kubectl)
}

func (d *demo) close() {
	if d.client != nil {
		d.client.Close()
	}
	if d.stopKwok != nil {
		d.stopKwok()
	}
	if d.node != nil {
		// Stop removes the node's directory; keep its logs with the rest.
		for _, f := range []string{realnode.KubeletLog(), realnode.ContainerdLog()} {
			if data, err := os.ReadFile(f); err == nil {
				_ = os.WriteFile(filepath.Join(d.logDir, filepath.Base(f)), data, 0o644)
			}
		}
		d.node.Stop()
	}
	if d.net != nil {
		d.net.Close()
	}
	// The images (tens of MB) are rebuilt by every run; only the logs are
	// worth keeping.
	_ = os.RemoveAll(filepath.Join(d.logDir, "images"))
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return "    " + strings.Join(lines, "\n    ") + "\n"
}
