package portalloc

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
)

func owner(name string) Owner { return Owner{Namespace: "shop", Name: name} }

func ports(service string, nums ...int32) []Port {
	var out []Port
	for _, n := range nums {
		out = append(out, Port{Service: service, Port: n})
	}
	return out
}

func resolverPorts(got []Assignment) []int32 {
	var out []int32
	for _, a := range got {
		out = append(out, a.ResolverPort)
	}
	return out
}

func mustAssign(t *testing.T, a *Allocator, o Owner, want []Port, recorded []Assignment) []Assignment {
	t.Helper()
	got, _, err := a.Assign(o, want, recorded)
	if err != nil {
		t.Fatalf("Assign(%v, %v): %v", o, want, err)
	}
	return got
}

func TestParseRange(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Range
		wantErr string
	}{
		{in: "20000-29999", want: Range{20000, 29999}},
		{in: " 1 - 65535 ", want: Range{1, 65535}},
		{in: "4000-4000", want: Range{4000, 4000}},
		{in: "20000", wantErr: "not of the form FIRST-LAST"},
		{in: "", wantErr: "not of the form FIRST-LAST"},
		{in: "a-b", wantErr: "not of the form FIRST-LAST"},
		{in: "20000-", wantErr: "not of the form FIRST-LAST"},
		{in: "-1-5", wantErr: "not of the form FIRST-LAST"},
		{in: "0-100", wantErr: "not within 1-65535"},
		{in: "60000-70000", wantErr: "not within 1-65535"},
		{in: "99999999999-5", wantErr: "not of the form FIRST-LAST"},
		{in: "3000-2000", wantErr: "ends before it starts"},
	} {
		got, err := ParseRange(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseRange(%q) = %v, %v; want an error containing %q", tc.in, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseRange(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
		if back, err := ParseRange(got.String()); err != nil || back != got {
			t.Errorf("ParseRange(%q.String()) = %v, %v", got, back, err)
		}
	}
	if DefaultRange.Size() != 10000 || !DefaultRange.Contains(20000) || !DefaultRange.Contains(29999) || DefaultRange.Contains(30000) {
		t.Errorf("DefaultRange %v: size %d", DefaultRange, DefaultRange.Size())
	}
}

// Every Service port gets a port of its own, in the range, in want's order.
func TestAssignGivesEveryPortItsOwn(t *testing.T) {
	a := New(Range{20000, 20009}, Quota{})
	web := mustAssign(t, a, owner("web"), ports("web", 80, 443, 9000), nil)
	api := mustAssign(t, a, owner("api"), ports("api", 80), nil)
	if got := resolverPorts(web); !slices.Equal(got, []int32{20000, 20001, 20002}) {
		t.Errorf("web got %v", got)
	}
	if web[1] != (Assignment{Service: "web", Port: 443, ResolverPort: 20001}) {
		t.Errorf("web[1] = %+v, want the second Service port", web[1])
	}
	if got := resolverPorts(api); !slices.Equal(got, []int32{20003}) {
		t.Errorf("api got %v", got)
	}
	if a.InUse() != 4 {
		t.Errorf("InUse = %d, want 4", a.InUse())
	}
	// Assigning again changes nothing.
	again, freed, err := a.Assign(owner("web"), ports("web", 80, 443, 9000), nil)
	if err != nil || freed || !slices.Equal(again, web) {
		t.Errorf("second Assign = %v, freed %v, %v; want the same ports", again, freed, err)
	}
	// Duplicates in want are one Service port.
	if got := mustAssign(t, a, owner("dup"), ports("dup", 80, 80), nil); len(got) != 1 {
		t.Errorf("duplicate want gave %v", got)
	}
}

// What status recorded is taken back, whatever order owners come in: this
// is what keeps ports stable over a restart.
func TestAssignHonoursRecordedPorts(t *testing.T) {
	a := New(Range{20000, 20009}, Quota{})
	recorded := []Assignment{{Service: "web", Port: 80, ResolverPort: 20007}, {Service: "web", Port: 443, ResolverPort: 20003}}
	got := mustAssign(t, a, owner("web"), ports("web", 443, 80), recorded)
	if !slices.Equal(resolverPorts(got), []int32{20003, 20007}) {
		t.Errorf("got %v, want the recorded ports", got)
	}
	// A record outside the range (the flag changed) is not honoured.
	b := New(Range{20000, 20001}, Quota{})
	got = mustAssign(t, b, owner("web"), ports("web", 80), []Assignment{{Service: "web", Port: 80, ResolverPort: 20007}})
	if !slices.Equal(resolverPorts(got), []int32{20000}) {
		t.Errorf("got %v, want a port of the new range", got)
	}
	// A record of another Service (spec.service changed) is not honoured.
	got = mustAssign(t, a, owner("moved"), ports("v2", 80), []Assignment{{Service: "v1", Port: 80, ResolverPort: 20009}})
	if got[0].ResolverPort == 20009 {
		t.Errorf("the old Service's port was reused for the new one: %v", got)
	}
}

// A port held in memory wins over a stale record naming it for another
// Service port of the same owner.
func TestAssignHeldBeatsRecorded(t *testing.T) {
	a := New(Range{20000, 20009}, Quota{})
	mustAssign(t, a, owner("web"), ports("web", 80), nil) // 80 → 20000
	stale := []Assignment{{Service: "web", Port: 81, ResolverPort: 20000}}
	got := mustAssign(t, a, owner("web"), ports("web", 81, 80), stale)
	if got[1].ResolverPort != 20000 || got[0].ResolverPort == 20000 {
		t.Errorf("got %v, want 80 to keep 20000 and 81 to get another", got)
	}
}

// A record naming a port someone else holds is not honoured: the holder
// keeps it and this owner gets another.
func TestAssignRecordedPortHeldByAnother(t *testing.T) {
	a := New(Range{20000, 20009}, Quota{})
	holder := mustAssign(t, a, owner("holder"), ports("holder", 80), nil)
	got := mustAssign(t, a, owner("copy"), ports("copy", 80), []Assignment{{Service: "copy", Port: 80, ResolverPort: holder[0].ResolverPort}})
	if got[0].ResolverPort == holder[0].ResolverPort {
		t.Fatalf("two owners hold %d", got[0].ResolverPort)
	}
}

func TestSeedResolvesConflictsInSeedingOrder(t *testing.T) {
	a := New(Range{20000, 20009}, Quota{})
	if lost := a.Seed(owner("older"), []Assignment{{Service: "a", Port: 80, ResolverPort: 20005}}); lost != nil {
		t.Fatalf("older lost %v", lost)
	}
	lost := a.Seed(owner("newer"), []Assignment{
		{Service: "b", Port: 80, ResolverPort: 20005},     // the older one's
		{Service: "b", Port: 81, ResolverPort: 20006},     // fine
		{Service: "b", Port: 81, ResolverPort: 20008},     // a second record of 81
		{Service: "b", Port: 82, ResolverPort: 1},         // outside the range
		{Service: "b", Port: 83, ResolverPort: 20006},     // 20006 again
		{Service: "b", Port: 84, ResolverPort: 20000 - 1}, // outside the range
	})
	if len(lost) != 5 {
		t.Errorf("newer lost %v, want every record but 81 → 20006", lost)
	}
	if got := a.Held(owner("newer")); len(got) != 1 || got[0].ResolverPort != 20006 {
		t.Errorf("newer holds %v", got)
	}
	// Its next Assign keeps what it kept and gets a new port for the rest,
	// never the older one's.
	got := mustAssign(t, a, owner("newer"), ports("b", 80, 81), []Assignment{{Service: "b", Port: 80, ResolverPort: 20005}})
	if got[1].ResolverPort != 20006 || got[0].ResolverPort == 20005 {
		t.Errorf("newer got %v", got)
	}
	if h := a.Held(owner("older")); len(h) != 1 || h[0].ResolverPort != 20005 {
		t.Errorf("older holds %v", h)
	}
}

// After seeding, new ports continue after the highest port in use, as the
// last leader would have, and never collide with a seeded one.
func TestSeededPortsAreNeverHandedOut(t *testing.T) {
	a := New(Range{20000, 20005}, Quota{})
	a.Seed(owner("x"), []Assignment{{Service: "x", Port: 80, ResolverPort: 20000}, {Service: "x", Port: 81, ResolverPort: 20003}})
	a.Seed(owner("y"), []Assignment{{Service: "y", Port: 80, ResolverPort: 20001}})
	got := mustAssign(t, a, owner("new"), ports("new", 1, 2, 3), nil)
	if !slices.Equal(resolverPorts(got), []int32{20004, 20005, 20002}) {
		t.Errorf("new got %v, want the free ports after the highest seeded one, wrapping", got)
	}
}

func TestReleaseWhenPortsGo(t *testing.T) {
	a := New(Range{20000, 20009}, Quota{})
	mustAssign(t, a, owner("web"), ports("web", 80, 443), nil)

	// A Service port goes: its resolver port is freed, the other stays.
	got, freed, err := a.Assign(owner("web"), ports("web", 80), nil)
	if err != nil || !freed || !slices.Equal(resolverPorts(got), []int32{20000}) || a.InUse() != 1 {
		t.Errorf("after 443 went: %v freed %v err %v in use %d", got, freed, err, a.InUse())
	}
	// spec.service changes: the old Service's ports go, the new one's come.
	got, freed, err = a.Assign(owner("web"), ports("web-v2", 80), nil)
	if err != nil || !freed || len(got) != 1 || got[0].Service != "web-v2" || a.InUse() != 1 {
		t.Errorf("after the move: %v freed %v err %v in use %d", got, freed, err, a.InUse())
	}
	// The ElastiService goes.
	if !a.Release(owner("web")) || a.InUse() != 0 || a.Held(owner("web")) != nil {
		t.Errorf("Release left %d in use", a.InUse())
	}
	if a.Release(owner("web")) {
		t.Error("a second Release reported a freed port")
	}
	// Nothing wanted is holding nothing.
	mustAssign(t, a, owner("web"), ports("web", 80), nil)
	if _, freed, _ := a.Assign(owner("web"), nil, nil); !freed || a.InUse() != 0 {
		t.Errorf("Assign of nothing: freed %v, in use %d", freed, a.InUse())
	}
}

// A released port is the last to be handed out again, so traffic still on
// its way to a deleted Service's port does not reach a new Service.
func TestReleasedPortIsReusedLast(t *testing.T) {
	a := New(Range{20000, 20003}, Quota{})
	mustAssign(t, a, owner("a"), ports("a", 80), nil) // 20000
	a.Release(owner("a"))
	var seq []int32
	for i := range 4 {
		got := mustAssign(t, a, owner(fmt.Sprint("n", i)), ports("n", 80), nil)
		seq = append(seq, got[0].ResolverPort)
	}
	if !slices.Equal(seq, []int32{20001, 20002, 20003, 20000}) {
		t.Errorf("handed out %v, want 20000 last", seq)
	}
}

func TestExhaustionIsAllOrNothingAndWaits(t *testing.T) {
	a := New(Range{20000, 20002}, Quota{})
	mustAssign(t, a, owner("a"), ports("a", 80, 81), nil)
	got, freed, err := a.Assign(owner("b"), ports("b", 80, 81), nil)
	var ex *ExhaustedError
	if !errors.As(err, &ex) || got != nil || freed {
		t.Fatalf("Assign with one port free for two = %v, %v, %v; want an ExhaustedError", got, freed, err)
	}
	if ex.Range != (Range{20000, 20002}) || ex.Wanted != 2 || ex.Free != 1 || !strings.Contains(ex.Error(), "20000-20002") {
		t.Errorf("error %+v: %v", ex, ex)
	}
	if a.InUse() != 2 || !slices.Equal(a.Waiting(), []Owner{owner("b")}) {
		t.Errorf("in use %d waiting %v; want b holding nothing and waiting", a.InUse(), a.Waiting())
	}

	// An owner that grows beyond the range lets go of what it held.
	_, freed, err = a.Assign(owner("a"), ports("a", 80, 81, 82, 83), nil)
	if !errors.As(err, &ex) || !freed || a.InUse() != 0 || len(a.Held(owner("a"))) != 0 {
		t.Errorf("a growing past the range: freed %v err %v in use %d", freed, err, a.InUse())
	}
	if !slices.Equal(a.Waiting(), []Owner{owner("a"), owner("b")}) {
		t.Errorf("waiting %v", a.Waiting())
	}
	// Once ports are free, the waiter gets them and stops waiting.
	mustAssign(t, a, owner("b"), ports("b", 80, 81), nil)
	if !slices.Equal(a.Waiting(), []Owner{owner("a")}) {
		t.Errorf("waiting %v after b got its ports", a.Waiting())
	}
	// Release also forgets a waiter.
	a.Release(owner("a"))
	if len(a.Waiting()) != 0 {
		t.Errorf("waiting %v after release", a.Waiting())
	}
	// An owner's own ports count as free for its new set.
	c := New(Range{20000, 20001}, Quota{})
	mustAssign(t, c, owner("x"), ports("x", 80, 81), nil)
	got = mustAssign(t, c, owner("x"), ports("x", 90, 91), nil)
	if !slices.Equal(resolverPorts(got), []int32{20000, 20001}) {
		t.Errorf("renumbered ports got %v", got)
	}
}

func TestResetForgetsEverything(t *testing.T) {
	a := New(Range{20000, 20001}, Quota{})
	mustAssign(t, a, owner("x"), ports("x", 80, 81), nil)
	_, _, _ = a.Assign(owner("y"), ports("y", 80), nil)
	a.Reset()
	if a.InUse() != 0 || len(a.Waiting()) != 0 || a.Held(owner("x")) != nil {
		t.Errorf("after Reset: in use %d, waiting %v", a.InUse(), a.Waiting())
	}
}

// Concurrent owners never share a port (run with -race).
func TestConcurrentAssignNeverCollides(t *testing.T) {
	a := New(Range{20000, 20999}, Quota{})
	var wg sync.WaitGroup
	results := make([][]Assignment, 200)
	for i := range results {
		wg.Go(func() {
			o := owner(fmt.Sprint("es", i))
			got, _, err := a.Assign(o, ports("svc", 80, 443), nil)
			if err != nil {
				t.Error(err)
			}
			if i%3 == 0 {
				a.Release(o)
				return
			}
			results[i] = got
		})
	}
	wg.Wait()
	seen := map[int32]bool{}
	for _, r := range results {
		for _, as := range r {
			if seen[as.ResolverPort] {
				t.Fatalf("port %d handed out twice", as.ResolverPort)
			}
			seen[as.ResolverPort] = true
		}
	}
	if a.InUse() != len(seen) {
		t.Errorf("in use %d, held by survivors %d", a.InUse(), len(seen))
	}
}

// One owner with more Service ports than its quota gets none (its Service
// falls back to Host routing) and does not wait, since no one else's
// release can make room for it; the others keep assigning.
func TestAssignPerOwnerQuota(t *testing.T) {
	a := New(Range{20000, 20999}, Quota{PerOwner: 3})
	mustAssign(t, a, owner("small"), ports("small", 80, 443, 9000), nil)
	big := mustAssign(t, a, owner("big"), ports("big", 80), nil)

	var nums []int32
	for n := range int32(500) {
		nums = append(nums, 1000+n)
	}
	got, freed, err := a.Assign(owner("big"), ports("big", nums...), nil)
	var qe *QuotaError
	if !errors.As(err, &qe) || qe.PerNamespace || qe.Limit != 3 || qe.Wanted != 500 || got != nil || !freed {
		t.Fatalf("Assign past the quota = %v, freed %v, %v; want a per-owner QuotaError, nothing held, its port freed", got, freed, err)
	}
	if held := a.Held(owner("big")); len(held) != 0 || a.InUse() != 3 {
		t.Errorf("big holds %v, %d in use; want only small's 3", held, a.InUse())
	}
	if w := a.Waiting(); len(w) != 0 {
		t.Errorf("waiting %v; an owner over its own quota waits for no one", w)
	}
	// Back under the quota, it gets ports again; another owner is unaffected.
	if again := mustAssign(t, a, owner("big"), ports("big", 80), nil); len(again) != 1 || len(big) != 1 {
		t.Errorf("big back under its quota got %v", again)
	}
	mustAssign(t, a, owner("other"), ports("other", 80, 81, 82), nil)
}

// A namespace's owners together hold at most its quota; the owner that
// would pass it gets none and waits, other namespaces are unaffected, and
// a release in the namespace makes room. Re-assigning what an owner
// already holds never counts its own ports twice.
func TestAssignPerNamespaceQuota(t *testing.T) {
	a := New(Range{20000, 20999}, Quota{PerNamespace: 4})
	tenant := func(name string) Owner { return Owner{Namespace: "tenant", Name: name} }
	mustAssign(t, a, tenant("a"), ports("a", 80, 81), nil)
	mustAssign(t, a, tenant("b"), ports("b", 80, 81), nil)
	mustAssign(t, a, tenant("a"), ports("a", 80, 81), nil) // its own two are not counted again

	got, _, err := a.Assign(tenant("c"), ports("c", 80), nil)
	var qe *QuotaError
	if !errors.As(err, &qe) || !qe.PerNamespace || qe.Limit != 4 || qe.Free != 0 || got != nil {
		t.Fatalf("Assign past the namespace quota = %v, %v; want a per-namespace QuotaError", got, err)
	}
	if w := a.Waiting(); !slices.Equal(w, []Owner{tenant("c")}) {
		t.Errorf("waiting %v, want tenant/c", w)
	}
	// Another namespace still gets ports.
	mustAssign(t, a, Owner{Namespace: "other", Name: "x"}, ports("x", 80, 81, 82, 83), nil)
	// A Service port fewer in the namespace lets c in.
	mustAssign(t, a, tenant("b"), ports("b", 80), nil)
	if got := mustAssign(t, a, tenant("c"), ports("c", 80), nil); len(got) != 1 {
		t.Errorf("c got %v after b freed a port", got)
	}
	// Releases count too.
	a.Release(tenant("a"))
	mustAssign(t, a, tenant("d"), ports("d", 80, 81), nil)

	// Seeded records count against the namespace, even past the quota
	// (one lowered since): the next Assign of an owner that would pass it
	// gives that owner's ports up.
	s := New(Range{20000, 20999}, Quota{PerNamespace: 2})
	s.Seed(tenant("a"), []Assignment{{Service: "a", Port: 80, ResolverPort: 20000}, {Service: "a", Port: 81, ResolverPort: 20001}})
	s.Seed(tenant("b"), []Assignment{{Service: "b", Port: 80, ResolverPort: 20002}})
	if _, _, err := s.Assign(tenant("b"), ports("b", 80), nil); !errors.As(err, &qe) {
		t.Errorf("b over the lowered namespace quota: %v, want a QuotaError", err)
	}
	if got := mustAssign(t, s, tenant("a"), ports("a", 80, 81), nil); !slices.Equal(resolverPorts(got), []int32{20000, 20001}) {
		t.Errorf("a, within the quota once b gave up, got %v; want its recorded ports", got)
	}
}
