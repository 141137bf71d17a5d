package traffic

import (
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/elasti-dev/elasti/test/localcluster/realnet"
)

// stalledSlicesBound bounds the freeze of kube-controller-manager in
// TestHoldDoesNotWaitOnTheEndpointSliceController: longer than a wake
// on the bed under load, so a hold released while it lasts was released
// without the EndpointSlice controller.
const stalledSlicesBound = 30 * time.Second

// TestHoldDoesNotWaitOnTheEndpointSliceController reproduces the tail's
// mechanism (issue 39): the EndpointSlice controller backing off a
// Service while its pod is Ready. Here it writes nothing at all: the
// whole kube-controller-manager is frozen the moment the ReplicaSet
// controller has made web's pod for the wake, before the pod has an
// address, so no slice can list the pod, Ready or not. The held request
// must still be answered, by that pod, while the controller is frozen:
// the resolver learns the pod's address and Ready from the pod itself
// (the pod view). Before the view it waited for the slice, that is for
// the thaw: the request timed out here.
func TestHoldDoesNotWaitOnTheEndpointSliceController(t *testing.T) {
	s := newScenario(t)
	s.sleep()
	list, err := s.e.Kube.CoreV1().Pods(s.e.NS).List(s.ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.e.Kube.CoreV1().Pods(s.e.NS).Watch(s.ctx, metav1.ListOptions{LabelSelector: "app=" + app, ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	var (
		mu       sync.Mutex
		frozenAt time.Time
		thaw     = func() {}
		podName  string
	)
	t.Cleanup(func() { mu.Lock(); defer mu.Unlock(); thaw() })
	watched := make(chan error, 1)
	go func() {
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type != watch.Added {
				continue
			}
			mu.Lock()
			th, err := s.bed.cluster.FreezeControllerManager()
			if err == nil {
				thaw, frozenAt, podName = th, time.Now(), pod.Name
			}
			mu.Unlock()
			watched <- err
			return
		}
		watched <- nil
	}()

	sent := time.Now()
	resp := s.do(realnet.Request{URL: "http://" + s.fqdn() + "/stalled", Timeout: stalledSlicesBound})
	answered := time.Now()
	mu.Lock()
	thaw()
	froze, name := frozenAt, podName
	mu.Unlock()
	select {
	case err := <-watched:
		if err != nil {
			t.Fatalf("freezing kube-controller-manager: %v", err)
		}
	default:
	}
	if froze.IsZero() {
		t.Fatalf("web's pod for the wake was never seen made, so the controllers were never frozen; the answer: %s", resp)
	}
	if resp.Status != http.StatusOK {
		t.Fatalf("the held request was answered %s, %s after it was sent, with kube-controller-manager frozen %s after it was sent (pod %s): the hold waited on the EndpointSlice controller",
			resp, answered.Sub(sent).Round(time.Millisecond), froze.Sub(sent).Round(time.Millisecond), name)
	}
	var reply echoReply
	if err := json.Unmarshal([]byte(resp.Body), &reply); err != nil {
		t.Fatalf("not the app's answer: %v: %s", err, resp)
	}
	pod, err := s.e.Kube.CoreV1().Pods(s.e.NS).Get(s.ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if reply.ServedBy != pod.Status.PodIP {
		t.Errorf("answered by %s, not by the wake's pod %s (%s)", reply.ServedBy, name, pod.Status.PodIP)
	}
	t.Logf("answered by %s %s after it was sent; kube-controller-manager frozen from %s, before the pod had an address, until the answer",
		name, answered.Sub(sent).Round(time.Millisecond), froze.Sub(sent).Round(time.Millisecond))
}
