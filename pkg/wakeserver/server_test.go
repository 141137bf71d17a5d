package wakeserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/directory"
	"github.com/elasti-dev/elasti/pkg/nsbudget"
	"github.com/elasti-dev/elasti/pkg/scaletarget/scaletargettest"
	"github.com/elasti-dev/elasti/pkg/wakeapi"
)

// fakeWakes counts the wakes recorded, and keeps the asks and the held
// reports.
type fakeWakes struct {
	writes atomic.Int32
	mu     sync.Mutex
	asked  []types.NamespacedName
	held   []string
}

func (f *fakeWakes) Held(_ context.Context, es types.NamespacedName, held time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.held = append(f.held, fmt.Sprintf("%s:%s", es, held))
}

func (f *fakeWakes) Record(context.Context, types.NamespacedName, time.Time) { f.writes.Add(1) }

func (f *fakeWakes) Asked(es types.NamespacedName, _ time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, es)
}

func (f *fakeWakes) asks() []types.NamespacedName {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.asked)
}

// shopWebDirectory is a directory where ElastiService shop/web claims
// Service web, waking Deployment web to minTarget, with autoscaler.
func shopWebDirectory(minTarget int32, autoscaler *elastiv1alpha1.AutoscalerSpec) *directory.Directory {
	dir := directory.New(nsbudget.Limits{})
	es := &elastiv1alpha1.ElastiService{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"},
		Spec: elastiv1alpha1.ElastiServiceSpec{
			Service:           "web",
			ScaleTargetRef:    elastiv1alpha1.ScaleTargetRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinTargetReplicas: minTarget,
			Autoscaler:        autoscaler,
		},
	}
	dir.Claim(types.NamespacedName{Namespace: "shop", Name: "web"}, directory.EntryFor(es))
	return dir
}

func setup(t *testing.T, ready bool, scaler *scaletargettest.Scaler) (*Server, *fakeWakes, string) {
	t.Helper()
	return setupWith(t, ready, scaler, DefaultConfig())
}

func setupWith(t *testing.T, ready bool, scaler *scaletargettest.Scaler, cfg Config) (*Server, *fakeWakes, string) {
	t.Helper()
	dir := shopWebDirectory(3, &elastiv1alpha1.AutoscalerSpec{Type: "keda", Name: "web-so"})
	status := &fakeWakes{}
	s := New(context.Background(), dir, scaler, status, func() bool { return ready }, &outcomes{}, cfg)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return s, status, srv.URL + Path
}

const body = `{"count":1,"svc":"web","namespace":"shop"}`

func TestWakeScalesResumesKEDAAndRecordsTheWake(t *testing.T) {
	scaler := &scaletargettest.Scaler{}
	_, wakes, url := setup(t, true, scaler)
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || scaler.Replicas() != 3 {
		t.Fatalf("status %d, replicas %d; want 200 and 3", resp.StatusCode, scaler.Replicas())
	}
	if wakes.writes.Load() != 1 || len(scaler.KEDA()) != 1 || scaler.KEDA()[0] {
		t.Errorf("wakes recorded %d, KEDA calls %v; want one wake and one resume", wakes.writes.Load(), scaler.KEDA())
	}
}

func TestBurstCoalescesIntoOneScale(t *testing.T) {
	scaler := &scaletargettest.Scaler{Delay: 50 * time.Millisecond}
	_, _, url := setup(t, true, scaler)
	var wg sync.WaitGroup
	var ok atomic.Int32
	for range 300 {
		wg.Go(func() {
			resp, err := http.Post(url, "application/json", strings.NewReader(body))
			if err == nil {
				if resp.StatusCode == http.StatusOK {
					ok.Add(1)
				}
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	if ok.Load() != 300 || scaler.Calls() != 1 {
		t.Errorf("%d of 300 answered 200 with %d scale calls; want all and exactly 1", ok.Load(), scaler.Calls())
	}
}

func post(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A request right after a wake, while the cache still shows the target at
// zero, must not scale it a second time.
func TestWakeWhileTheCacheLagsMakesNoSecondWrite(t *testing.T) {
	scaler := &scaletargettest.Scaler{Stale: true}
	_, _, url := setup(t, true, scaler)
	for range 3 {
		if code := post(t, url); code != http.StatusOK {
			t.Fatalf("status %d, want 200", code)
		}
	}
	if n := scaler.Calls(); n != 1 {
		t.Errorf("%d scale writes while the cache lagged, want 1", n)
	}
}

// A target scaled back to zero by someone else right after a wake is woken
// again by the next request, not left asleep for the settle window.
func TestScaleDownRightAfterAWakeIsWokenAgain(t *testing.T) {
	scaler := &scaletargettest.Scaler{}
	_, _, url := setup(t, true, scaler)
	if code := post(t, url); code != http.StatusOK || scaler.Calls() != 1 {
		t.Fatalf("first wake: status %d, %d writes", code, scaler.Calls())
	}
	scaler.ScaleBySomeoneElse(0)
	if code := post(t, url); code != http.StatusOK {
		t.Fatalf("second wake: status %d", code)
	}
	if n := scaler.Calls(); n != 2 || scaler.Replicas() != 3 {
		t.Errorf("after a scale-down within the settle window: %d writes, %d replicas; want 2 and 3", n, scaler.Replicas())
	}
}

func TestAlreadyUpMakesNoWrite(t *testing.T) {
	scaler := scaletargettest.New(5)
	_, status, url := setup(t, true, scaler)
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || scaler.Calls() != 0 || status.writes.Load() != 0 {
		t.Errorf("status %d, scale calls %d, status writes %d; want 200 and no writes", resp.StatusCode, scaler.Calls(), status.writes.Load())
	}
}

// Every request for a known Service is an ask, whatever it scaled: the
// resolver asks again while it holds a request, and the idle poller does
// not undo a wake that has not served while it does. A request that
// names no ElastiService's Service, or that a follower refuses, is none.
func TestEveryRequestForAKnownServiceIsAnAsk(t *testing.T) {
	scaler := scaletargettest.New(5)
	_, status, url := setup(t, true, scaler)
	for range 2 {
		if code := post(t, url); code != http.StatusOK {
			t.Fatalf("already up: %d, want 200", code)
		}
	}
	resp, err := http.Post(url, "application/json", strings.NewReader(`{"count":1,"svc":"other","namespace":"shop"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown Service: %d, want 404", resp.StatusCode)
	}
	want := []types.NamespacedName{{Namespace: "shop", Name: "web"}, {Namespace: "shop", Name: "web"}}
	if got := status.asks(); !slices.Equal(got, want) {
		t.Errorf("asks %v, want %v", got, want)
	}
	_, follower, followerURL := setup(t, false, scaler)
	if code := post(t, followerURL); code != http.StatusServiceUnavailable || len(follower.asks()) != 0 {
		t.Errorf("a follower answered %d and noted asks %v; want 503 and none", code, follower.asks())
	}
}

func TestFailedScaleIs502WithReasonAndIsNotRemembered(t *testing.T) {
	scaler := &scaletargettest.Scaler{Fail: errors.New("deployments.apps \"web\" is forbidden")}
	_, _, url := setup(t, true, scaler)
	for i := range 2 {
		resp, err := http.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b := new(strings.Builder)
		_, _ = readAll(b, resp)
		if resp.StatusCode != http.StatusBadGateway || !strings.Contains(b.String(), "forbidden") {
			t.Errorf("attempt %d: %d %s; want 502 with the reason", i, resp.StatusCode, b)
		}
	}
	if scaler.Calls() != 2 {
		t.Errorf("a failure was cached: %d scale calls for 2 requests", scaler.Calls())
	}
}

func TestNotReadyIs503(t *testing.T) {
	scaler := &scaletargettest.Scaler{}
	_, _, url := setup(t, false, scaler)
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || scaler.Calls() != 0 {
		t.Errorf("status %d with %d scale calls; want 503 and none", resp.StatusCode, scaler.Calls())
	}
}

func readAll(b *strings.Builder, resp *http.Response) (int64, error) {
	defer resp.Body.Close()
	buf := make([]byte, 4096)
	var n int64
	for {
		m, err := resp.Body.Read(buf)
		b.Write(buf[:m])
		n += int64(m)
		if err != nil {
			return n, nil
		}
	}
}

// A resolver's report of a held request reaches the ElastiService that
// manages its Service (status.lastHeld), and nothing else: a report for
// an unknown Service, a malformed one, a wait out of bounds, a GET and a
// follower's are refused, each with its reason, and none scales anything.
func TestHeldReportsAreRecordedForKnownServicesOnly(t *testing.T) {
	scaler := scaletargettest.New(0)
	_, wakes, url := setup(t, true, scaler)
	heldURL := strings.TrimSuffix(url, Path) + wakeapi.HeldPath
	for _, tc := range []struct {
		name, method, body string
		want               int
	}{
		{"a report", http.MethodPost, string(wakeapi.EncodeHeld("shop", "web", 603*time.Millisecond)), http.StatusAccepted},
		{"an unknown Service", http.MethodPost, `{"svc":"other","namespace":"shop","heldMillis":5}`, http.StatusNotFound},
		{"a negative wait", http.MethodPost, `{"svc":"web","namespace":"shop","heldMillis":-1}`, http.StatusBadRequest},
		{"one past the bound", http.MethodPost, `{"svc":"web","namespace":"shop","heldMillis":86400001}`, http.StatusBadRequest},
		{"at the bound", http.MethodPost, `{"svc":"web","namespace":"shop","heldMillis":86400000}`, http.StatusAccepted},
		{"no Service", http.MethodPost, `{"namespace":"shop","heldMillis":5}`, http.StatusBadRequest},
		{"a body past MaxBodyBytes", http.MethodPost, `{"svc":"web","namespace":"shop","heldMillis":5,"x":"` + strings.Repeat("a", wakeapi.MaxBodyBytes) + `"}`, http.StatusRequestEntityTooLarge},
		{"a GET", http.MethodGet, "", http.StatusMethodNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, heldURL, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b := new(strings.Builder)
			_, _ = readAll(b, resp)
			if resp.StatusCode != tc.want {
				t.Errorf("%d %s; want %d", resp.StatusCode, b, tc.want)
			}
		})
	}
	wakes.mu.Lock()
	held := slices.Clone(wakes.held)
	wakes.mu.Unlock()
	if want := []string{"shop/web:603ms", "shop/web:24h0m0s"}; !slices.Equal(held, want) {
		t.Errorf("held reports recorded %q, want %q", held, want)
	}
	if scaler.Calls() != 0 || len(wakes.asks()) != 0 {
		t.Errorf("a report scaled (%d calls) or counted as an ask (%v)", scaler.Calls(), wakes.asks())
	}
	_, follower, followerURL := setup(t, false, scaler)
	resp, err := http.Post(strings.TrimSuffix(followerURL, Path)+wakeapi.HeldPath, "application/json",
		strings.NewReader(string(wakeapi.EncodeHeld("shop", "web", time.Second))))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || len(follower.held) != 0 {
		t.Errorf("a follower answered %d and recorded %v; want 503 and nothing", resp.StatusCode, follower.held)
	}
}
