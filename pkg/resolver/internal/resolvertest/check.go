package resolvertest

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// Eventually polls cond every 5ms for at most d.
func Eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// CheckNoLeaks fails the test if goroutines running this package's code
// outlive it. Register it first so it runs after every other cleanup.
func CheckNoLeaks(t *testing.T) {
	t.Cleanup(func() {
		var stuck string
		deadline := time.Now().Add(3 * time.Second)
		for {
			stuck = leakedGoroutines()
			if stuck == "" || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if stuck != "" {
			t.Errorf("leaked goroutines:\n%s", stuck)
		}
	})
}

// leakedGoroutines lists the goroutines running code of pkg/resolver or
// its packages, but for the test's own and this package's.
func leakedGoroutines() string {
	buf := make([]byte, 4<<20)
	buf = buf[:runtime.Stack(buf, true)]
	stacks := strings.Split(string(buf), "\n\n")
	var leaked []string
	for _, s := range stacks[1:] { // the first is the caller
		if (strings.Contains(s, "elasti/pkg/resolver.") || strings.Contains(s, "elasti/pkg/resolver/")) && !strings.Contains(s, "testing.tRunner") && !strings.Contains(s, "resolvertest.") {
			leaked = append(leaked, s)
		}
	}
	return strings.Join(leaked, "\n\n")
}
