package realnode

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"github.com/elasti-dev/elasti/test/localcluster/realnet"
	"github.com/elasti-dev/elasti/test/testenv"
)

const (
	// resolverPort is ELASTI_RESOLVER_PORT in manifests/30-resolver.yaml:
	// the resolver's internal server, with /metrics.
	resolverPort = 8013
	// unschedulableLabel is a node label no node has.
	unschedulableLabel = "elasti.test/no-such-node"
)

// readyResolverPods lists the resolver pods that are Ready and not being
// deleted.
func (b *bed) readyResolverPods(t testing.TB) []corev1.Pod {
	t.Helper()
	pods, err := b.kube.CoreV1().Pods(elastiNamespace).List(t.Context(), metav1.ListOptions{LabelSelector: "app=" + resolverDeployment})
	if err != nil {
		t.Fatal(err)
	}
	var ready []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && testenv.PodReady(&p) {
			ready = append(ready, p)
		}
	}
	return ready
}

// heldPerPod reads each resolver pod's elasti_resolver_queued_requests.
func heldPerPod(ctx context.Context, c *realnet.Client, pods []corev1.Pod) (map[string]int, string) {
	return metricPerPod(ctx, c, pods, "elasti_resolver_queued_requests")
}

// metricPerPod reads the unlabelled gauge metric from each resolver pod's
// /metrics, through a client pod, and says what it read.
func metricPerPod(ctx context.Context, c *realnet.Client, pods []corev1.Pod, metric string) (map[string]int, string) {
	values, desc := metricsPerPod(ctx, c, pods, metric)
	if values == nil {
		return nil, desc
	}
	return values[metric], desc
}

// metricsPerPod reads each of metrics from every resolver pod's /metrics,
// one scrape per pod: by metric, then by pod. nil when a scrape failed.
func metricsPerPod(ctx context.Context, c *realnet.Client, pods []corev1.Pod, metrics ...string) (map[string]map[string]int, string) {
	values := map[string]map[string]int{}
	for _, m := range metrics {
		values[m] = map[string]int{}
	}
	var seen []string
	for _, p := range pods {
		resp, err := c.Do(ctx, realnet.Request{URL: fmt.Sprintf("http://%s:%d/metrics", p.Status.PodIP, resolverPort), Timeout: 10 * time.Second})
		if err != nil || resp.Status != http.StatusOK {
			return nil, fmt.Sprintf("%s's metrics: %v %s", p.Name, err, resp)
		}
		sc := bufio.NewScanner(strings.NewReader(resp.Body))
		for sc.Scan() {
			for _, m := range metrics {
				if v, ok := strings.CutPrefix(sc.Text(), m+" "); ok {
					f, _ := strconv.ParseFloat(v, 64)
					values[m][p.Name] = int(f)
				}
			}
		}
		var of []string
		for _, m := range metrics {
			of = append(of, fmt.Sprint(values[m][p.Name]))
		}
		seen = append(seen, fmt.Sprintf("%s: %s", p.Name, strings.Join(of, "/")))
	}
	return values, strings.Join(metrics, "/") + " per resolver pod: " + strings.Join(seen, ", ")
}

// setTargetSchedulable makes web's new pods unschedulable (false), so a
// wake scales web up but no pod starts and the resolver holds its
// requests, or schedulable again (true).
func setTargetSchedulable(t *testing.T, e *testenv.Env, schedulable bool) {
	t.Helper()
	deployments := e.Kube.AppsV1().Deployments(e.NS)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := deployments.Get(context.WithoutCancel(t.Context()), app, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if schedulable {
			delete(d.Spec.Template.Spec.NodeSelector, unschedulableLabel)
		} else {
			d.Spec.Template.Spec.NodeSelector[unschedulableLabel] = "true"
		}
		_, err = deployments.Update(context.WithoutCancel(t.Context()), d, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// isDrainAnswer is what a resolver answers the requests it holds when it
// shuts down (docs/concepts/resolver.md, "On SIGTERM"): 503, saying so, with a Retry-After.
func isDrainAnswer(r realnet.Response) bool {
	after, err := strconv.Atoi(r.Header.Get("Retry-After"))
	return r.Err == "" && r.Status == http.StatusServiceUnavailable && strings.Contains(r.Body, "shutting down") && err == nil && after >= 1
}

// TestKubeletSIGTERMDrainsHeldRequests: a burst of requests to a sleeping
// Service whose pods cannot start is held by both resolver containers.
// Both resolver pods are deleted, so the kubelet sends each container
// SIGTERM and would SIGKILL it after the manifest's
// terminationGracePeriodSeconds. As docs/concepts/resolver.md says, each resolver fails
// /readyz, waits its shutdown grace, answers every request it holds 503
// with Retry-After, and exits by itself: every request gets that answer
// (a SIGKILL would reset them), and every resolver container ends with
// exit code 0 (a SIGKILL's is 137).
func TestKubeletSIGTERMDrainsHeldRequests(t *testing.T) {
	const n = 20
	b := testBed(t)
	e := testenv.New(t)
	b.sleepingApp(t, e, nil)
	resolvers := b.readyResolverPods(t)
	if len(resolvers) != 2 {
		t.Fatalf("want manifests/' two Ready resolver pods, have %d", len(resolvers))
	}
	t.Cleanup(func() {
		// Later tests need the resolvers again, whatever happened here.
		if err := b.net.WaitDeploymentReady(context.Background(), elastiNamespace, resolverDeployment, readyTimeout); err != nil {
			t.Errorf("the resolver Deployment did not recover: %v", err)
		}
	})
	setTargetSchedulable(t, e, false)
	client, err := b.net.Client(t.Context(), e.NS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)

	var (
		resp    realnet.Response
		respErr error
		done    = make(chan struct{})
	)
	go func() {
		defer close(done)
		resp, respErr = client.Do(t.Context(), realnet.Request{URL: "http://" + app + "/held/{i}", Parallel: n, Timeout: 2 * time.Minute})
	}()
	var held map[string]int
	e.Eventually(fmt.Sprintf("all %d requests to be held", n), func() (bool, string) {
		select {
		case <-done:
			t.Fatalf("the clients finished before all were held: %v, after %s: %s; %s", respErr, resp.Duration.Round(time.Millisecond), burstAnswers(resp),
				b.frontEvidence(t, e))
		default:
		}
		var desc string
		held, desc = heldPerPod(t.Context(), client, resolvers)
		total := 0
		for _, h := range held {
			total += h
		}
		return total == n, desc
	})

	// Watch the resolver pods to see how their containers end: the kubelet
	// writes the terminated state before the pod object goes. An informer,
	// started now from a fresh list: a watch from the pods' own
	// resourceVersion, which is that of their last update, minutes ago
	// when they have run a while, is refused by the apiserver as too old
	// (410 Gone, a Status event the watch's reader took for no pod), and
	// saw nothing of either container (CI, issue 43).
	var (
		mu    sync.Mutex
		exits = map[string]*corev1.ContainerStateTerminated{}
	)
	record := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		for _, st := range p.Status.ContainerStatuses {
			if st.State.Terminated != nil {
				mu.Lock()
				exits[p.Name] = st.State.Terminated.DeepCopy()
				mu.Unlock()
			}
		}
	}
	factory := informers.NewSharedInformerFactoryWithOptions(b.kube, 0, informers.WithNamespace(elastiNamespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = "app=" + resolverDeployment }))
	podInformer := factory.Core().V1().Pods().Informer()
	if _, err := podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: record, UpdateFunc: func(_, obj any) { record(obj) }, DeleteFunc: record,
	}); err != nil {
		t.Fatal(err)
	}
	stopInformer := make(chan struct{})
	factory.Start(stopInformer)
	defer func() { close(stopInformer); factory.Shutdown() }()
	if !cache.WaitForCacheSync(t.Context().Done(), podInformer.HasSynced) {
		t.Fatal("the resolver pods' watch did not sync")
	}
	deleted := time.Now()
	for _, p := range resolvers {
		if err := b.kube.CoreV1().Pods(elastiNamespace).Delete(t.Context(), p.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-done:
	case <-time.After(3 * time.Minute):
		t.Fatal("the clients never finished")
	}
	answered := time.Since(deleted)
	if respErr != nil {
		t.Fatal(respErr)
	}
	if len(resp.Parallel) != n {
		t.Fatalf("%d answers to %d requests", len(resp.Parallel), n)
	}
	for i, r := range resp.Parallel {
		if !isDrainAnswer(r) {
			t.Errorf("request %d: want the draining resolver's 503 with Retry-After, got %s", i, r)
		}
	}
	for _, p := range resolvers {
		e.Eventually(p.Name+" to be gone", func() (bool, string) {
			_, err := b.kube.CoreV1().Pods(elastiNamespace).Get(t.Context(), p.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
	}
	// The watch's events may trail the pods' deletion: wait for them to be
	// read, not only sent.
	e.Eventually("the terminated state of each resolver container", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(exits) >= len(resolvers), fmt.Sprintf("%d of %d seen", len(exits), len(resolvers))
	})
	mu.Lock()
	defer mu.Unlock()
	for _, p := range resolvers {
		exit := exits[p.Name]
		if exit == nil {
			t.Errorf("%s: no terminated state seen for its container", p.Name)
			continue
		}
		t.Logf("%s: exit code %d (%s), ran until %s after the deletion (grace %ds)", p.Name, exit.ExitCode, exit.Reason,
			exit.FinishedAt.Sub(deleted).Round(time.Second), *p.Spec.TerminationGracePeriodSeconds)
		if exit.ExitCode != 0 {
			t.Errorf("%s's container ended with exit code %d (%s), want 0: it did not exit by itself within terminationGracePeriodSeconds",
				p.Name, exit.ExitCode, exit.Reason)
		}
	}
	t.Logf("%d requests held (%v); the last answered %s after the deletion", n, held, answered.Round(time.Millisecond))
	setTargetSchedulable(t, e, true)
}

// TestTargetPodDeletedMidWake: a request at zero wakes the target; its new
// pod's container runs but is not Ready yet (its probe waits a few
// seconds) when the pod is deleted. The resolver never sends the request
// to that pod; the ReplicaSet's replacement starts, and the request is
// answered by it.
func TestTargetPodDeletedMidWake(t *testing.T) {
	b := testBed(t)
	e := testenv.New(t)
	b.sleepingApp(t, e, func(c *corev1.Container) { c.ReadinessProbe.InitialDelaySeconds = 5 })
	client, err := b.net.Client(t.Context(), e.NS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	var (
		resp    realnet.Response
		respErr error
		done    = make(chan struct{})
	)
	go func() {
		defer close(done)
		resp, respErr = client.Do(t.Context(), realnet.Request{URL: "http://" + app + "/", Timeout: 2 * time.Minute})
	}()
	var first corev1.Pod
	e.Eventually("web's new pod to run, not Ready yet", func() (bool, string) {
		select {
		case <-done:
			t.Fatalf("the request finished before the pod ran: %v, %s", respErr, resp)
		default:
		}
		pods, err := e.Kube.CoreV1().Pods(e.NS).List(e.Ctx(), metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil {
			return false, err.Error()
		}
		for _, p := range pods.Items {
			if len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil && !testenv.PodReady(&p) {
				first = p
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d pods", len(pods.Items))
	})
	if err := e.Kube.CoreV1().Pods(e.NS).Delete(t.Context(), first.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(3 * time.Minute):
		t.Fatal("the request never finished")
	}
	if respErr != nil {
		t.Fatal(respErr)
	}
	var reply struct {
		ServedBy string `json:"servedBy"`
	}
	if resp.Status != http.StatusOK || json.Unmarshal([]byte(resp.Body), &reply) != nil {
		t.Fatalf("want web's answer, got %s", resp)
	}
	if reply.ServedBy == first.Name {
		t.Errorf("answered by the deleted pod %s; want its replacement", first.Name)
	}
	// Direct probing may answer from the replacement before the kubelet
	// calls it Ready (its probe's initialDelaySeconds is honoured, and the
	// kubelet's next check can be a period later): it must become web's
	// one Ready pod.
	e.Eventually("the pod that answered to be web's one Ready pod", func() (bool, string) {
		names := readyPodNames(e, app)
		return len(names) == 1 && names[0] == reply.ServedBy, fmt.Sprintf("answered by %s, Ready: %v", reply.ServedBy, names)
	})
	t.Logf("deleted %s mid-wake; answered by %s after %s", first.Name, reply.ServedBy, resp.Duration.Round(time.Millisecond))
	b.checkElastiPods(t)
}

// frontEvidence says where a request to web could have gone: web's
// slices (the resolver slice among them) and the resolver Service's, with
// each endpoint's conditions, and every resolver pod with its address and
// whether it is Ready or being deleted. A burst answered before it was
// held went to an address of these, or to none.
func (b *bed) frontEvidence(t *testing.T, e *testenv.Env) string {
	t.Helper()
	ctx := context.WithoutCancel(t.Context())
	var out strings.Builder
	fmt.Fprintf(&out, "%s's slices: %s", app, testenv.DescribeSlices(e.SlicesFor(app), app))
	resolverSlices, err := b.kube.DiscoveryV1().EndpointSlices(elastiNamespace).List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=" + resolverDeployment})
	if err == nil {
		fmt.Fprintf(&out, "; the resolver Service's: %s", testenv.DescribeSlices(resolverSlices.Items, resolverDeployment))
	}
	pods, err := b.kube.CoreV1().Pods(elastiNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + resolverDeployment})
	if err != nil {
		return out.String() + "; resolver pods: " + err.Error()
	}
	for _, p := range pods.Items {
		fmt.Fprintf(&out, "; resolver pod %s, address %s, being deleted %t", realnet.DescribePod(&p), p.Status.PodIP, p.DeletionTimestamp != nil)
	}
	return out.String()
}

// burstAnswers is each distinct answer of a burst with how many got it,
// for a failure to show what ended its requests.
func burstAnswers(r realnet.Response) string {
	counts := map[string]int{}
	var order []string
	for _, p := range r.Parallel {
		a := p.String()
		if counts[a] == 0 {
			order = append(order, a)
		}
		counts[a]++
	}
	var out []string
	for _, a := range order {
		out = append(out, fmt.Sprintf("%d× %s", counts[a], a))
	}
	if len(out) == 0 {
		return "no answers"
	}
	return strings.Join(out, "; ")
}
