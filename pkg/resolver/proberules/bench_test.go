package proberules

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	v1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
	"github.com/elasti-dev/elasti/pkg/resolver/internal/resolvertest"
)

// probeBenchFleet is how many ElastiServices BenchmarkProbeIndexMemory
// indexes.
const probeBenchFleet = 1000

// BenchmarkProbeIndexMemory measures what the resolver keeps for
// probeBenchFleet ElastiServices at the largest specs the CRD accepts: the
// informer's objects (an indexer, fed objects decoded from JSON as from the
// wire, so no string is shared between them) and the Index's compiled
// rules. Every list is at its maxItems and every string at its maxLength;
// the shapes differ in how they spend the regular-expression budget, which
// is what the compiled rules cost:
//
//   - exact: no regular expression;
//   - small: as many short expressions as fit, where the per-expression
//     overhead weighs most;
//   - repeat: one expression that uses the whole budget;
//   - literal: the longest literal expression, then small ones;
//   - unicode: a Unicode class, whose ranges are kept with the program,
//     then small ones.
//
// Every other string is at its maxLength in four-byte characters (U+1D11E),
// the most bytes the schema lets through.
//
// Run it with -benchtime=1x: one iteration indexes the whole fleet.
func BenchmarkProbeIndexMemory(b *testing.B) {
	small := repeatString(`kube-probe/[0-9.]+`, 16)
	shapes := []struct {
		name    string
		regexps []string // given, in order, to the rules' path and header values
	}{
		{"exact", nil},
		{"small", small},
		{"repeat", []string{"/h{" + strconv.Itoa(v1.MaxProbeRegexpCost-16-1) + "}"}},
		{"literal", append([]string{"/" + strings.Repeat("h", v1.MaxProbeValueLength-1)}, small...)},
		{"unicode", append([]string{`[\pL\pN]+`}, small...)},
	}
	for _, shape := range shapes {
		b.Run(shape.name, func(b *testing.B) {
			wire, err := json.Marshal(largestSpec(shape.regexps))
			if err != nil {
				b.Fatal(err)
			}
			var perES float64
			for b.Loop() {
				perES = indexFleet(b, wire)
			}
			b.ReportMetric(perES, "heap-B/es")
			b.ReportMetric(perES*probeBenchFleet/(1<<20), "heap-MiB/fleet")
		})
	}
}

// indexFleet decodes probeBenchFleet ElastiServices from wire into an
// indexer and a Index, and returns the heap they keep, per
// ElastiService.
func indexFleet(b *testing.B, wire []byte) float64 {
	// The rules past the budget are each logged; the log is not measured.
	ctx := klog.NewContext(b.Context(), logr.Discard())
	before := resolvertest.LiveHeap()
	store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	p := NewStaticIndex(ctx)
	for i := range probeBenchFleet {
		es := &v1.ElastiService{}
		if err := json.Unmarshal(wire, es); err != nil {
			b.Fatal(err)
		}
		es.Namespace = fmt.Sprintf("team-%04d", i)
		es.Name = "web"
		es.UID = types.UID(fmt.Sprintf("uid-%04d", i))
		es.Generation = 1
		if err := store.Add(es); err != nil {
			b.Fatal(err)
		}
		p.Upsert(es)
	}
	kept := resolvertest.LiveHeap() - before
	if _, ok := p.MatchProbe(clusterview.ServiceRef{Namespace: "team-0000", Name: "web"}, httptest.NewRequest("GET", "/", nil)); ok {
		b.Fatal("a plain GET / matched")
	}
	runtime.KeepAlive(store)
	runtime.KeepAlive(p)
	return float64(kept) / probeBenchFleet
}

// largestSpec is a spec at every probeResponse bound, its path and header
// values taken from regexps, as regular expressions, while they last.
func largestSpec(regexps []string) *v1.ElastiService {
	wide := func(n int) string { return strings.Repeat("\U0001D11E", n) }
	value := func() string { return "/" + wide(v1.MaxProbeValueLength-1) }
	match := func() (string, string) {
		if len(regexps) == 0 {
			return v1.MatchExact, value()
		}
		re := regexps[0]
		regexps = regexps[1:]
		return v1.MatchRegularExpression, re
	}
	es := &v1.ElastiService{Spec: v1.ElastiServiceSpec{Service: "web"}}
	for range v1.MaxProbeRules {
		r := v1.ProbeResponseRule{
			Method:   wide(v1.MaxProbeMethodLength),
			Response: v1.ProbeCannedAnswer{Status: 200, Body: wide(v1.MaxProbeBodyLength)},
		}
		kind, val := match()
		r.Path = &v1.PathMatch{Type: kind, Value: val}
		for range v1.MaxProbeMatches {
			kind, val := match()
			r.Headers = append(r.Headers, v1.NameValueMatch{Name: wide(v1.MaxProbeNameLength), Type: kind, Value: val})
			r.QueryParams = append(r.QueryParams, v1.NameValueMatch{Name: wide(v1.MaxProbeNameLength), Type: v1.MatchExact, Value: value()})
		}
		es.Spec.ProbeResponse = append(es.Spec.ProbeResponse, r)
	}
	return es
}

func repeatString(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}
