package realnode

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/test/localcluster/realnet"
	"github.com/elasti-dev/elasti/test/testenv"
)

const (
	// fleetSize is how many sleeping Services the limits test routes
	// besides web: with web, 1,000, which is also the resolver ports one
	// namespace may hold (--resolver-ports-per-namespace), so every one
	// has a port of its own.
	fleetSize = 999
	// fleetWorkers bounds how many creations are in flight at once, so a
	// loaded apiserver is not flooded.
	fleetWorkers = 8
	// fleetTimeout bounds the fleet's creation and its switch to proxy.
	fleetTimeout = 15 * time.Minute
	// burstSize requests are held at once, below --per-source-queue (250)
	// for the one client address.
	burstSize = 200
	// burstBody is each held request's body: buffered by the resolver,
	// below --max-buffered-body, 6.4 MB in all.
	burstBody = 32 << 10
)

// largestProbeResponse is a probeResponse at every bound the CRD and the
// operator's validation accept: maxItems rules, every list at its
// maxItems, every string at its maxLength in two-byte characters, and a
// regular expression in each rule's first header that together spend all
// but a little of the per-ElastiService budget.
func largestProbeResponse() []elastiv1alpha1.ProbeResponseRule {
	str := func(n int) string { return strings.Repeat("é", n) }
	match := func() elastiv1alpha1.NameValueMatch {
		return elastiv1alpha1.NameValueMatch{Name: str(elastiv1alpha1.MaxProbeNameLength), Type: elastiv1alpha1.MatchExact, Value: str(elastiv1alpha1.MaxProbeValueLength)}
	}
	var rules []elastiv1alpha1.ProbeResponseRule
	for range elastiv1alpha1.MaxProbeRules {
		r := elastiv1alpha1.ProbeResponseRule{
			Method:   str(elastiv1alpha1.MaxProbeMethodLength),
			Path:     &elastiv1alpha1.PathMatch{Type: elastiv1alpha1.MatchPathPrefix, Value: str(elastiv1alpha1.MaxProbeValueLength)},
			Response: elastiv1alpha1.ProbeCannedAnswer{Status: elastiv1alpha1.MaxProbeStatus, Body: str(elastiv1alpha1.MaxProbeBodyLength)},
		}
		for range elastiv1alpha1.MaxProbeMatches {
			r.Headers = append(r.Headers, match())
			r.QueryParams = append(r.QueryParams, match())
		}
		r.Headers[0] = elastiv1alpha1.NameValueMatch{Name: "User-Agent", Type: elastiv1alpha1.MatchRegularExpression, Value: `kube-probe/.*`}
		rules = append(rules, r)
	}
	return rules
}

// sleepingFleet creates n Deployments at zero replicas, their Services and
// an ElastiService each with the largest probeResponse, fleetWorkers at a
// time, and returns their names. The Deployments are never scaled up:
// their pods are the kwok node's, and no request reaches them.
func (b *bed) sleepingFleet(t *testing.T, e *testenv.Env, n int) []string {
	t.Helper()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("fleet-%04d", i)
	}
	rules := largestProbeResponse()
	ctx, cancel := context.WithTimeout(t.Context(), fleetTimeout)
	defer cancel()
	work := make(chan string)
	errs := make(chan error, fleetWorkers)
	var wg sync.WaitGroup
	for range fleetWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range work {
				if err := createSleeping(ctx, e, name, rules); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var firstErr error
feed:
	for _, name := range names {
		select {
		case work <- name:
		case firstErr = <-errs:
			break feed
		}
	}
	close(work)
	wg.Wait()
	if firstErr == nil {
		select {
		case firstErr = <-errs:
		default:
		}
	}
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	return names
}

// createSleeping creates name's Deployment at zero, its Service and its
// ElastiService with rules.
func createSleeping(ctx context.Context, e *testenv.Env, name string, rules []elastiv1alpha1.ProbeResponseRule) error {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.NS},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: testenv.PodTemplate(name),
		},
	}
	if _, err := e.Kube.AppsV1().Deployments(e.NS).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("deployment %s: %w", name, err)
	}
	if err := e.CreateService(name, name); err != nil {
		return fmt.Errorf("service %s: %w", name, err)
	}
	es := &elastiv1alpha1.ElastiService{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.NS},
		Spec: elastiv1alpha1.ElastiServiceSpec{
			Service:           name,
			ScaleTargetRef:    elastiv1alpha1.ScaleTargetRef{APIVersion: elastiv1alpha1.APIVersionApps, Kind: elastiv1alpha1.KindDeployment, Name: name},
			MinTargetReplicas: 1,
			CooldownPeriod:    60,
			ProbeResponse:     rules,
		},
	}
	if _, err := e.Elasti.ElastiV1alpha1().ElastiServices(e.NS).Create(ctx, es, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("elastiservice %s: %w", name, err)
	}
	return nil
}

// checkNoOOMKill asserts that no elasti container was ever killed: none
// restarted (checkElastiPods) and none has a terminated last state, which
// is where the kubelet records an OOMKilled container before it restarts
// it.
func (b *bed) checkNoOOMKill(t *testing.T) {
	t.Helper()
	pods, err := b.kube.CoreV1().Pods(elastiNamespace).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		for _, c := range p.Spec.Containers {
			if c.Resources.Limits.Memory().IsZero() {
				t.Errorf("pod %s container %s has no memory limit; manifests/ give one", p.Name, c.Name)
			}
		}
		for _, st := range p.Status.ContainerStatuses {
			if last := st.LastTerminationState.Terminated; last != nil {
				t.Errorf("pod %s container %s was terminated before: %s (exit code %d)", p.Name, st.Name, last.Reason, last.ExitCode)
			}
			if st.State.Running == nil {
				t.Errorf("pod %s container %s is not running: %s", p.Name, st.Name, realnet.DescribePod(&p))
			}
		}
	}
	b.checkElastiPods(t)
}

// TestElastiWithinManifestLimitsOnTheRealNode: elasti's operator and
// resolver, as real containers under manifests/' memory limits (enforced
// by the kernel's cgroup: past the limit the container is OOM-killed and
// restarted), take 999 sleeping Services, each ElastiService with the
// largest probeResponse the CRD and validation accept, all switched to
// proxy mode and routed by every resolver pod, then a held burst of
// requests with buffered bodies to a 1,000th sleeping Service, held until
// its pod can start and then all answered by it. No elasti container
// restarted or was OOM-killed; every one still runs its first container,
// its cgroup's OOM-kill count is 0, and its process can write nowhere but
// /tmp and the kubelet's files.
func TestElastiWithinManifestLimitsOnTheRealNode(t *testing.T) {
	b := testBed(t)
	e := testenv.New(t)
	resolvers := b.readyResolverPods(t)
	if len(resolvers) != 2 {
		t.Fatalf("want manifests/' two Ready resolver pods, have %d", len(resolvers))
	}
	client, err := b.net.Client(t.Context(), e.NS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	listenersBefore := settledListeners(t, e, client, resolvers)

	start := time.Now()
	fleet := b.sleepingFleet(t, e, fleetSize)
	t.Logf("created %d sleeping Services with the largest specs in %s", len(fleet), time.Since(start).Round(time.Second))
	e.EventuallyWithin(fmt.Sprintf("all %d ElastiServices in proxy mode", len(fleet)), fleetTimeout, func() (bool, string) {
		list, err := e.Elasti.ElastiV1alpha1().ElastiServices(e.NS).List(e.Ctx(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		proxy := 0
		for _, es := range list.Items {
			if es.Status.Mode == elastiv1alpha1.ModeProxy {
				proxy++
			}
		}
		return proxy == len(fleet), fmt.Sprintf("%d of %d in proxy mode", proxy, len(list.Items))
	})
	// Each resolver pod listens on one port per Service port it fronts:
	// the fleet's routes.
	e.EventuallyWithin("every resolver pod to listen for the whole fleet", fleetTimeout, func() (bool, string) {
		now, desc := metricPerPod(t.Context(), client, resolvers, "elasti_resolver_port_listeners")
		if now == nil {
			return false, desc
		}
		for _, p := range resolvers {
			if now[p.Name]-listenersBefore[p.Name] < len(fleet) {
				return false, desc
			}
		}
		return true, desc
	})
	t.Logf("the fleet is in proxy mode and routed after %s", time.Since(start).Round(time.Second))
	b.checkNoOOMKill(t)

	// A held burst on top of the fleet's routes.
	b.sleepingApp(t, e, nil)
	setTargetSchedulable(t, e, false)
	var (
		resp    realnet.Response
		respErr error
		done    = make(chan struct{})
	)
	go func() {
		defer close(done)
		resp, respErr = client.Do(t.Context(), realnet.Request{Method: http.MethodPost, URL: "http://" + app + "/held/{i}",
			Body: strings.Repeat("b", burstBody), Parallel: burstSize, Timeout: 3 * time.Minute})
	}()
	e.EventuallyWithin(fmt.Sprintf("all %d requests to be held", burstSize), 2*time.Minute, func() (bool, string) {
		select {
		case <-done:
			t.Fatalf("the clients finished before all were held: %v, %s", respErr, resp)
		default:
		}
		held, desc := metricPerPod(t.Context(), client, resolvers, "elasti_resolver_queued_requests")
		total := 0
		for _, h := range held {
			total += h
		}
		return total == burstSize, desc
	})
	b.checkNoOOMKill(t)
	setTargetSchedulable(t, e, true)
	select {
	case <-done:
	case <-time.After(4 * time.Minute):
		t.Fatal("the clients never finished")
	}
	if respErr != nil {
		t.Fatal(respErr)
	}
	if len(resp.Parallel) != burstSize {
		t.Fatalf("%d answers to %d requests", len(resp.Parallel), burstSize)
	}
	failed := 0
	for i, r := range resp.Parallel {
		if r.Err != "" || r.Status != http.StatusOK || !strings.Contains(r.Body, "servedBy") {
			if failed++; failed <= 5 {
				t.Errorf("request %d: want web's answer, got %s", i, r)
			}
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d held requests not answered by web", failed, burstSize)
	}
	if now, desc := metricPerPod(t.Context(), client, resolvers, "elasti_resolver_port_listeners"); now != nil {
		for _, p := range resolvers {
			if now[p.Name]-listenersBefore[p.Name] < fleetSize+1 {
				t.Errorf("%s listens on fewer than the %d Services' ports: %s", p.Name, fleetSize+1, desc)
			}
		}
	}
	b.checkNoOOMKill(t)
	b.checkElastiContainersInKernel(t)
}

// writableMounts are the mount points where an elasti container may write,
// besides the kernel's pseudo filesystems: manifests/' /tmp emptyDir, and
// the files the kubelet mounts into every container.
var writableMounts = map[string]bool{
	"/tmp": true, "/etc/hosts": true, "/etc/hostname": true, "/etc/resolv.conf": true, "/dev/termination-log": true,
}

// pseudoFS are the filesystem types that hold no file on any disk. tmpfs
// is among them: in a container its mounts are /dev, runc's masks over
// /proc paths and the cgroup mount point, all root's and gone with the
// container, and what a tmpfs holds is charged to the container's own
// memory cgroup.
var pseudoFS = map[string]bool{
	"proc": true, "sysfs": true, "devpts": true, "mqueue": true, "cgroup": true, "cgroup2": true, "tmpfs": true,
}

// checkElastiContainersInKernel reads each elasti container from the
// host's side, where the kernel keeps what runc set up: its memory cgroup
// carries the manifest's limit and never OOM-killed a process
// (memory.oom_control's oom_kill), and its process sees a read-only root
// with nothing writable but /tmp and the kubelet's files, so it writes
// nothing outside /tmp. It logs each container's peak memory.
func (b *bed) checkElastiContainersInKernel(t *testing.T) {
	t.Helper()
	pods, err := b.kube.CoreV1().Pods(elastiNamespace).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		for i, st := range p.Status.ContainerStatuses {
			name := p.Name + "/" + st.Name
			cg := containerMemoryCgroup(&p, st.ContainerID)
			read := func(file string) string {
				data, err := os.ReadFile(filepath.Join(cg, file))
				if err != nil {
					t.Errorf("%s: the container's memory cgroup: %v", name, err)
				}
				return string(data)
			}
			limit := p.Spec.Containers[i].Resources.Limits.Memory()
			if got := strings.TrimSpace(read("memory.limit_in_bytes")); got != strconv.FormatInt(limit.Value(), 10) {
				t.Errorf("%s: memory.limit_in_bytes = %s, want the manifest's %s", name, got, limit)
			}
			if oom := read("memory.oom_control"); !strings.Contains(oom, "\noom_kill 0") {
				t.Errorf("%s: the kernel OOM-killed in its cgroup: %s", name, oom)
			}
			peak, _ := strconv.ParseInt(strings.TrimSpace(read("memory.max_usage_in_bytes")), 10, 64)
			t.Logf("%s: peak memory %d MiB of its %s limit", name, peak>>20, limit)

			procs := strings.Fields(read("cgroup.procs"))
			if len(procs) == 0 {
				t.Errorf("%s: no process in %s", name, cg)
				continue
			}
			mounts, err := os.ReadFile(filepath.Join("/proc", procs[0], "mounts"))
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			for _, l := range strings.Split(string(mounts), "\n") {
				f := strings.Fields(l)
				if len(f) < 4 || pseudoFS[f[2]] {
					continue
				}
				rw := slices.Contains(strings.Split(f[3], ","), "rw")
				switch {
				case f[1] == "/" && rw:
					t.Errorf("%s: its root is mounted %s, want read-only", name, f[3])
				case rw && !writableMounts[f[1]] && !strings.HasPrefix(f[1], "/dev"):
					t.Errorf("%s: %s (%s) is writable: %s", name, f[1], f[2], l)
				}
			}
		}
	}
}

// containerMemoryCgroup is where the real node's kubelet puts a
// container's memory cgroup (cgroup v1, cgroupfs driver, under the node's
// own root).
func containerMemoryCgroup(p *corev1.Pod, containerID string) string {
	root := "/sys/fs/cgroup/memory/elasti-realnode/kubepods"
	cid := strings.TrimPrefix(containerID, "containerd://")
	if p.Status.QOSClass == corev1.PodQOSGuaranteed {
		return filepath.Join(root, "pod"+string(p.UID), cid)
	}
	return filepath.Join(root, strings.ToLower(string(p.Status.QOSClass)), "pod"+string(p.UID), cid)
}

// listenersSettle is how long the listener counts must hold still.
const listenersSettle = 3 * time.Second

// settledListeners returns each resolver pod's port listeners once the
// package's earlier tests are gone: their namespaces are deleted as they
// end, so their ElastiServices, and the listeners for them, may still be
// going away when this test starts. Counting the fleet's listeners as a
// difference from a count that is still falling would never reach the
// fleet's size.
func settledListeners(t *testing.T, e *testenv.Env, client *realnet.Client, resolvers []corev1.Pod) map[string]int {
	t.Helper()
	var (
		last  map[string]int
		since time.Time
	)
	e.EventuallyWithin("earlier tests' ElastiServices and their resolver listeners to be gone", 3*time.Minute, func() (bool, string) {
		list, err := e.Elasti.ElastiV1alpha1().ElastiServices(metav1.NamespaceAll).List(e.Ctx(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, es := range list.Items {
			if es.Namespace != e.NS {
				last = nil
				return false, fmt.Sprintf("ElastiService %s/%s still exists", es.Namespace, es.Name)
			}
		}
		now, desc := metricPerPod(t.Context(), client, resolvers, "elasti_resolver_port_listeners")
		if now == nil {
			return false, desc
		}
		// The same counts for a few seconds: the resolvers' informers have
		// seen the deletions and closed what they will close.
		if last == nil || !maps.Equal(now, last) {
			last, since = now, time.Now()
		}
		return time.Since(since) >= listenersSettle, desc
	})
	return last
}
