package realnode

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/elasti-dev/elasti/hack/sampleapp/answer"
	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/resolver"
	"github.com/elasti-dev/elasti/test/localcluster/realnet"
	"github.com/elasti-dev/elasti/test/testenv"
)

// slowTestReady is when the slow app of TestAHeldRequestOutlastsTheOldDefaultOnTheRealNode
// is ready: past the resolver's default hold (--request-timeout, 2m).
const slowTestReady = resolver.DefaultRequestTimeout + 10*time.Second

// TestAHeldRequestOutlastsTheOldDefaultOnTheRealNode (issue 41): a real
// container that is ready only 2m10s after it starts, past the resolver's
// own hold of 2 minutes, under an ElastiService whose spec.hold allows
// 4 minutes. A request by short name sent while it sleeps is held for the
// whole start and answered by the woken pod after its readiness passed:
// the Service's own bound, not the resolver's default, decides. The
// 5-minute start with 1,000 held is BenchmarkSlowStartOnTheRealNode.
func TestAHeldRequestOutlastsTheOldDefaultOnTheRealNode(t *testing.T) {
	b := testBed(t)
	e := testenv.New(t)
	b.sampleApp(t, e, app, 1, func(c *corev1.Container) { c.ReadinessProbe.HTTPGet.Path = "/ready" })
	e.ElastiServiceWith(app, app, elastiv1alpha1.KindDeployment, app, func(es *elastiv1alpha1.ElastiService) {
		es.Spec.MinTargetReplicas = 1
		es.Spec.Hold = &elastiv1alpha1.Hold{Timeout: "4m"}
	})
	e.WaitMode(app, elastiv1alpha1.ModeServe)
	client, err := b.net.Client(t.Context(), e.NS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	b.sleep(t, e)
	becomeSlow(t, e, slowTestReady)

	resp, err := client.Do(t.Context(), realnet.Request{URL: "http://" + app + "/held", Timeout: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var reply answer.Reply
	if resp.Status != http.StatusOK || json.Unmarshal([]byte(resp.Body), &reply) != nil || reply.FirstReady == 0 || reply.Early != 0 {
		t.Fatalf("%s, want the woken pod's answer after its readiness passed%s", resp, b.diagnose())
	}
	if resp.Duration < resolver.DefaultRequestTimeout {
		t.Errorf("answered after %s, within the resolver's default hold of %s: the test proves nothing", resp.Duration, resolver.DefaultRequestTimeout)
	}
	if resp.Header.Get(resolver.DefaultColdStartHeader) == "" {
		t.Errorf("no %s header: the request was not held by the resolver (%s)", resolver.DefaultColdStartHeader, resp)
	}
	beyond := time.Duration(reply.Arrived-reply.FirstReady) * time.Microsecond
	t.Logf("held %s, answered %s after the app's first readiness 200", resp.Duration.Round(time.Millisecond), beyond)
}
