package realnode

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/test/testenv"
)

// BenchmarkColdStartOnTheRealNode measures what a user's first request
// after a sleep costs when the pod is a real container: request at zero →
// the new pod's answer, by short name from a client pod, with the image's
// container created and started by containerd and runc and Ready by the
// kubelet's HTTP probe. It also reports how much of that is the pod's own
// start (request → the pod seen Ready) and what remains beyond it, so the
// figure compares with BenchmarkTrafficPath's and
// BenchmarkResolverColdStartOverhead's on process and kwok pods
// (docs/benchmarks.md, "Cold start on the real node"). Run it with
// -benchtime Nx: each iteration is one sleep and one wake.
func BenchmarkColdStartOnTheRealNode(bm *testing.B) {
	b := testBed(bm)
	e := testenv.New(bm)
	b.sleepingApp(bm, e, nil)
	client, err := b.net.Client(bm.Context(), e.NS)
	if err != nil {
		bm.Fatal(err)
	}
	defer client.Close()

	var total, ready, beyond []time.Duration
	bm.ResetTimer()
	for i := range bm.N {
		if i > 0 {
			bm.StopTimer()
			b.sleep(bm, e)
			bm.StartTimer()
		}
		readyAt := watchFirstReady(bm, e, app)
		start := time.Now()
		resp, err := client.Get(bm.Context(), "http://"+app+"/", time.Minute)
		if err != nil {
			bm.Fatal(err)
		}
		if resp.Err != "" || resp.Status != 200 {
			bm.Fatalf("cold start %d: %s%s", i, resp, b.diagnose())
		}
		answered := start.Add(resp.Duration)
		podReady, ok := <-readyAt
		if !ok {
			bm.Fatalf("cold start %d: the answer came, but no pod of %s was seen Ready", i, app)
		}
		total = append(total, resp.Duration)
		ready = append(ready, podReady.Sub(start))
		beyond = append(beyond, answered.Sub(podReady))
		e.WaitMode(app, elastiv1alpha1.ModeServe)
	}
	bm.StopTimer()
	report := func(name string, ds []time.Duration) {
		slices.Sort(ds)
		bm.ReportMetric(float64(ds[len(ds)/2].Milliseconds()), name+"-p50-ms")
		bm.ReportMetric(float64(ds[len(ds)-1].Milliseconds()), name+"-max-ms")
	}
	report("cold-start", total)
	report("pod-ready", ready)
	report("beyond-ready", beyond)
	bm.Logf("%d cold starts: total %v; request → pod Ready %v; beyond Ready %v", bm.N, total, ready, beyond)
}

// watchFirstReady watches the pods of name and sends, once, when the first
// of them is seen Ready; the channel closes without a value if none is
// within podTimeout. The watch starts before it returns, so a pod that
// becomes Ready after the call is seen. Condition timestamps have only
// second precision, hence the watch.
func watchFirstReady(tb testing.TB, e *testenv.Env, name string) <-chan time.Time {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), podTimeout)
	w, err := e.Kube.CoreV1().Pods(e.NS).Watch(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	out := make(chan time.Time, 1)
	go func() {
		defer cancel()
		defer w.Stop()
		defer close(out)
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if ok && ev.Type != watch.Deleted && testenv.PodReady(pod) {
				out <- time.Now()
				return
			}
		}
	}()
	return out
}
