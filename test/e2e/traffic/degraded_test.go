package traffic

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/resolver"
	"github.com/elasti-dev/elasti/pkg/resolver/identify"
	"github.com/elasti-dev/elasti/test/localcluster/realnet"
	"github.com/elasti-dev/elasti/test/testenv"
)

const (
	// resolverQueue is the per-Service hold queue each resolver pod gets
	// for the overflow test, small enough to fill with a burst.
	resolverQueue = 3
	// operatorLabel selects manifests/' operator pods.
	operatorLabel = "app.kubernetes.io/name=elasti-operator"
	// resolverInternalPort serves the resolver's /metrics and its route
	// table (GET /routes).
	resolverInternalPort = 8013
)

// TestOperatorDownThenBack: with the operator scaled to zero, a sleeping
// Service cannot be woken. Its requests are held, up to each resolver
// pod's queue; the rest are refused at once with 503 and Retry-After. A
// request held while the operator is down is answered by the new pod once
// the operator is back. The resolvers' queues are made small for it
// (--per-service-queue, a flag the manifests leave at its default).
func TestOperatorDownThenBack(t *testing.T) {
	s := newScenario(t)
	s.setResolverArgs("--per-service-queue=" + strconv.Itoa(resolverQueue))
	s.waitEveryResolverListens(1)
	s.sleep()
	s.scaleOperator(0)
	resolvers := len(s.readyResolverPods())

	t.Run("queue overflow is 503 with Retry-After", func(t *testing.T) {
		s := s.in(t)
		// Each request on a connection of its own, so kube-proxy spreads
		// them over the resolver pods; the held ones give up after the
		// timeout, which frees their places.
		const n = 10
		const holdFor = 3 * time.Second
		burst := s.do(realnet.Request{URL: "http://" + s.fqdn() + "/", Parallel: n, Timeout: holdFor})
		var refused, held []realnet.Response
		for _, r := range burst.Parallel {
			switch {
			case r.Status == http.StatusServiceUnavailable:
				refused = append(refused, r)
			case r.Err != "" && r.Duration >= holdFor:
				held = append(held, r)
			default:
				t.Errorf("want each request held until its timeout or refused with 503; got %s", r)
			}
		}
		// Each resolver pod holds at most resolverQueue; kube-proxy picks
		// the pod at random, so one of them gets at least n/resolvers.
		if len(held) < resolverQueue || len(held) > resolverQueue*resolvers {
			t.Errorf("%d requests held by %d resolver pods with a queue of %d each", len(held), resolvers, resolverQueue)
		}
		for _, r := range refused {
			if after, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || after < 1 || !strings.Contains(r.Body, "too many requests") {
				t.Errorf("a refusal must say why and carry a Retry-After in seconds: %s, Retry-After %q", r, r.Header.Get("Retry-After"))
			}
			if r.Duration >= holdFor/2 {
				t.Errorf("a refusal must come at once; it took %s", r.Duration)
			}
		}
		t.Logf("%d held, %d refused", len(held), len(refused))
		if got := s.e.Replicas(elastiv1alpha1.KindDeployment, app); got != 0 {
			t.Errorf("with the operator down the target went to %d replicas", got)
		}
	})

	t.Run("held until the operator is back", func(t *testing.T) {
		s := s.in(t)
		before := s.scaleWrites()
		type answer struct {
			resp realnet.Response
			err  error
		}
		done := make(chan answer, 1)
		sent := time.Now()
		w := s.ways()[1] // by ClusterIP; the burst came by DNS name
		go func() {
			resp, err := s.client.Do(s.ctx, realnet.Request{URL: "http://" + w.addr + "/held", Host: w.host, Timeout: wakeTimeout})
			done <- answer{resp, err}
		}()
		s.e.Eventually("the request to be held", func() (bool, string) {
			n, desc := s.heldRequests()
			return n == 1, desc
		})
		// The resolver keeps asking; nobody answers, so nothing wakes.
		s.e.HoldsReplicas(elastiv1alpha1.KindDeployment, app, 0, time.Second)
		back := time.Now()
		s.scaleOperator(1)
		var a answer
		select {
		case a = <-done:
		case <-time.After(wakeTimeout + 10*time.Second):
			t.Fatal("the held request was never answered")
		}
		if a.err != nil {
			t.Fatal(a.err)
		}
		s.expectWoken(a.resp)
		if a.resp.Header.Get(resolver.DefaultColdStartHeader) == "" || sent.Add(a.resp.Duration).Before(back) {
			t.Errorf("want the request held until the operator was back (%s after it was sent); got %s, headers %v",
				back.Sub(sent).Round(time.Millisecond), a.resp, a.resp.Header)
		}
		if writes := s.scaleWrites() - before; writes != 1 {
			t.Errorf("%d scale writes for one wake; want 1", writes)
		}
	})
}

// setResolverArgs adds args to the manifests' resolver container and
// waits until only resolver pods with them are left. The test's cleanup
// puts the manifests' args back and waits again.
func (s *scenario) setResolverArgs(args ...string) {
	s.t.Helper()
	var orig []string
	s.updateResolverArgs(func(a []string) []string { orig = a; return append(slices.Clone(a), args...) })
	t := s.t
	t.Cleanup(func() { s.afterTest().updateResolverArgs(func([]string) []string { return orig }) })
}

func (s *scenario) updateResolverArgs(change func([]string) []string) {
	s.t.Helper()
	deployments := s.e.Kube.AppsV1().Deployments(elastiNamespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := deployments.Get(s.ctx, resolverDeployment, metav1.GetOptions{})
		if err != nil {
			return err
		}
		c := &d.Spec.Template.Spec.Containers[0]
		c.Args = change(c.Args)
		_, err = deployments.Update(s.ctx, d, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		s.t.Fatal(err)
	}
	if err := s.bed.WaitDeploymentReady(s.ctx, elastiNamespace, resolverDeployment, readyTimeout); err != nil {
		s.t.Fatal(err)
	}
	// The old pods serve through their shutdown grace; wait until they are
	// gone, so every resolver a request can reach runs with the new args.
	s.eventually("only the resolver pods of the new template", func() (bool, string) {
		list, err := s.e.Kube.CoreV1().Pods(elastiNamespace).List(s.ctx, metav1.ListOptions{LabelSelector: "app=" + resolverDeployment})
		if err != nil {
			return false, err.Error()
		}
		ready := s.readyResolverPods()
		return len(list.Items) == len(ready), fmt.Sprintf("%d resolver pods, %d of them Ready and not terminating", len(list.Items), len(ready))
	})
}

// eventually is testenv's Eventually on the scenario's context, which
// afterTest keeps usable in cleanups.
func (s *scenario) eventually(desc string, cond func() (bool, string)) {
	s.t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(s.ctx, 50*time.Millisecond, testenv.WaitTimeout, true, func(context.Context) (bool, error) {
		ok, obs := cond()
		last = obs
		return ok, nil
	})
	if err != nil {
		s.t.Fatalf("timed out after %s waiting for %s; last seen: %s", testenv.WaitTimeout, desc, last)
	}
}

// afterTest returns s for a cleanup: the test's context has ended by then,
// so s talks to the cluster on one that has not.
func (s *scenario) afterTest() *scenario {
	c := *s
	c.ctx = context.WithoutCancel(s.ctx)
	return &c
}

// waitEveryResolverListens waits until every Ready resolver pod, asked
// directly on its route-table port, listens on n resolver ports for web:
// a sleeping web is reached on them, whichever pod kube-proxy picks.
func (s *scenario) waitEveryResolverListens(n int) {
	s.t.Helper()
	s.waitEveryResolverListensFor(app, n)
}

// waitEveryResolverListensFor is waitEveryResolverListens for the Service
// svc; n may be 0, for a Service whose ports were released.
func (s *scenario) waitEveryResolverListensFor(svc string, n int) {
	s.t.Helper()
	s.eventually(fmt.Sprintf("every resolver pod to listen on %d ports for %s", n, svc), func() (bool, string) {
		var seen []string
		ok := true
		for _, p := range s.readyResolverPods() {
			resp := s.do(realnet.Request{URL: fmt.Sprintf("http://%s:%d/routes", p.Status.PodIP, resolverInternalPort), Timeout: 2 * time.Second})
			var table []identify.RouteStatus
			if err := json.Unmarshal([]byte(resp.Body), &table); err != nil {
				return false, fmt.Sprintf("%s: %s", p.Name, resp)
			}
			listening := 0
			for _, r := range table {
				if r.Namespace == s.e.NS && r.Service == svc && r.Listening {
					listening++
				}
			}
			ok = ok && listening == n
			seen = append(seen, fmt.Sprintf("%s: %d", p.Name, listening))
		}
		return ok && len(seen) > 0, "listening per resolver pod: " + strings.Join(seen, ", ")
	})
}

// scaleOperator scales manifests' operator to replicas and waits: for it
// to be Ready, or for its pods to be gone. Scaled to zero, the test's
// cleanup scales it back, so later tests find it running.
func (s *scenario) scaleOperator(replicas int32) {
	s.t.Helper()
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas)
	if _, err := s.e.Kube.AppsV1().Deployments(elastiNamespace).Patch(s.ctx, operatorDeployment, types.MergePatchType, patch, metav1.PatchOptions{}, "scale"); err != nil {
		s.t.Fatal(err)
	}
	if replicas > 0 {
		if err := s.bed.WaitDeploymentReady(s.ctx, elastiNamespace, operatorDeployment, readyTimeout); err != nil {
			s.t.Fatal(err)
		}
		return
	}
	t := s.t
	t.Cleanup(func() {
		s := s.afterTest()
		d, err := s.e.Kube.AppsV1().Deployments(elastiNamespace).Get(s.ctx, operatorDeployment, metav1.GetOptions{})
		if err == nil && d.Spec.Replicas != nil && *d.Spec.Replicas > 0 {
			return
		}
		s.scaleOperator(1)
	})
	s.eventually("the operator's pods to be gone", func() (bool, string) {
		list, err := s.e.Kube.CoreV1().Pods(elastiNamespace).List(s.ctx, metav1.ListOptions{LabelSelector: operatorLabel})
		if err != nil {
			return false, err.Error()
		}
		return len(list.Items) == 0, fmt.Sprintf("%d operator pods", len(list.Items))
	})
}

// heldRequests sums elasti_resolver_queued_requests over the Ready
// resolver pods, read from each pod's /metrics by the client pod.
func (s *scenario) heldRequests() (int, string) {
	s.t.Helper()
	held, desc := s.heldPerPod()
	if held == nil {
		return -1, desc
	}
	total := 0
	for _, n := range held {
		total += n
	}
	return total, desc
}

// heldPerPod is elasti_resolver_queued_requests of each Ready resolver
// pod, by name; nil when a pod's metrics cannot be read.
func (s *scenario) heldPerPod() (map[string]int, string) {
	s.t.Helper()
	held := map[string]int{}
	var seen []string
	for _, p := range s.readyResolverPods() {
		n, err := s.resolverGauge(p, "elasti_resolver_queued_requests")
		if err != nil {
			return nil, err.Error()
		}
		held[p.Name] = n
		seen = append(seen, fmt.Sprintf("%s: %d", p.Name, n))
	}
	return held, "held per resolver pod: " + strings.Join(seen, ", ")
}

// resolverGauge reads an unlabelled gauge from a resolver pod's /metrics.
func (s *scenario) resolverGauge(p corev1.Pod, name string) (int, error) {
	resp := s.do(realnet.Request{URL: fmt.Sprintf("http://%s:%d/metrics", p.Status.PodIP, resolverInternalPort), Timeout: quickTimeout})
	if resp.Status != http.StatusOK {
		return 0, fmt.Errorf("%s's metrics: %s", p.Name, resp)
	}
	sc := bufio.NewScanner(strings.NewReader(resp.Body))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return int(f), err
		}
	}
	return 0, fmt.Errorf("%s's metrics have no %s (%d bytes read)", p.Name, name, len(resp.Body))
}
