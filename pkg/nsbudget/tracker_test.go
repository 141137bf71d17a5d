package nsbudget

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

// The tracker skips the sort for a namespace within both limits; its
// admissions and its changed keys must stay those of Refused over the
// namespace's items, recomputed from scratch after every step, across the
// count's and the bytes' boundaries both ways (adds, spec growth and
// shrinkage, deletions).
func TestTrackerAgreesWithRefusedAcrossTheBoundaries(t *testing.T) {
	limits := Limits{Count: 5, Bytes: 0}
	sized := es("ns", "probe", t0, 0)
	base := Size(sized)
	limits.Bytes = 5*base + 300
	r := rand.New(rand.NewPCG(1, 2))
	tr := NewTracker(limits)
	live := map[string]*elastiv1alpha1.ElastiService{}
	admitted := map[string]bool{}
	for step := range 2000 {
		name := fmt.Sprintf("es-%d", r.IntN(9))
		if e, ok := live[name]; ok && r.IntN(3) == 0 {
			delete(live, name)
			tr.Forget(e.Key())
		} else {
			created := t0.Add(time.Duration(r.IntN(9)) * time.Second)
			if ok {
				created = e.CreationTimestamp.Time
			}
			e := es("ns", name, created, r.IntN(3)*60)
			e.Generation = int64(step + 1)
			live[name] = e
			tr.Observe(e)
		}
		var its []Item
		for _, e := range live {
			its = append(its, ItemOf(e))
		}
		refused := Refused(its, limits)
		changed := map[string]bool{}
		for _, k := range tr.TakeChanged() {
			changed[k.Name] = true
		}
		for name := range live {
			key := types.NamespacedName{Namespace: "ns", Name: name}
			if got := tr.Admitted(key); got == refused[name] {
				t.Fatalf("step %d: Admitted(%s) = %v; Refused over %d items says refused = %v", step, name, got, len(its), refused[name])
			}
			if was, seen := admitted[name]; seen && was != !refused[name] && !changed[name] {
				t.Fatalf("step %d: %s's admission changed to %v and was not reported", step, name, !refused[name])
			}
			admitted[name] = !refused[name]
		}
		for name := range admitted {
			if live[name] == nil {
				delete(admitted, name)
			}
		}
	}
}

// maximalSpec is an ElastiService of namespace "fleet" with a
// probeResponse near the CRD's largest (8 rules of long headers and query
// parameters), about 18 KB as JSON: what the real node's limits test
// creates 999 of, and then deletes with its namespace.
func maximalSpec(i int) *elastiv1alpha1.ElastiService {
	e := &elastiv1alpha1.ElastiService{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: fmt.Sprintf("fleet-%04d", i),
		UID: types.UID(fmt.Sprint(i)), Generation: 1, CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(i) * time.Second))}}
	e.Spec.ProbeResponse = make([]elastiv1alpha1.ProbeResponseRule, 8)
	for r := range e.Spec.ProbeResponse {
		rule := &e.Spec.ProbeResponse[r]
		rule.Path = &elastiv1alpha1.PathMatch{Type: "Exact", Value: strings.Repeat("p", 128)}
		for h := range 4 {
			rule.Headers = append(rule.Headers, elastiv1alpha1.NameValueMatch{Name: fmt.Sprintf("h%d-%s", h, strings.Repeat("x", 60)), Type: "Exact", Value: strings.Repeat("v", 128)})
			rule.QueryParams = append(rule.QueryParams, elastiv1alpha1.NameValueMatch{Name: fmt.Sprintf("q%d-%s", h, strings.Repeat("x", 60)), Type: "Exact", Value: strings.Repeat("v", 128)})
		}
		rule.Response.Body = strings.Repeat("b", 256)
	}
	return e
}

// BenchmarkTrackerNamespaceDeletion is a namespace of 1,000 maximal specs
// deleted: each ElastiService's generation moves (its deletionTimestamp),
// then it goes. Both run for every event on the operator's and each
// resolver's informer; the figures are per event.
func BenchmarkTrackerNamespaceDeletion(b *testing.B) {
	const n = 1000
	var observe, forget time.Duration
	for range b.N {
		b.StopTimer()
		tr := NewTracker(Defaults())
		fleet := make([]*elastiv1alpha1.ElastiService, n)
		for i := range fleet {
			fleet[i] = maximalSpec(i)
			tr.Observe(fleet[i])
		}
		b.StartTimer()
		start := time.Now()
		for _, e := range fleet {
			e.Generation++
			tr.Observe(e)
		}
		observe += time.Since(start)
		start = time.Now()
		for _, e := range fleet {
			tr.Forget(e.Key())
		}
		forget += time.Since(start)
	}
	b.ReportMetric(float64(observe.Microseconds())/float64(b.N*n), "observe-µs/event")
	b.ReportMetric(float64(forget.Microseconds())/float64(b.N*n), "forget-µs/event")
}
