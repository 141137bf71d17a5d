package nsbudget

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// items are n items of bytes each, a second apart, named i0 … i(n-1).
func items(n int, bytes int64) []Item {
	out := make([]Item, n)
	for i := range out {
		out[i] = Item{Name: fmt.Sprintf("i%d", i), Created: t0.Add(time.Duration(i) * time.Second), Bytes: bytes}
	}
	return out
}

func TestRefusedAtTheBoundaryAndOnePast(t *testing.T) {
	for _, tc := range []struct {
		name   string
		items  []Item
		limits Limits
		want   []string
	}{
		{"empty", nil, Limits{Count: 3, Bytes: 100}, nil},
		{"count: at the limit", items(3, 1), Limits{Count: 3}, nil},
		{"count: one past", items(4, 1), Limits{Count: 3}, []string{"i3"}},
		{"count: two past", items(5, 1), Limits{Count: 3}, []string{"i3", "i4"}},
		{"bytes: at the limit", items(4, 25), Limits{Bytes: 100}, nil},
		{"bytes: one byte past", append(items(3, 25), Item{Name: "i3", Created: t0.Add(time.Hour), Bytes: 26}), Limits{Bytes: 100}, []string{"i3"}},
		{"bytes: one alone past the limit", items(1, 101), Limits{Bytes: 100}, []string{"i0"}},
		{"both: count binds first", items(4, 10), Limits{Count: 3, Bytes: 1000}, []string{"i3"}},
		{"both: bytes bind first", items(3, 40), Limits{Count: 3, Bytes: 100}, []string{"i2"}},
		{"no limits", items(1000, 1<<20), Limits{}, nil},
		// A refused item stops the run: a small one after it is refused
		// too, so a deletion admits the oldest refused one first.
		{"a small one after a big one", []Item{
			{Name: "a", Created: t0, Bytes: 60},
			{Name: "b", Created: t0.Add(time.Second), Bytes: 60},
			{Name: "c", Created: t0.Add(2 * time.Second), Bytes: 1},
		}, Limits{Bytes: 100}, []string{"b", "c"}},
		// Same second: the name decides, whatever the input order.
		{"ties by name", []Item{
			{Name: "z", Created: t0, Bytes: 1}, {Name: "a", Created: t0, Bytes: 1}, {Name: "m", Created: t0, Bytes: 1},
		}, Limits{Count: 2}, []string{"z"}},
		// The newest go, not the last given.
		{"newest, not last", []Item{
			{Name: "new", Created: t0.Add(time.Hour), Bytes: 1}, {Name: "old", Created: t0, Bytes: 1},
		}, Limits{Count: 1}, []string{"new"}},
	} {
		got := slices.Sorted(maps.Keys(Refused(tc.items, tc.limits)))
		if !slices.Equal(got, tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
			t.Errorf("%s: refused %v, want %v", tc.name, got, tc.want)
		}
	}
}

func es(ns, name string, created time.Time, probeBody int) *elastiv1alpha1.ElastiService {
	e := &elastiv1alpha1.ElastiService{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(created)}}
	e.Spec.Service = name
	if probeBody > 0 {
		e.Spec.ProbeResponse = []elastiv1alpha1.ProbeResponseRule{{Response: elastiv1alpha1.ProbeCannedAnswer{Body: strings.Repeat("x", probeBody)}}}
	}
	return e
}

// A namespace past its budget refuses its newest, and nothing of another
// namespace; a deletion admits the oldest refused one.
func TestTrackerIsPerNamespace(t *testing.T) {
	tr := NewTracker(Limits{Count: 3, Bytes: 1 << 20})
	for i := range 4 {
		tr.Observe(es("greedy", fmt.Sprintf("es-%d", i), t0.Add(time.Duration(i)*time.Second), 0))
	}
	tr.Observe(es("other", "es-9", t0.Add(time.Hour), 0))
	key := func(ns, name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }
	for name, want := range map[types.NamespacedName]bool{
		key("greedy", "es-0"): true, key("greedy", "es-2"): true, key("greedy", "es-3"): false,
		key("other", "es-9"): true, key("other", "never-seen"): true,
	} {
		if got := tr.Admitted(name); got != want {
			t.Errorf("Admitted(%s) = %v, want %v", name, got, want)
		}
	}
	if got := tr.TakeChanged(); !slices.Equal(got, []types.NamespacedName{key("greedy", "es-3")}) {
		t.Errorf("changed = %v, want greedy/es-3, pushed past the budget", got)
	}
	if got := tr.TakeChanged(); got != nil {
		t.Errorf("changed again = %v, want nothing", got)
	}
	tr.Forget(key("greedy", "es-1"))
	if !tr.Admitted(key("greedy", "es-3")) {
		t.Error("es-3 still refused after es-1 went")
	}
	if got := tr.TakeChanged(); !slices.Equal(got, []types.NamespacedName{key("greedy", "es-3")}) {
		t.Errorf("changed = %v, want greedy/es-3, let back in", got)
	}
	// Growing a spec past the byte budget refuses it and everything newer.
	tr.Observe(es("greedy", "es-2", t0.Add(2*time.Second), 1<<20))
	if tr.Admitted(key("greedy", "es-2")) || tr.Admitted(key("greedy", "es-3")) || !tr.Admitted(key("greedy", "es-0")) {
		t.Error("a spec grown past the byte budget: want es-2 and es-3 refused, es-0 admitted")
	}
	if !tr.Admitted(key("other", "es-9")) {
		t.Error("another namespace's ElastiService refused")
	}
}

func TestSizeGrowsWithTheSpec(t *testing.T) {
	small, big := Size(es("ns", "a", t0, 0)), Size(es("ns", "a", t0, 4096))
	if small <= 0 || big < small+4096 {
		t.Errorf("Size = %d without a probe body, %d with 4096 bytes of it", small, big)
	}
}

// A copy the cache already trimmed, seen again on a resync, keeps the
// weight of the spec the apiserver sent; a new generation is weighed anew.
func TestObserveWeighsEachGenerationOnce(t *testing.T) {
	tr := NewTracker(Limits{Bytes: 4096})
	big := es("ns", "a", t0, 5000)
	big.UID, big.Generation = "uid-a", 1
	tr.Observe(big)
	key := types.NamespacedName{Namespace: "ns", Name: "a"}
	if tr.Admitted(key) {
		t.Fatal("a spec past the byte budget admitted")
	}
	trimmed := es("ns", "a", t0, 0)
	trimmed.UID, trimmed.Generation = "uid-a", 1
	tr.Observe(trimmed)
	if tr.Admitted(key) {
		t.Error("the trimmed copy of the same generation was weighed again and admitted")
	}
	shrunk := es("ns", "a", t0, 100)
	shrunk.UID, shrunk.Generation = "uid-a", 2
	tr.Observe(shrunk)
	if !tr.Admitted(key) {
		t.Error("a new, smaller generation is still refused")
	}
}
