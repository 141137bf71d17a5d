package traffic

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/resolver"
)

// TestResolverPodDeletedWhileRequestsAreHeld: 100 clients call a sleeping
// Service by DNS name at once, each on a connection of its own, so
// kube-proxy spreads them over both resolver pods, and web cannot start
// yet (its new pod is unschedulable), so all 100 are held. One resolver
// pod is deleted. The operator drops it from web's EndpointSlice at once;
// the pod drains: after its shutdown grace it answers every request it
// holds 503 with Retry-After, and stops. The clients retry after the
// Retry-After and are held again by the resolver pods left. Then web may
// start, and every request gets web's answer from a Ready pod, through the
// resolver, before its own 60 s deadline (a load balancer's common idle
// timeout): none hangs, none is reset, none gets a 502. The deleted pod
// holds its requests for up to 18 s after its grace before the 503
// (cmd/elasti-resolver's drainAnswer), so a wake that ends in that time
// answers them without a retry.
func TestResolverPodDeletedWhileRequestsAreHeld(t *testing.T) {
	const (
		n        = 100
		deadline = 60 * time.Second
	)
	s := newScenario(t)
	s.waitEveryResolverListens(1)
	s.sleep()
	resolvers := s.readyResolverPods()
	if len(resolvers) != 2 {
		t.Fatalf("want manifests/' two Ready resolver pods, have %d", len(resolvers))
	}
	t.Cleanup(func() {
		// Later tests need both resolvers again, whatever happened here.
		if err := s.bed.WaitDeploymentReady(s.afterTest().ctx, elastiNamespace, resolverDeployment, readyTimeout); err != nil {
			t.Errorf("the resolver Deployment did not recover: %v", err)
		}
	})
	s.keepTargetFromStarting()

	var (
		reqs     []burstRequest
		burstErr error
		finished = make(chan struct{})
	)
	go func() {
		defer close(finished)
		call := heldBurstCall{URL: "http://" + s.fqdn() + "/held/{i}", N: n, Deadline: deadline, MaxRetries: 2}
		burstErr = s.client.Run(s.ctx, heldBurstProgram, call, deadline+5*time.Second, &reqs)
	}()
	// Every request held, on both pods; nothing answered yet.
	var held map[string]int
	s.e.Eventually(fmt.Sprintf("all %d requests to be held", n), func() (bool, string) {
		select {
		case <-finished:
			t.Fatalf("the clients finished before all were held: %v, %d requests", burstErr, len(reqs))
		default:
		}
		var desc string
		held, desc = s.heldPerPod()
		total := 0
		for _, h := range held {
			total += h
		}
		return total == n, desc
	})
	victim := resolvers[0]
	onVictim := held[victim.Name]
	if onVictim == 0 || onVictim == n {
		t.Fatalf("kube-proxy put %d of %d requests on %s: the deletion would prove nothing (%v)", onVictim, n, victim.Name, held)
	}

	deleted := time.Now()
	if err := s.e.Kube.CoreV1().Pods(elastiNamespace).Delete(s.ctx, victim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The deleted pod answers its requests 503 once its grace is over;
	// they come back after the Retry-After and are held again by the
	// resolver pods that are left.
	var heldAgain map[string]int
	s.e.Eventually(fmt.Sprintf("%s to be gone and all %d requests held again", victim.Name, n), func() (bool, string) {
		select {
		case <-finished:
			t.Fatalf("the clients finished before all were held again: %v, %d requests", burstErr, len(reqs))
		default:
		}
		_, err := s.e.Kube.CoreV1().Pods(elastiNamespace).Get(s.ctx, victim.Name, metav1.GetOptions{})
		var desc string
		heldAgain, desc = s.heldPerPod()
		total := 0
		for _, h := range heldAgain {
			total += h
		}
		_, victimListed := heldAgain[victim.Name]
		return apierrors.IsNotFound(err) && !victimListed && total == n, fmt.Sprintf("%s: %v; %s", victim.Name, err, desc)
	})
	heldAgainAt := time.Now()
	s.letTargetStart()
	released := time.Now()

	select {
	case <-finished:
	case <-time.After(deadline + 20*time.Second):
		t.Fatal("the clients never finished")
	}
	if burstErr != nil {
		t.Fatal(burstErr)
	}
	if len(reqs) != n {
		t.Fatalf("%d outcomes for %d requests", len(reqs), n)
	}
	pods := s.e.ReadyPodIPs(app)
	var drained, kept []burstRequest
	for i, r := range reqs {
		if took := r.took(); took >= deadline {
			t.Errorf("request %d took %s, past its %s deadline: %v", i, took.Round(time.Millisecond), deadline, r.Attempts)
		}
		// Every attempt but the last is the drain's 503.
		for _, a := range r.Attempts[:len(r.Attempts)-1] {
			if !isDrainAnswer(a) || a.Answered.Before(deleted) {
				t.Errorf("request %d: want the deleted resolver's 503 with Retry-After, after the deletion; got %s, %s after the deletion",
					i, a, a.Answered.Sub(deleted).Round(time.Millisecond))
			}
		}
		last := r.last()
		var reply echoReply
		if last.Status != http.StatusOK || json.Unmarshal([]byte(last.Body), &reply) != nil {
			t.Errorf("request %d ended with %s; want web's answer (attempts %v)", i, last, r.Attempts)
			continue
		}
		if reply.Path != fmt.Sprintf("/held/%d", i) || !slices.Contains(pods, reply.ServedBy) {
			t.Errorf("request %d answered %+v; want its own path, served by one of web's Ready pods %v", i, reply, pods)
		}
		if last.Header.Get(resolver.DefaultColdStartHeader) == "" {
			t.Errorf("request %d: a held answer has no %s header: %v", i, resolver.DefaultColdStartHeader, last.Header)
		}
		if len(r.Attempts) > 1 {
			drained = append(drained, r)
		} else {
			kept = append(kept, r)
		}
	}
	if len(drained) != onVictim {
		t.Errorf("%s held %d requests when it was deleted, but %d got its 503", victim.Name, onVictim, len(drained))
	}
	s.e.WaitMode(app, elastiv1alpha1.ModeServe)

	after := func(rs []burstRequest, at func(burstRequest) time.Time, from time.Time) string {
		if len(rs) == 0 {
			return "none"
		}
		var ds []time.Duration
		for _, r := range rs {
			ds = append(ds, at(r).Sub(from))
		}
		slices.Sort(ds)
		return fmt.Sprintf("min %s, median %s, max %s", ds[0].Round(time.Millisecond), ds[len(ds)/2].Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond))
	}
	firstAnswer := func(r burstRequest) time.Time { return r.Attempts[0].Answered }
	lastAnswer := func(r burstRequest) time.Time { return r.last().Answered }
	t.Logf("%d requests held: %v; deleted %s; %s later, gone, and all held again: %v; web allowed to start %s after the deletion",
		n, held, victim.Name, heldAgainAt.Sub(deleted).Round(time.Millisecond), heldAgain, released.Sub(deleted).Round(time.Millisecond))
	t.Logf("%d held by the survivor: 200 after web started: %s", len(kept), after(kept, lastAnswer, released))
	t.Logf("%d held by the deleted pod: 503 (Retry-After %s) after the deletion: %s; retried, 200 after web started: %s",
		len(drained), retryAfters(drained), after(drained, firstAnswer, deleted), after(drained, lastAnswer, released))
	sent := reqs[0].Attempts[0].Sent
	for _, r := range reqs {
		if r.Attempts[0].Sent.Before(sent) {
			sent = r.Attempts[0].Sent
		}
	}
	t.Logf("whole requests, from the first sent: %s", after(reqs, lastAnswer, sent))
}

// isDrainAnswer is the answer a resolver gives the requests it holds when
// it shuts down: 503, saying so, with a Retry-After in seconds.
func isDrainAnswer(a burstAttempt) bool {
	after, err := strconv.Atoi(a.Header.Get("Retry-After"))
	return a.Err == "" && a.Status == http.StatusServiceUnavailable && strings.Contains(a.Body, "shutting down") && err == nil && after >= 1
}

// retryAfters lists the distinct Retry-After values of rs' first attempts.
func retryAfters(rs []burstRequest) string {
	var vs []string
	for _, r := range rs {
		if v := r.Attempts[0].Header.Get("Retry-After"); !slices.Contains(vs, v) {
			vs = append(vs, v)
		}
	}
	return strings.Join(vs, ", ")
}

// unschedulableLabel is a node label no node has.
const unschedulableLabel = "elasti.test/no-such-node"

// keepTargetFromStarting makes web's new pods unschedulable, so a wake
// scales web up but no pod of it becomes Ready, and the resolver holds its
// requests while the operator works as usual. letTargetStart undoes it.
func (s *scenario) keepTargetFromStarting() {
	s.t.Helper()
	s.updateApp(func(d *appsv1.Deployment) {
		if d.Spec.Template.Spec.NodeSelector == nil {
			d.Spec.Template.Spec.NodeSelector = map[string]string{}
		}
		d.Spec.Template.Spec.NodeSelector[unschedulableLabel] = "true"
	})
}

func (s *scenario) letTargetStart() {
	s.t.Helper()
	s.updateApp(func(d *appsv1.Deployment) { delete(d.Spec.Template.Spec.NodeSelector, unschedulableLabel) })
}

// updateApp changes web's Deployment.
func (s *scenario) updateApp(change func(*appsv1.Deployment)) {
	s.t.Helper()
	deployments := s.e.Kube.AppsV1().Deployments(s.e.NS)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := deployments.Get(s.ctx, app, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(d)
		_, err = deployments.Update(s.ctx, d, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		s.t.Fatal(err)
	}
}
