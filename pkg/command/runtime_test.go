package command_test

import (
	"runtime"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/elasti-dev/elasti/pkg/command"
)

// keep is reachable from a package variable, so the GC counts it live.
var keep []byte

// The runtime collectors keep client_golang's defaults and add the live
// heap, which follows what the process keeps: it grows by what a package
// variable holds after a GC, where RSS under GOMEMLIMIT would not say.
func TestRuntimeCollectorsExposeTheLiveHeap(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(command.RuntimeCollectors()...)
	live := func() float64 {
		t.Helper()
		runtime.GC()
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		names := map[string]float64{}
		for _, f := range families {
			if m := f.GetMetric(); len(m) == 1 && m[0].GetGauge() != nil {
				names[f.GetName()] = m[0].GetGauge().GetValue()
			}
		}
		for _, want := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "process_resident_memory_bytes"} {
			if _, ok := names[want]; !ok {
				t.Fatalf("%s is missing: the defaults must stay", want)
			}
		}
		v, ok := names["go_gc_heap_live_bytes"]
		if !ok || v <= 0 {
			t.Fatalf("go_gc_heap_live_bytes = %v (present %v), want a positive gauge", v, ok)
		}
		return v
	}
	before := live()
	keep = make([]byte, 64<<20)
	for i := range keep {
		keep[i] = byte(i)
	}
	after := live()
	if grew := after - before; grew < 60<<20 {
		t.Errorf("the live heap grew by %.0f bytes after 64 MiB were kept, want about 64 MiB", grew)
	}
	keep = nil
	if freed := after - live(); freed < 60<<20 {
		t.Errorf("the live heap fell by %.0f bytes after they were let go, want about 64 MiB", freed)
	}
}
