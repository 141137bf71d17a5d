package traffic

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/test/localcluster/realnet"
)

const (
	// holdTimeout is web's spec.hold.timeout in the hold-bounds test, far
	// below the resolver's --request-timeout (2m), and holdAppReady how
	// long after its start web's pod listens: past the timeout, so every
	// request held for the first wake meets it.
	holdTimeout  = 4 * time.Second
	holdAppReady = 15 * time.Second
)

// holdAnswer is the JSON body a client past a hold bound reads.
type holdAnswer struct {
	Service, Reason, Message string
	RetryAfterSeconds        int
}

// TestAServicesOwnHoldBoundsThroughKubeProxy: web's ElastiService sets
// spec.hold (a 4 s timeout, one request held at once on each resolver
// pod), and web's pod listens, and so passes its readiness probe, 15 s
// after it starts. Of three requests by ClusterIP at once, two reach one
// of the two resolver pods, so at least one is past maxRequests: it gets
// 503 with Retry-After at once, its body naming HoldMaxRequests. The ones
// held get 503 HoldTimeout once their 4 s are over, not the resolver's 2
// minutes. Once the pod is Ready, a request is answered by it. A timeout
// past the API's hour is refused by the operator (InvalidSpec), with the
// field named.
func TestAServicesOwnHoldBoundsThroughKubeProxy(t *testing.T) {
	parallelPrometheusScenario(t) // waits on its own Service only, restarts nothing
	s := newScenario(t)
	// Set before the sleep, so that the resolvers' caches have it by the
	// time the Service sleeps: seconds, where their watches take
	// milliseconds.
	s.e.UpdateSpec(app, func(es *elastiv1alpha1.ElastiService) {
		es.Spec.Hold = &elastiv1alpha1.Hold{Timeout: holdTimeout.String(), MaxRequests: 1}
	})
	s.sleep()
	s.runLateReadyApp(holdAppReady, "/")

	sent := time.Now()
	burst := s.do(realnet.Request{URL: "http://" + s.clusterIP() + "/held", Parallel: 3, Timeout: time.Minute,
		Header: map[string]string{"Accept": "application/json"}})
	reasons := map[string]int{}
	for i, r := range burst.Parallel {
		var a holdAnswer
		if r.Status != http.StatusServiceUnavailable || json.Unmarshal([]byte(r.Body), &a) != nil || a.Service != s.e.NS+"/"+app {
			t.Fatalf("request %d: %s, want 503 with a JSON body naming %s/%s", i, r, s.e.NS, app)
		}
		if r.Header.Get("Retry-After") == "" || a.RetryAfterSeconds < 1 {
			t.Errorf("request %d: no Retry-After: %s", i, r)
		}
		reasons[a.Reason]++
		if a.Reason == "HoldTimeout" && r.Duration < holdTimeout {
			t.Errorf("request %d: HoldTimeout after %s, before its %s", i, r.Duration, holdTimeout)
		}
	}
	if reasons["HoldMaxRequests"] < 1 || reasons["HoldTimeout"] < 1 || reasons["HoldMaxRequests"]+reasons["HoldTimeout"] != 3 {
		t.Fatalf("reasons %v of three requests at once, want at least one past maxRequests and one past the timeout: %+v", reasons, burst.Parallel)
	}
	if took := time.Since(sent); took > time.Minute {
		t.Errorf("the burst took %s: the resolver's own timeout, not the Service's", took)
	}

	// The held requests woke web: once its pod listens, one is answered.
	s.e.EventuallyWithin("web to answer once its pod listens", time.Minute, func() (bool, string) {
		resp := s.do(realnet.Request{URL: "http://" + s.clusterIP() + "/", Timeout: 10 * time.Second})
		return resp.Status == http.StatusOK, resp.String()
	})

	// Past the API's bound the operator refuses the spec, naming the field.
	s.e.UpdateSpec(app, func(es *elastiv1alpha1.ElastiService) { es.Spec.Hold.Timeout = "1h0m1s" })
	es := s.e.WaitReason(app, metav1.ConditionFalse, "InvalidSpec")
	if c := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionReady); c == nil || !strings.Contains(c.Message, "spec.hold.timeout") {
		t.Errorf("InvalidSpec without the field: %+v", c)
	}
}
