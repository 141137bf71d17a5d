package traffic

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/names"
	"github.com/elasti-dev/elasti/test/localcluster/realnet"
	"github.com/elasti-dev/elasti/test/testenv"
)

// The probe rule the probe tests give web: what a kubelet's HTTP probe of
// /healthz looks like, answered by the resolver while web sleeps.
const (
	probePath   = "/healthz"
	probeAgent  = "kube-probe/1.36"
	probeAnswer = "asleep but fine"
)

// setProbeRule gives web's ElastiService the probe rule.
func (s *scenario) setProbeRule() {
	s.t.Helper()
	s.e.UpdateSpec(app, func(es *elastiv1alpha1.ElastiService) {
		es.Spec.ProbeResponse = probeRules()
	})
}

// probeRules is the probe rule: a kubelet-like GET of probePath is
// answered probeAnswer while the target sleeps.
func probeRules() []elastiv1alpha1.ProbeResponseRule {
	return []elastiv1alpha1.ProbeResponseRule{{
		Path:     &elastiv1alpha1.PathMatch{Type: elastiv1alpha1.MatchExact, Value: probePath},
		Headers:  []elastiv1alpha1.NameValueMatch{{Name: "User-Agent", Type: elastiv1alpha1.MatchRegularExpression, Value: "kube-probe/.*"}},
		Response: elastiv1alpha1.ProbeCannedAnswer{Status: http.StatusOK, Body: probeAnswer},
	}}
}

// probe is a kubelet-like probe of web the way w says.
func probe(w way) realnet.Request {
	return realnet.Request{URL: "http://" + w.addr + probePath, Host: w.host, Header: map[string]string{"User-Agent": probeAgent}, Timeout: quickTimeout}
}

func isProbeAnswer(r realnet.Response) bool {
	return r.Status == http.StatusOK && r.Body == probeAnswer
}

// TestProbeIsAnsweredWithoutWaking: while web sleeps, a health checker's
// probe, by DNS name and by ClusterIP, is answered by the resolver with the
// rule's canned answer, and web stays at zero. Then one of the two
// resolver pods is deleted while probes keep coming: the operator drops it
// from web's EndpointSlice before it stops serving, so every probe is
// still answered and none reaches it once it is gone.
func TestProbeIsAnsweredWithoutWaking(t *testing.T) {
	s := newScenario(t)
	// Set before the target sleeps, so the resolvers know the rule by the
	// time a probe can reach them.
	s.setProbeRule()
	s.waitEveryResolverListens(1)
	s.sleep()
	writes := s.scaleWrites()
	t.Run("answered without waking", func(t *testing.T) {
		s := s.in(t)
		for _, w := range s.ways() {
			if resp := s.do(probe(w)); !isProbeAnswer(resp) {
				t.Errorf("%s: want the canned %q, got %s", w.name, probeAnswer, resp)
			}
		}
		s.e.HoldsReplicas(elastiv1alpha1.KindDeployment, app, 0, time.Second)
		if got := s.scaleWrites() - writes; got != 0 {
			t.Errorf("probes caused %d scale writes", got)
		}
	})
	t.Run("a resolver pod deleted while probes flow", func(t *testing.T) {
		s := s.in(t)
		s.resolverPodDeletedUnderProbes()
		if got := s.scaleWrites() - writes; got != 0 {
			t.Errorf("probes caused %d scale writes", got)
		}
	})
}

// probeResult is one probe of a flow and when it was sent.
type probeResult struct {
	sent time.Time
	resp realnet.Response
	err  error
}

// flowProbes probes web by DNS name, one probe at a time, each on a
// connection of its own, until stop is closed, at most maxProbes times and
// for at most testenv.WaitTimeout.
func (s *scenario) flowProbes(stop <-chan struct{}) []probeResult {
	const maxProbes = 600
	var out []probeResult
	deadline := time.Now().Add(testenv.WaitTimeout)
	req := probe(s.ways()[0])
	for len(out) < maxProbes && time.Now().Before(deadline) {
		select {
		case <-stop:
			return out
		default:
		}
		sent := time.Now()
		resp, err := s.client.Do(s.ctx, req)
		out = append(out, probeResult{sent: sent, resp: resp, err: err})
	}
	return out
}

// resolverPodDeletedUnderProbes deletes one Ready resolver pod while
// probes flow and waits until it is gone and its replacement is in web's
// EndpointSlice. Every probe must be answered; the operator must drop the
// deleted pod from web's slice before the pod stops serving; and probes
// must have flowed from before the deletion until after it was gone.
func (s *scenario) resolverPodDeletedUnderProbes() {
	s.t.Helper()
	before := s.readyResolverPods()
	if len(before) < 2 {
		s.t.Fatalf("want at least two Ready resolver pods, have %v", before)
	}
	victim := before[0]
	t := s.t
	t.Cleanup(func() {
		// Later tests need both resolvers again, whatever happened here.
		if err := s.bed.WaitDeploymentReady(s.afterTest().ctx, elastiNamespace, resolverDeployment, readyTimeout); err != nil {
			t.Errorf("the resolver Deployment did not recover: %v", err)
		}
	})

	stop := make(chan struct{})
	var flow []probeResult
	var wg sync.WaitGroup
	wg.Go(func() { flow = s.flowProbes(stop) })
	stopFlow := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopFlow() // also when a wait below fails

	// A few probes first, so the flow surely began before the deletion.
	time.Sleep(500 * time.Millisecond)
	deleted := time.Now()
	if err := s.e.Kube.CoreV1().Pods(elastiNamespace).Delete(s.ctx, victim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var dropped, gone time.Time
	s.e.Eventually(fmt.Sprintf("resolver pod %s gone and a replacement in web's EndpointSlice", victim.Name), func() (bool, string) {
		inSlice := s.resolverSliceIPs()
		if dropped.IsZero() && !slices.Contains(inSlice, victim.Status.PodIP) {
			dropped = time.Now()
		}
		_, err := s.e.Kube.CoreV1().Pods(elastiNamespace).Get(s.ctx, victim.Name, metav1.GetOptions{})
		if gone.IsZero() && apierrors.IsNotFound(err) {
			gone = time.Now()
		}
		var ready []string
		for _, p := range s.readyResolverPods() {
			ready = append(ready, p.Status.PodIP)
		}
		slices.Sort(ready)
		return !gone.IsZero() && len(ready) == len(before) && slices.Equal(inSlice, ready),
			fmt.Sprintf("web's slice %v, Ready resolvers %v, %s gone: %v", inSlice, ready, victim.Name, !gone.IsZero())
	})
	if dropped.After(gone) {
		t.Errorf("%s left web's EndpointSlice %s after the deletion, but was gone (stopped serving) already %s after it",
			victim.Name, dropped.Sub(deleted).Round(time.Millisecond), gone.Sub(deleted).Round(time.Millisecond))
	}
	// kube-proxy follows the new endpoint; then a few more probes.
	if err := s.bed.WaitKubeProxyFollows(s.ctx, s.e.NS, app, testenv.WaitTimeout); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	stopFlow()

	for i, p := range flow {
		if p.err != nil || !isProbeAnswer(p.resp) {
			t.Errorf("probe %d, sent %s after the deletion: want the canned answer, got %s (%v)", i, p.sent.Sub(deleted).Round(time.Millisecond), p.resp, p.err)
		}
	}
	if len(flow) == 0 || !flow[0].sent.Before(deleted) || !flow[len(flow)-1].sent.After(gone) {
		t.Fatalf("the probes did not span the deletion: %d probes", len(flow))
	}
	t.Logf("%d probes answered; %s left web's slice after %s and stopped serving after %s",
		len(flow), victim.Name, dropped.Sub(deleted).Round(time.Millisecond), gone.Sub(deleted).Round(time.Millisecond))
}

// readyResolverPods lists manifests/' resolver pods that are Ready and not
// being deleted, by name.
func (s *scenario) readyResolverPods() []corev1.Pod {
	s.t.Helper()
	list, err := s.e.Kube.CoreV1().Pods(elastiNamespace).List(s.ctx, metav1.ListOptions{LabelSelector: "app=" + resolverDeployment})
	if err != nil {
		s.t.Fatal(err)
	}
	var ready []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp != nil || p.Status.PodIP == "" {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ready = append(ready, p)
			}
		}
	}
	slices.SortFunc(ready, func(a, b corev1.Pod) int { return cmp.Compare(a.Name, b.Name) })
	return ready
}

// resolverSliceIPs lists, sorted, the addresses of the EndpointSlice the
// operator keeps for web while it sleeps (it lists Ready resolvers only).
func (s *scenario) resolverSliceIPs() []string {
	s.t.Helper()
	sl, err := s.e.Kube.DiscoveryV1().EndpointSlices(s.e.NS).Get(s.ctx, names.ResolverSlice(app), metav1.GetOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	ips := testenv.SliceIPs(*sl)
	slices.Sort(ips)
	return ips
}
