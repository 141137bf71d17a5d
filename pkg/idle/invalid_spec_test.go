package idle

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	elastilisters "github.com/elasti-dev/elasti/pkg/generated/listers/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/outcome"
	"github.com/elasti-dev/elasti/pkg/scaletarget/scaletargettest"
	"github.com/elasti-dev/elasti/pkg/triggers"
)

// Even when the controller still says it manages the ElastiService, as
// right after an upgrade that tightened the limits, when a spec that an
// older operator marked Ready reaches the poller before the controller has
// looked at it again: triggers the operator cannot serve never send a
// request to Prometheus, scale nothing, and their event stays short.
func TestInvalidTriggersNeverReachPrometheus(t *testing.T) {
	var requests atomic.Int32
	prom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.Error(w, "unexpected", http.StatusInternalServerError)
	}))
	t.Cleanup(prom.Close)
	meta := func(s string) json.RawMessage { return json.RawMessage(s) }
	for name, list := range map[string][]elastiv1alpha1.ScaleTrigger{
		"1 MiB query":          {{Type: "prometheus", Metadata: meta(`{"query":"` + strings.Repeat("x", 1<<20) + `","threshold":"1"}`)}},
		"1000 triggers":        make([]elastiv1alpha1.ScaleTrigger, 1000),
		"11 valid triggers":    repeatTrigger(elastiv1alpha1.ScaleTrigger{Type: "prometheus", Metadata: meta(`{"query":"q","threshold":"1"}`)}, 11),
		"unknown trigger type": {{Type: "cpu", Metadata: meta(`{"query":"q","threshold":"1"}`)}},
		"ftp serverAddress":    {{Type: "prometheus", Metadata: meta(`{"query":"q","threshold":"1","serverAddress":"ftp://p"}`)}},
	} {
		t.Run(name, func(t *testing.T) {
			es := elastiService(func(es *elastiv1alpha1.ElastiService) { es.Spec.Triggers = list })
			scaler := scaletargettest.New(2)
			indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
			_ = indexer.Add(es)
			recorder := record.NewFakeRecorder(10)
			p := New(elastilisters.NewElastiServiceLister(indexer), scaler, fakeRouter{}, wakeLog(nil), recorder, observer{}, noEvaluations{}, Config{
				Interval: time.Second, Parallelism: 1, QueryTimeout: time.Second,
				Defaults: triggers.Defaults{ServerAddress: prom.URL},
			})
			p.clock = clocktesting.NewFakePassiveClock(now)
			got, reason := p.Evaluate(context.Background(), es)
			if got != outcome.IdleTriggerError || reason != triggers.ReasonInvalidMetadata || len(scaler.Scaled()) != 0 {
				t.Errorf("outcome %s/%s, scaled %v; want a trigger error with InvalidMetadata and no scale", got, reason, scaler.Scaled())
			}
			if event := <-recorder.Events; len(event) > 1024 {
				t.Errorf("a %d-byte event", len(event))
			}
		})
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("Prometheus got %d requests", n)
	}
}

func repeatTrigger(t elastiv1alpha1.ScaleTrigger, n int) []elastiv1alpha1.ScaleTrigger {
	list := make([]elastiv1alpha1.ScaleTrigger, n)
	for i := range list {
		list[i] = t
	}
	return list
}
