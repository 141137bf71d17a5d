package resolvertest

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// What the benchmarks measure of the process's memory.

// LiveHeap is the bytes the heap holds after two collections, for a
// benchmark to measure what a structure keeps.
func LiveHeap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// PeakSampler follows the largest heap and stacks in use, sampled every
// 20 ms, until stop, which returns it.
type PeakSampler struct {
	done chan struct{}
	max  atomic.Uint64
	once sync.Once
	wg   sync.WaitGroup
}

// NewPeakSampler starts sampling.
func NewPeakSampler() *PeakSampler {
	p := &PeakSampler{done: make(chan struct{})}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if v := ms.HeapInuse + ms.StackInuse; v > p.max.Load() {
				p.max.Store(v)
			}
			select {
			case <-p.done:
				return
			case <-t.C:
			}
		}
	}()
	return p
}

// Stop ends the sampling and returns the largest sample.
func (p *PeakSampler) Stop() uint64 {
	p.once.Do(func() { close(p.done); p.wg.Wait() })
	return p.max.Load()
}

// MemSample is the heap and stacks in use (GoMem) and the resident set
// (RSS), in bytes.
type MemSample struct{ GoMem, RSS uint64 }

// MemNow returns the heap and stacks in use after a collection, and the
// process's resident set.
func MemNow() MemSample {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s := MemSample{GoMem: ms.HeapInuse + ms.StackInuse}
	if status, err := os.ReadFile("/proc/self/status"); err == nil {
		sc := bufio.NewScanner(strings.NewReader(string(status)))
		for sc.Scan() {
			if kb, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
				n, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(kb), "kB")), 10, 64)
				s.RSS = n << 10
			}
		}
	}
	return s
}
