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

// Urgency orders a tenant's own keys: its urgent ones before its others.
// Across tenants the turns hold, urgent or not.
func TestUrgencyOrdersATenantsOwnKeys(t *testing.T) {
	l := newFairTestLoop(t, noSync)
	l.Add("c/0")
	l.Add("a/plain")
	for _, k := range keys("a", 100) {
		l.AddUrgent(k)
	}
	l.AddUrgent("b/0")
	got := drain(t, l)
	if want := []string{"c/0", "a/0", "b/0", "a/1", "a/2"}; !slices.Equal(got[:5], want) {
		t.Errorf("first keys = %v, want %v", got[:5], want)
	}
	if got[len(got)-1] != "a/plain" {
		t.Errorf("last key = %q, want a's only plain key after each of its urgent ones", got[len(got)-1])
	}
}

// A tenant whose keys are all urgent, and are added again as fast as they
// are taken (a fleet at zero whose namespace's deletion removes its
// resolver slices: every change to a target queues its ElastiService
// urgently), must not starve another tenant's plain key. One urgent lane
// for all tenants served first did: the 13:14 CI failure, a new
// ElastiService with no write for 60 s (docs/development/ci.md).
func TestATenantsUrgentStreamDoesNotStarveAnotherTenant(t *testing.T) {
	l := newFairTestLoop(t, noSync)
	for _, k := range keys("a", 500) {
		l.AddUrgent(k)
	}
	l.Add("b/0")
	for i := range 10 {
		key, quit := l.queue.Get()
		if quit {
			t.Fatal("queue shut down")
		}
		if key == "b/0" {
			if i > 1 {
				t.Errorf("b/0 was taken %dth, want within the first two", i+1)
			}
			l.queue.Done(key)
			return
		}
		l.queue.Done(key)
		l.AddUrgent(key) // a's keys come back urgent at once
	}
	t.Fatal("b/0 was not taken in 10 pops behind another tenant's urgent keys")
}

// A key moved to the urgent lane leaves a copy in its tenant's turn; the
// copy is skipped and gives the turn to the next tenant.
func TestAMovedKeysCopyIsSkippedInItsTenantsTurn(t *testing.T) {
	l := newFairTestLoop(t, noSync)
	for _, k := range []string{"a/1", "a/2", "b/1", "b/2"} {
		l.Add(k)
	}
	l.AddUrgent("a/1")
	if n := l.Len(); n != 4 {
		t.Fatalf("Len = %d, want 4 (a key waits once)", n)
	}
	if got, want := drain(t, l), []string{"a/1", "b/1", "a/2", "b/2"}; !slices.Equal(got, want) {
		t.Errorf("order = %v, want %v", got, want)
	}
	l.Add("a/1")
	if got, want := drain(t, l), []string{"a/1"}; !slices.Equal(got, want) {
		t.Errorf("after the drain, order = %v, want %v", got, want)
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
