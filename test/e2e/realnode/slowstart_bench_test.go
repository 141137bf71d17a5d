package realnode

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/elasti-dev/elasti/hack/sampleapp/answer"
	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/wakestage"
	"github.com/elasti-dev/elasti/test/localcluster/realnet"
	"github.com/elasti-dev/elasti/test/testenv"
)

var (
	slowStartReady = flag.Duration("slowstart-ready", 5*time.Minute,
		"BenchmarkSlowStartOnTheRealNode: how long after its start the app is ready (it listens after 20 s, then answers 503 until then)")
	slowStartHeld = flag.Int("slowstart-held", 1000,
		"BenchmarkSlowStartOnTheRealNode: the requests held while it starts, in four equal parts by short name, ClusterIP, the ingress and HTTP/2")
)

const (
	// slowStartListen is when the slow app listens: a model server opens
	// its port, then loads its weights, answering its readiness path 503.
	slowStartListen = 20 * time.Second
	// slowStartRefused is how many requests are sent past the bound once
	// it is lowered under the held requests.
	slowStartRefused = 40
	// slowStartStageEvery is how often the resolver's wake status is
	// compared with the pod's own stage.
	slowStartStageEvery = 500 * time.Millisecond
)

// slowStartPaths are the client paths of the slow start, each sent a
// quarter of -slowstart-held.
var slowStartPaths = []string{"short name", "ClusterIP", "ingress", "HTTP/2"}

// slowStartMetric names path in the benchmark's metrics.
var slowStartMetric = map[string]string{"short name": "short-name", "ClusterIP": "cluster-ip", "ingress": "ingress", "HTTP/2": "http2"}

// BenchmarkSlowStartOnTheRealNode is issue 41's five-minute app on the
// real node (make bench): the sample app as a model server, listening 20 s
// after its start and Ready only after -slowstart-ready, its ElastiService
// holding -slowstart-held requests for it (spec.hold), sent while it sleeps
// in four equal parts by its short name, its ClusterIP, the ingress
// controller and HTTP/2 by prior knowledge. While they are held, the
// resolver's wake status (Prefer: respond-async) is compared with the
// pod's real stage every 500 ms, and the resolver containers' memory read
// from their cgroups (RSS) and their metrics (the live heap, as each
// replica's last collection found it); then spec.hold.maxRequests is lowered under the held
// count and more requests are sent, each to be refused at once with 503
// and Retry-After while none of the held ones is lost. It fails on any
// held request not answered by the woken pod, and reports the errors, the
// worst time beyond the app's first readiness 200 per path, the resolver's
// memory before and while holding, the slowest refusal and the longest
// the wake status showed another stage than the pod's.
func BenchmarkSlowStartOnTheRealNode(bm *testing.B) {
	if *slowStartReady <= slowStartListen || *slowStartReady > 30*time.Minute {
		bm.Fatalf("-slowstart-ready %s: want more than %s and at most 30m", *slowStartReady, slowStartListen)
	}
	if *slowStartHeld < len(slowStartPaths) || *slowStartHeld > 1000 {
		bm.Fatalf("-slowstart-held %d: want %d to 1000, the resolver's per-source bound (250) times the paths", *slowStartHeld, len(slowStartPaths))
	}
	for range bm.N {
		r := runSlowStart(bm)
		r.report(bm)
	}
}

// slowStart is one run's figures.
type slowStart struct {
	errors       int
	beyond       map[string][]time.Duration
	refused      []time.Duration
	refusedTotal []time.Duration
	// RSS: the resolver containers' memory without the page cache.
	memBefore  int64
	memHeldMax int64
	// memHeldFirst is the first reading once every request was held:
	// the growth from it to memHeldMax is what holding them longer cost.
	memHeldFirst int64
	// The live heap (go_gc_heap_live_bytes of both replicas): before,
	// and from the first reading after every replica collected once all
	// were held, its first and its largest. RSS keeps the garbage a
	// process with GOMEMLIMIT lets pile up; the live heap does not.
	liveBefore, liveHeldFirst, liveHeldMax int64
	liveHeldReadings                       int
	stageMismatch                          time.Duration
	stageSamples                           int
	held                                   time.Duration
}

func (r *slowStart) report(bm *testing.B) {
	bm.ReportMetric(float64(r.errors), "errors")
	for _, p := range slowStartPaths {
		bm.ReportMetric(float64(slices.Max(append(r.beyond[p], 0)).Microseconds())/1000, slowStartMetric[p]+"-beyond-first-200-max-ms")
	}
	bm.ReportMetric(float64(r.memBefore)/(1<<20), "resolver-rss-before-MiB")
	bm.ReportMetric(float64(r.memHeldMax)/(1<<20), "resolver-rss-held-max-MiB")
	bm.ReportMetric(float64(r.memHeldMax-r.memHeldFirst)/(1<<20), "resolver-rss-growth-while-held-MiB")
	if r.liveHeldReadings > 0 {
		bm.ReportMetric(float64(r.liveBefore)/(1<<20), "resolver-live-heap-before-MiB")
		bm.ReportMetric(float64(r.liveHeldFirst)/(1<<20), "resolver-live-heap-held-first-MiB")
		bm.ReportMetric(float64(r.liveHeldMax)/(1<<20), "resolver-live-heap-held-max-MiB")
		bm.ReportMetric(float64(r.liveHeldMax-r.liveHeldFirst)/(1<<20), "resolver-live-heap-growth-while-held-MiB")
	}
	bm.ReportMetric(float64(slices.Max(append(r.refused, 0)).Microseconds())/1000, "past-bound-503-max-ms")
	bm.ReportMetric(float64(slices.Max(append(r.refusedTotal, 0)).Microseconds())/1000, "past-bound-503-with-connect-max-ms")
	bm.ReportMetric(float64(r.stageMismatch.Milliseconds()), "stage-mismatch-max-ms")
	bm.ReportMetric(r.held.Seconds(), "held-s")
}

func runSlowStart(bm *testing.B) *slowStart {
	b := testBed(bm)
	e := testenv.New(bm)
	r := &slowStart{beyond: map[string][]time.Duration{}}
	b.sampleApp(bm, e, app, 1, func(c *corev1.Container) { c.ReadinessProbe.HTTPGet.Path = "/ready" })
	h2c := corev1.ServicePort{Name: "h2c", Port: 8081, TargetPort: intstr.FromString("http"), AppProtocol: ptr.To("kubernetes.io/h2c")}
	svc, err := e.Kube.CoreV1().Services(e.NS).Get(bm.Context(), app, metav1.GetOptions{})
	if err != nil {
		bm.Fatal(err)
	}
	svc.Spec.Ports = append(svc.Spec.Ports, h2c)
	if svc, err = e.Kube.CoreV1().Services(e.NS).Update(bm.Context(), svc, metav1.UpdateOptions{}); err != nil {
		bm.Fatal(err)
	}
	host := app + "-" + e.NS + ".example.com"
	if _, err := e.Kube.NetworkingV1().Ingresses(e.NS).Create(bm.Context(), realnet.Ingress(e.NS, app, host, app), metav1.CreateOptions{}); err != nil {
		bm.Fatal(err)
	}
	holdFor := *slowStartReady + 2*time.Minute
	e.ElastiServiceWith(app, app, elastiv1alpha1.KindDeployment, app, func(es *elastiv1alpha1.ElastiService) {
		es.Spec.MinTargetReplicas = 1
		es.Spec.Hold = &elastiv1alpha1.Hold{Timeout: holdFor.String(), MaxRequests: int32(*slowStartHeld)}
	})
	e.WaitMode(app, elastiv1alpha1.ModeServe)
	e.EventuallyWithin("web's pod to be Ready", podTimeout, func() (bool, string) {
		names := readyPodNames(e, app)
		return len(names) == 1, fmt.Sprint(names)
	})
	// A client pod per path: the resolver holds at most 250 requests of
	// one client address (--per-source-queue); the ingress path's all come
	// from the ingress controller's.
	clients := map[string]*realnet.Client{}
	for _, path := range slowStartPaths {
		c, err := b.net.Client(bm.Context(), e.NS)
		if err != nil {
			bm.Fatal(err)
		}
		bm.Cleanup(c.Close)
		clients[path] = c
	}
	client := clients[slowStartPaths[0]]
	b.sleep(bm, e)
	if err := b.net.WaitIngressFollows(bm.Context(), client, e.NS, app, testenv.WaitTimeout); err != nil {
		bm.Fatal(err)
	}
	becomeSlow(bm, e, *slowStartReady)

	before := b.memoryReading(bm, client)
	r.memBefore, r.liveBefore = before.rss, before.live
	perPath := *slowStartHeld / len(slowStartPaths)
	timeout := holdFor + time.Minute
	requests := map[string]realnet.Request{
		"short name": {URL: "http://" + app + "/held", Parallel: perPath, Timeout: timeout},
		"ClusterIP":  {URL: "http://" + svc.Spec.ClusterIP + "/held", Parallel: perPath, Timeout: timeout},
		"ingress":    {URL: "http://" + ingressAddr + "/held", Host: host, Parallel: perPath, Timeout: timeout},
		"HTTP/2":     {URL: fmt.Sprintf("http://%s:%d/held", app, h2c.Port), Protocol: realnet.ProtocolH2C, Parallel: perPath, Timeout: timeout},
	}
	began := time.Now()
	answers := map[string]realnet.Response{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for path, req := range requests {
		wg.Go(func() {
			resp, err := clients[path].Do(bm.Context(), req)
			if err != nil {
				resp = realnet.Response{Err: err.Error()}
			}
			mu.Lock()
			answers[path] = resp
			mu.Unlock()
		})
	}
	stop := make(chan struct{})
	var watching sync.WaitGroup
	var mem []memReading
	watching.Go(func() { r.stageMismatch, r.stageSamples, mem = b.watchSlowWake(bm, e, client, stop) })

	// Every request is held: lower the bound under them, and the next
	// ones are refused at once while the held stay held.
	e.EventuallyWithin(fmt.Sprintf("the resolver to hold %d requests", perPath*len(slowStartPaths)), 2*time.Minute, func() (bool, string) {
		held, desc := heldPerPod(bm.Context(), client, b.readyResolverPods(bm))
		n := 0
		for _, h := range held {
			n += h
		}
		return n >= perPath*len(slowStartPaths), desc
	})
	allHeld := time.Now()
	atAllHeld := b.memoryReading(bm, client)
	// By ClusterIP: the client's name lookup is not the resolver's time.
	pastURL := "http://" + svc.Spec.ClusterIP + "/past"
	e.UpdateSpec(app, func(es *elastiv1alpha1.ElastiService) { es.Spec.Hold.MaxRequests = 1 })
	e.EventuallyWithin("the lowered bound to refuse a request", time.Minute, func() (bool, string) {
		resp, err := client.Do(bm.Context(), realnet.Request{URL: pastURL, Timeout: 10 * time.Second})
		return err == nil && resp.Status == http.StatusServiceUnavailable, fmt.Sprint(resp, err)
	})
	past, err := client.Do(bm.Context(), realnet.Request{URL: pastURL, Parallel: slowStartRefused, Timeout: 10 * time.Second})
	if err != nil {
		bm.Fatal(err)
	}
	for i, resp := range past.Parallel {
		if resp.Status != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			bm.Errorf("request %d past the bound: %s, want 503 with Retry-After at once", i, resp)
			continue
		}
		// From the request's last byte to the answer: the resolver's
		// part, not the client's connect through kube-proxy.
		r.refused = append(r.refused, resp.Duration-resp.Phases.Sent)
		r.refusedTotal = append(r.refusedTotal, resp.Duration)
	}
	// The bound back, so the wake status answers again (past the bound a
	// client is told the bound instead).
	e.UpdateSpec(app, func(es *elastiv1alpha1.ElastiService) { es.Spec.Hold.MaxRequests = int32(*slowStartHeld) })

	wg.Wait()
	released := time.Now()
	close(stop)
	watching.Wait()
	r.held = time.Since(began)
	for _, m := range mem {
		if !m.at.After(allHeld) || !m.at.Before(released) {
			continue
		}
		if r.memHeldFirst == 0 {
			r.memHeldFirst = m.rss
		}
		r.memHeldMax = max(r.memHeldMax, m.rss)
		if m.collectedSince(atAllHeld) {
			if r.liveHeldReadings == 0 {
				r.liveHeldFirst = m.live
			}
			r.liveHeldReadings++
			r.liveHeldMax = max(r.liveHeldMax, m.live)
		}
	}
	if r.liveHeldReadings == 0 {
		bm.Logf("no reading of the live heap after every replica collected while all were held (GC counts at all held: %v)", atAllHeld.gcs)
	}
	for _, path := range slowStartPaths {
		resp := answers[path]
		if resp.Err != "" || len(resp.Parallel) != perPath {
			bm.Errorf("%s: %s, want %d answers", path, resp, perPath)
			r.errors += perPath
			continue
		}
		for i, one := range resp.Parallel {
			var reply answer.Reply
			if one.Status != http.StatusOK || json.Unmarshal([]byte(one.Body), &reply) != nil || reply.FirstReady == 0 || reply.Early != 0 {
				r.errors++
				if r.errors <= 5 {
					bm.Errorf("%s request %d: %s, want the woken pod's answer after its readiness", path, i, one)
				}
				continue
			}
			r.beyond[path] = append(r.beyond[path], time.Duration(reply.Arrived-reply.FirstReady)*time.Microsecond)
		}
	}
	if r.errors > 0 {
		bm.Errorf("%d of %d held requests failed", r.errors, perPath*len(slowStartPaths))
	}
	bm.Logf("held %s; resolver RSS %d MiB before, %d MiB once all were held, %d MiB at most while holding; live heap %d MiB before, %d MiB after the first collection with all held, %d MiB at most (%d readings); %d stage samples, the longest mismatch %s; refusals past the bound at most %s",
		r.held.Round(time.Second), r.memBefore>>20, r.memHeldFirst>>20, r.memHeldMax>>20, r.liveBefore>>20, r.liveHeldFirst>>20, r.liveHeldMax>>20, r.liveHeldReadings,
		r.stageSamples, r.stageMismatch, slices.Max(append(r.refused, 0)))
	return r
}

// becomeSlow makes the sleeping sample app web a model server: its next
// pod listens slowStartListen after it starts and answers its readiness
// path 503 until ready after its start.
func becomeSlow(tb testing.TB, e *testenv.Env, ready time.Duration) {
	tb.Helper()
	patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":"app","env":[{"name":"LISTEN_DELAY","value":%q},{"name":"NOT_READY_FOR","value":%q}]}]}}}}`,
		slowStartListen, ready-slowStartListen)
	if _, err := e.Kube.AppsV1().Deployments(e.NS).Patch(tb.Context(), app, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		tb.Fatal(err)
	}
}

// memReading is the resolver replicas' memory at a time: their
// containers' RSS, their live heaps together as their last collections
// found them, and each replica's collections so far.
type memReading struct {
	at   time.Time
	rss  int64
	live int64
	gcs  map[string]int
}

// collectedSince is whether every replica of then collected since: a
// live heap that holds what was held then.
func (m memReading) collectedSince(then memReading) bool {
	for pod, n := range then.gcs {
		if m.gcs[pod] <= n {
			return false
		}
	}
	return len(then.gcs) > 0
}

// memoryReading reads the resolver replicas' memory now, their metrics
// from the client pod; a replica whose metrics fail counts no collection.
func (b *bed) memoryReading(tb testing.TB, client *realnet.Client) memReading {
	pods := b.readyResolverPods(tb)
	m := memReading{at: time.Now(), rss: resolverMemory(tb, pods), gcs: map[string]int{}}
	got, desc := metricsPerPod(tb.Context(), client, pods, "go_gc_heap_live_bytes", "go_gc_duration_seconds_count")
	if got == nil {
		tb.Logf("resolver live heap: %s", desc)
		return m
	}
	for _, v := range got["go_gc_heap_live_bytes"] {
		m.live += int64(v)
	}
	for _, p := range pods {
		m.gcs[p.Name] = got["go_gc_duration_seconds_count"][p.Name]
	}
	return m
}

// watchSlowWake compares, every slowStartStageEvery until stop, the
// resolver's wake status with the stage of web's pod as the API has it,
// and reads the resolver's memory every 10 s. It returns the longest run
// of samples in which the two stages differed, the samples taken and the
// memory readings.
func (b *bed) watchSlowWake(tb testing.TB, e *testenv.Env, client *realnet.Client, stop <-chan struct{}) (longest time.Duration, samples int, mem []memReading) {
	var mismatchSince time.Time
	lastMem := time.Time{}
	tick := time.NewTicker(slowStartStageEvery)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return longest, samples, mem
		case <-tick.C:
		}
		if time.Since(lastMem) > 10*time.Second {
			lastMem = time.Now()
			mem = append(mem, b.memoryReading(tb, client))
		}
		resp, err := client.Do(tb.Context(), realnet.Request{URL: "http://" + app + "/status",
			Header: map[string]string{"Prefer": "respond-async", "Accept": "application/json"}, Timeout: 5 * time.Second})
		if err != nil || resp.Status != http.StatusServiceUnavailable {
			continue // the wake is over, or the harness was slow
		}
		var status struct {
			Reason string          `json:"reason"`
			Stage  wakestage.Stage `json:"stage"`
		}
		if json.Unmarshal([]byte(resp.Body), &status) != nil || status.Reason != "Waking" {
			continue // past a bound: the client is told the bound, not the stage
		}
		pods, err := e.Kube.CoreV1().Pods(e.NS).List(tb.Context(), metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil {
			continue
		}
		ptrs := make([]*corev1.Pod, len(pods.Items))
		for i := range pods.Items {
			ptrs[i] = &pods.Items[i]
		}
		samples++
		now := time.Now()
		if real := wakestage.Of(ptrs).Stage; real != status.Stage && !(real == wakestage.Ready && status.Stage == wakestage.Starting) {
			if mismatchSince.IsZero() {
				mismatchSince = now
				tb.Logf("the wake status says %s, the pod is %s", status.Stage, real)
			}
			longest = max(longest, now.Sub(mismatchSince))
			continue
		}
		mismatchSince = time.Time{}
	}
}

// resolverMemory is the resolver containers' memory together, as their
// cgroups count it without the page cache (memory.stat's total_rss).
func resolverMemory(tb testing.TB, pods []corev1.Pod) int64 {
	var sum int64
	for _, p := range pods {
		for _, st := range p.Status.ContainerStatuses {
			data, err := os.ReadFile(filepath.Join(containerMemoryCgroup(&p, st.ContainerID), "memory.stat"))
			if err != nil {
				tb.Errorf("resolver %s: %v", p.Name, err)
				continue
			}
			for _, l := range strings.Split(string(data), "\n") {
				if v, ok := strings.CutPrefix(l, "total_rss "); ok {
					n, _ := strconv.ParseInt(v, 10, 64)
					sum += n
				}
			}
		}
	}
	return sum
}
