package resolver

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/elasti-dev/elasti/pkg/resolver/internal/resolvertest"
)

// The requests a wake held are released together, and the operator is
// told once how long they waited: the first, the longest. A wake within
// heldReportSpacing is not reported again; the report never delays an
// answer.
func TestHeldRequestsAreReportedOncePerWake(t *testing.T) {
	resolvertest.CheckNoLeaks(t)
	e := newEnv(t, testConfig())
	e.backend(t, "10.244.0.5:8080", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "pod") }))
	const heldFor = 300 * time.Millisecond
	first := fetchAsync(t, e)
	resolvertest.Eventually(t, 5*time.Second, "the first request held", func() bool { return e.r.holds.Held(testSvc) == 1 })
	time.Sleep(heldFor)
	second := fetchAsync(t, e)
	resolvertest.Eventually(t, 5*time.Second, "both held", func() bool { return e.r.holds.Held(testSvc) == 2 })
	e.eps.Set(testSvc, "10.244.0.5:8080")
	wantAnswer(t, first, "200 pod", 5*time.Second, "the first held request was not released")
	wantAnswer(t, second, "200 pod", 5*time.Second, "the second held request was not released")
	resolvertest.Eventually(t, 5*time.Second, "the report", func() bool { return len(e.op.heldReports()) > 0 })

	e.eps.Set(testSvc) // asleep again, and woken again within the spacing
	third := fetchAsync(t, e)
	resolvertest.Eventually(t, 5*time.Second, "the third request held", func() bool { return e.r.holds.Held(testSvc) == 1 })
	e.eps.Set(testSvc, "10.244.0.5:8080")
	wantAnswer(t, third, "200 pod", 5*time.Second, "the third held request was not released")
	e.r.held.Close() // waits for any report under way

	reports := e.op.heldReports()
	if len(reports) != 1 {
		t.Fatalf("reports %+v, want one", reports)
	}
	rep := reports[0]
	if rep.Namespace != testSvc.Namespace || rep.Svc != testSvc.Name || rep.Held() < heldFor || rep.Held() > heldFor+5*time.Second {
		t.Errorf("report %+v, want %s's first request, held at least %s", rep, testSvc, heldFor)
	}
}
