package traffic

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/resolver"
	"github.com/elasti-dev/elasti/test/localcluster/realnet"
)

const (
	// slowWakeCooldown is web's cooldownPeriod in the slow-wake test, and
	// slowWakeReady how long after its start web's pod listens and passes
	// its readiness probe: more than the cooldown and two of the bed's
	// polls (pollingInterval), so a poller that counts the cooldown from
	// the scale-up alone scales the pod away before it is Ready, every
	// time.
	slowWakeCooldown = 2 * time.Second
	slowWakeReady    = 10 * time.Second
	// slowWakeSleepBound bounds how long after its answer web goes back
	// to sleep: the cooldown, the kubelet's Ready and the status write of
	// the switch to serve, and a poll, on a loaded machine; below the 30 s
	// grace the poller gives a resolver's last ask for a wake that has
	// not served.
	slowWakeSleepBound = 20 * time.Second
)

// TestScaleDownWaitsForAWakeThatHasNotServed: web's triggers always read
// idle and its cooldown is 2 s, and its pod needs 10 s to be Ready. A
// request wakes it and is held. The operator must not scale the target
// down under the held request: the request gets the first pod's answer,
// and the Deployment's replicas never go back to zero before it. Once the
// wake has served, the operator puts web to sleep again by itself: the
// wait is for the wake, not forever. Before, the cooldown counted from the
// scale-up alone; the pod was scaled away 2-4 s into its start, every wake
// after it too, and the request was never answered (CI's cold-start gate,
// stop 44: a pod deleted 8 s into a loaded wake, and a 502).
func TestScaleDownWaitsForAWakeThatHasNotServed(t *testing.T) {
	s := newScenario(t)
	s.sleep()
	s.e.UpdateSpec(app, func(es *elastiv1alpha1.ElastiService) {
		es.Spec.CooldownPeriod = int32(slowWakeCooldown / time.Second)
		es.Spec.Triggers = []elastiv1alpha1.ScaleTrigger{trigger("vector(0)", "1")}
	})
	s.runLateReadyApp(slowWakeReady, "/")
	replicas := s.watchReplicas()

	sent := time.Now()
	resp := s.do(realnet.Request{URL: "http://" + s.fqdn() + "/slow", Timeout: wakeTimeout})
	answered := time.Now()
	timeline := replicas.since(sent)
	if resp.Status != http.StatusOK {
		t.Fatalf("the held request was answered %s; the target's replicas meanwhile:\n%s", resp, timeline)
	}
	// The resolver's own readiness check may pass before the kubelet's,
	// so the pod that answers need not be Ready yet: it must be web's
	// pod of this wake.
	var reply echoReply
	if err := json.Unmarshal([]byte(resp.Body), &reply); err != nil {
		t.Fatalf("not the app's answer: %v: %s", err, resp)
	}
	if resp.Header.Get(resolver.DefaultColdStartHeader) == "" {
		t.Errorf("a held response has no %s header: %v", resolver.DefaultColdStartHeader, resp.Header)
	}
	pods, err := s.e.Kube.CoreV1().Pods(s.e.NS).List(s.ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(pods.Items, func(p corev1.Pod) bool {
		return p.Status.PodIP == reply.ServedBy && !p.CreationTimestamp.Time.Before(sent.Truncate(time.Second))
	}) {
		t.Errorf("answered by %s, not by a pod of %s made by this wake", reply.ServedBy, app)
	}
	if downs := replicas.zeroBetween(sent, answered); len(downs) > 0 {
		t.Errorf("the target was scaled to zero under the held request, at %v; its replicas:\n%s", downs, timeline)
	}
	if took := answered.Sub(sent); took < slowWakeReady {
		t.Errorf("answered %s after it was sent, before the pod could be Ready (%s): the test did not make a slow wake", took, slowWakeReady)
	}
	s.e.Eventually("the operator to put web to sleep again once its wake has served", func() (bool, string) {
		return len(replicas.zeroBetween(answered, time.Now())) > 0, "replicas:\n" + replicas.since(sent)
	})
	slept := replicas.zeroBetween(answered, time.Now())[0]
	t.Logf("answered %s after it was sent; the target's replicas:\n%s", answered.Sub(sent).Round(time.Millisecond), replicas.since(sent))
	// Once served, the wait is the cooldown from the first Ready pod and
	// a poll or two, not the grace of a resolver's last ask (30 s): a
	// wake that has served is no longer waited for.
	if late := slept.Sub(answered); late > slowWakeSleepBound {
		t.Errorf("web slept %s after its wake served; want within %s (cooldown %s, polls every %s); %s",
			late.Round(time.Millisecond), slowWakeSleepBound, slowWakeCooldown, pollingInterval, s.sleepWakeStatus())
	}
}

// sleepWakeStatus is web's ElastiService's status as the poller reads it
// to decide whether a wake has served, for a failure's evidence.
func (s *scenario) sleepWakeStatus() string {
	es := s.e.Get(app)
	st, err := json.Marshal(es.Status)
	if err != nil {
		return err.Error()
	}
	return "its status now: " + string(st)
}

// replicaLog is web's Deployment's spec.replicas as a watch saw it change.
type replicaLog struct {
	mu     sync.Mutex
	writes []replicaWrite
}

type replicaWrite struct {
	at       time.Time
	replicas int32
}

// watchReplicas watches web's Deployment from now until the test ends.
func (s *scenario) watchReplicas() *replicaLog {
	s.t.Helper()
	d, err := s.e.Kube.AppsV1().Deployments(s.e.NS).Get(s.ctx, app, metav1.GetOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	w, err := s.e.Kube.AppsV1().Deployments(s.e.NS).Watch(s.ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", app).String(), ResourceVersion: d.ResourceVersion,
	})
	if err != nil {
		s.t.Fatal(err)
	}
	l := &replicaLog{writes: []replicaWrite{{at: time.Now(), replicas: *d.Spec.Replicas}}}
	done := make(chan struct{})
	s.t.Cleanup(func() { w.Stop(); <-done })
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			d, ok := ev.Object.(*appsv1.Deployment)
			if !ok || d.Spec.Replicas == nil {
				continue
			}
			l.mu.Lock()
			if last := l.writes[len(l.writes)-1]; last.replicas != *d.Spec.Replicas {
				l.writes = append(l.writes, replicaWrite{at: time.Now(), replicas: *d.Spec.Replicas})
			}
			l.mu.Unlock()
		}
	}()
	return l
}

// zeroBetween is when the replicas were seen going to zero in (from, to].
func (l *replicaLog) zeroBetween(from, to time.Time) []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []time.Time
	for _, w := range l.writes {
		if w.replicas == 0 && w.at.After(from) && !w.at.After(to) {
			out = append(out, w.at)
		}
	}
	return out
}

// since lists the changes, by their time after from.
func (l *replicaLog) since(from time.Time) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, w := range l.writes {
		fmt.Fprintf(&b, "  %+v: %d\n", w.at.Sub(from).Round(time.Millisecond), w.replicas)
	}
	return b.String()
}
