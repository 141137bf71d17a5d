package workloop

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"
)

// drain takes every waiting key in the order workers would get them, each
// marked done at once.
func drain(t *testing.T, l *Loop[string]) []string {
	t.Helper()
	var got []string
	for l.Len() > 0 {
		key, quit := l.queue.Get()
		if quit {
			t.Fatal("queue shut down")
		}
		got = append(got, key)
		l.queue.Done(key)
	}
	return got
}

func TestUrgentKeysGoFirstInTheirOrder(t *testing.T) {
	l, _ := newTestLoop(t, noSync)
	l.Add("a")
	l.AddUrgent("u1")
	l.Add("b")
	l.AddUrgent("u2")
	if got, want := drain(t, l), []string{"u1", "u2", "a", "b"}; !slices.Equal(got, want) {
		t.Errorf("order = %v, want %v", got, want)
	}
}

func TestUrgentAddOfAWaitingKeyMovesItOnce(t *testing.T) {
	l, _ := newTestLoop(t, noSync)
	for _, k := range []string{"a", "b", "c"} {
		l.Add(k)
	}
	l.AddUrgent("b")
	l.AddUrgent("b") // already in the urgent lane: stays where it is
	l.Add("b")
	if n := l.Len(); n != 3 {
		t.Fatalf("Len = %d, want 3 (a key waits once)", n)
	}
	if got, want := drain(t, l), []string{"b", "a", "c"}; !slices.Equal(got, want) {
		t.Errorf("order = %v, want %v", got, want)
	}
}

// A key moved to the urgent lane leaves a copy behind in the normal one; a
// later plain add of the same key must come after the keys that were
// ahead of it then, and only once.
func TestKeyAddedAgainAfterAMoveIsSyncedOnce(t *testing.T) {
	l, _ := newTestLoop(t, noSync)
	l.Add("a")
	l.Add("b")
	l.AddUrgent("a")
	key, _ := l.queue.Get()
	if key != "a" {
		t.Fatalf("first key = %q, want a", key)
	}
	l.queue.Done(key)
	l.Add("a")
	l.Add("c")
	if got, want := drain(t, l), []string{"b", "a", "c"}; !slices.Equal(got, want) {
		t.Errorf("order = %v, want %v", got, want)
	}
}

// An urgent add while the key is being synced makes its next sync urgent.
func TestUrgentAddDuringASyncCountsForTheNext(t *testing.T) {
	l, _ := newTestLoop(t, noSync)
	l.Add("a")
	key, _ := l.queue.Get()
	l.Add("b")
	l.AddUrgent("a")
	l.queue.Done(key)
	if got, want := drain(t, l), []string{"a", "b"}; !slices.Equal(got, want) {
		t.Errorf("order = %v, want %v", got, want)
	}
}

// newFairTestLoop is newTestLoop with keys "tenant/name".
func newFairTestLoop(t *testing.T, sync SyncFunc[string]) *Loop[string] {
	t.Helper()
	l := NewFair("fair", tenantOfTestKey, sync, nil)
	t.Cleanup(l.ShutDown)
	return l
}

func tenantOfTestKey(key string) string {
	tenant, _, _ := strings.Cut(key, "/")
	return tenant
}

func keys(tenant string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s/%d", tenant, i)
	}
	return out
}

// A namespace that queued a thousand keys (a fleet deleted at once) costs
// another namespace's new key one turn. Arrival order alone made it wait
// for all thousand (the 07:28 CI failure, docs/ci.md).
func TestTenantsTakeTurns(t *testing.T) {
	l := newFairTestLoop(t, noSync)
	for _, k := range keys("a", 1000) {
		l.Add(k)
	}
	l.Add("b/0")
	l.Add("b/1")
	got := drain(t, l)
	if len(got) != 1002 {
		t.Fatalf("drained %d keys, want 1002", len(got))
	}
	if want := []string{"a/0", "b/0", "a/1", "b/1", "a/2"}; !slices.Equal(got[:5], want) {
		t.Errorf("first keys = %v, want %v", got[:5], want)
	}
	var aOrder []string
	for _, k := range got {
		if strings.HasPrefix(k, "a/") {
			aOrder = append(aOrder, k)
		}
	}
	if !slices.Equal(aOrder, keys("a", 1000)) {
		t.Error("a tenant's own keys left their arrival order")
	}
}

// Urgent keys of every tenant go before plain ones, the tenants taking
// turns within each lane, and a plain key gets one pop in
// 1+urgentPerPlain while urgent ones wait.
func TestUrgentKeysOfEveryTenantGoFirstWithAShareForPlainOnes(t *testing.T) {
	l := newFairTestLoop(t, noSync)
	l.Add("c/0")
	l.Add("a/plain")
	for _, k := range keys("a", 100) {
		l.AddUrgent(k)
	}
	l.AddUrgent("b/0")
	got := drain(t, l)
	if want := []string{"a/0", "b/0", "a/1", "c/0", "a/2", "a/3", "a/4", "a/plain", "a/5"}; !slices.Equal(got[:9], want) {
		t.Errorf("first keys = %v, want %v", got[:9], want)
	}
	if len(got) != 103 || got[len(got)-1] != "a/99" {
		t.Errorf("drained %d keys ending %q, want 103 ending a/99", len(got), got[len(got)-1])
	}
}

// The fleet of 10,000 that another tool scaled to zero: a hundred
// namespaces wait with plain keys (status writes), and the last namespace's
// hundred Services, dark until fronted, are queued urgently. Urgency inside
// the namespace's own turn gave those hundred one pop in 101, so the last
// of them waited for ten thousand pops (9 s dark at the operator's write
// rate, docs/benchmarks/2026-11-21-fleet.md); now they take three pops in
// four.
func TestATenantsUrgentKeysGoAheadOfOtherTenantsPlainOnes(t *testing.T) {
	l := newFairTestLoop(t, noSync)
	for i := range 100 {
		for _, k := range keys(fmt.Sprintf("ns%d", i), 50) {
			l.Add(k)
		}
	}
	for _, k := range keys("last", 100) {
		l.AddUrgent(k)
	}
	got := drain(t, l)
	lastUrgent := 0
	for i, k := range got {
		if strings.HasPrefix(k, "last/") {
			lastUrgent = i + 1
		}
	}
	if want := 100 + (100+urgentPerPlain-1)/urgentPerPlain; lastUrgent > want {
		t.Errorf("the last urgent key was pop %d of %d, want at most %d", lastUrgent, len(got), want)
	}
	if len(got) != 5100 {
		t.Errorf("drained %d keys, want 5100", len(got))
	}
}

// A tenant whose keys are all urgent, and are added again as fast as they
// are taken (a fleet at zero whose namespace's deletion removes its
// resolver slices: every change to a target queues its ElastiService
// urgently), must not starve another tenant's plain key. One urgent lane
// served before the plain one did: the 13:14 CI failure, a new
// ElastiService with no write for 60 s (docs/development/ci.md).
func TestATenantsUrgentStreamDoesNotStarveAnotherTenant(t *testing.T) {
	l := newFairTestLoop(t, noSync)
	for _, k := range keys("a", 500) {
		l.AddUrgent(k)
	}
	for round := range 3 {
		b := fmt.Sprintf("b/%d", round)
		l.Add(b)
		for i := range 10 {
			key, quit := l.queue.Get()
			if quit {
				t.Fatal("queue shut down")
			}
			l.queue.Done(key)
			if key == b {
				if i > urgentPerPlain {
					t.Errorf("%s was taken %dth, want within the first %d", b, i+1, urgentPerPlain+1)
				}
				break
			}
			if i == 9 {
				t.Fatalf("%s was not taken in 10 pops behind another tenant's urgent keys", b)
			}
			l.AddUrgent(key) // a's keys come back urgent at once
		}
	}
}

// A key moved to the urgent lane leaves a copy in the plain one; the copy
// is skipped without costing its tenant a turn, and a later add of the key
// is synced once.
func TestAMovedKeysCopyIsSkipped(t *testing.T) {
	l := newFairTestLoop(t, noSync)
	for _, k := range []string{"a/1", "a/2", "b/1", "b/2"} {
		l.Add(k)
	}
	l.AddUrgent("a/1")
	if n := l.Len(); n != 4 {
		t.Fatalf("Len = %d, want 4 (a key waits once)", n)
	}
	if got, want := drain(t, l), []string{"a/1", "a/2", "b/1", "b/2"}; !slices.Equal(got, want) {
		t.Errorf("order = %v, want %v", got, want)
	}
	l.Add("a/1")
	if got, want := drain(t, l), []string{"a/1"}; !slices.Equal(got, want) {
		t.Errorf("after the drain, order = %v, want %v", got, want)
	}
}

// A key added plainly and then urgently, over and over while no other
// plain key waits, leaves no pile of stale copies: the lanes forget them.
func TestStaleCopiesDoNotPileUp(t *testing.T) {
	l := newFairTestLoop(t, noSync)
	for range 1000 {
		l.Add("a/k")
		l.AddUrgent("a/k")
		key, _ := l.queue.Get()
		l.queue.Done(key)
	}
	l.lanes.mu.Lock()
	n, stale, moved := l.lanes.plain.n, l.lanes.stale, len(l.lanes.moved)
	l.lanes.mu.Unlock()
	if n > 1 || stale > 1 || moved > 1 {
		t.Errorf("plain lane holds %d copies (%d stale, %d moved keys), want at most 1", n, stale, moved)
	}
	if got := drain(t, l); len(got) != 0 {
		t.Errorf("left waiting %v, want none", got)
	}
}

// Through the workers: with four busy workers and 400 keys of one tenant
// waiting, another tenant's key is synced among the first few.
func TestAnotherTenantsKeyIsSyncedPromptlyBehindABurst(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	var synced []string
	bSynced := make(chan struct{})
	l := newFairTestLoop(t, func(_ context.Context, key string) error {
		mu.Lock()
		synced = append(synced, key)
		mu.Unlock()
		if key == "b/0" {
			close(bSynced)
		}
		time.Sleep(time.Millisecond)
		return nil
	})
	for _, k := range keys("a", 400) {
		l.Add(k)
	}
	l.Add("b/0")
	go l.Run(ctx, 4)
	select {
	case <-bSynced:
	case <-time.After(10 * time.Second):
		t.Fatal("b/0 was not synced within 10s")
	}
	mu.Lock()
	defer mu.Unlock()
	if i := slices.Index(synced, "b/0"); i > 4 {
		t.Errorf("b/0 was sync number %d, after %d of a's keys; want it among the first five", i+1, i)
	}
}
