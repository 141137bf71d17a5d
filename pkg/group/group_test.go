package group

import (
	"errors"
	"strings"
	"testing"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/scaletarget"
)

func ref(kind, name string) scaletarget.Ref {
	return scaletarget.Ref{Kind: kind, Namespace: "shop", Name: name}
}

var (
	db     = ref(elastiv1alpha1.KindStatefulSet, "db")
	worker = ref(elastiv1alpha1.KindDeployment, "worker")
	app    = ref(elastiv1alpha1.KindDeployment, "app")
	other  = ref(elastiv1alpha1.KindDeployment, "other")
)

func member(r scaletarget.Ref, wanted, replicas, ready int32) Member {
	return Member{Ref: r, Wanted: wanted, Replicas: replicas, ReadyReplicas: ready}
}

func TestNext(t *testing.T) {
	missing := Member{Ref: worker, Wanted: 1, Err: errors.New("not found")}
	cases := []struct {
		name    string
		members []Member
		want    Step
		// blocking is a substring of Blocking's description.
		blocking string
	}{
		{"no dependencies", nil, Step{WakeTarget, -1}, ""},
		{"all asleep: the first is scaled", []Member{member(db, 1, 0, 0), member(worker, 1, 0, 0)}, Step{ScaleUp, 0}, `StatefulSet "db", has 0/1`},
		{"the first is scaled, not Ready: wait, the second is not touched",
			[]Member{member(db, 3, 3, 2), member(worker, 1, 0, 0)}, Step{Wait, 0}, `dependency 1 of 2, StatefulSet "db", has 2/3 replicas ready`},
		{"the first is Ready: the second is scaled", []Member{member(db, 1, 1, 1), member(worker, 1, 0, 0)}, Step{ScaleUp, 1}, `Deployment "worker"`},
		{"more than wanted is Ready", []Member{member(db, 1, 3, 3), member(worker, 2, 2, 2)}, Step{WakeTarget, -1}, ""},
		{"scaled up by hand but not Ready", []Member{member(db, 1, 5, 0)}, Step{Wait, 0}, "0/1"},
		{"a later one not Ready waits even though the first is fine", []Member{member(db, 1, 1, 1), member(worker, 2, 2, 1)}, Step{Wait, 1}, "1/2"},
		{"a missing one blocks everything after it", []Member{member(db, 1, 1, 1), missing, member(other, 1, 0, 0)}, Step{Missing, 1}, "cannot be read: not found"},
		{"a missing one after one not Ready is not reached", []Member{member(db, 1, 0, 0), missing}, Step{ScaleUp, 0}, "db"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Next(tc.members)
			if got != tc.want {
				t.Fatalf("Next = %+v, want %+v", got, tc.want)
			}
			b := Blocking(tc.members, got)
			if tc.blocking == "" && b != "" || !strings.Contains(b, tc.blocking) {
				t.Errorf("Blocking = %q, want it to contain %q", b, tc.blocking)
			}
		})
	}
}

func TestKeeper(t *testing.T) {
	cases := []struct {
		name  string
		dep   scaletarget.Ref
		peers []Peer
		// want is a substring of the reason; empty means dep may sleep.
		want string
	}{
		{"no one else", db, nil, ""},
		{"another names it and sleeps", db, []Peer{{Name: "b", Target: other, WakeWith: []scaletarget.Ref{db}}}, ""},
		{"another names it and is awake", db, []Peer{{Name: "b", Target: other, WakeWith: []scaletarget.Ref{worker, db}, Awake: true}},
			`ElastiService "b", which names it too, is awake`},
		{"another is awake but names something else", db, []Peer{{Name: "b", Target: other, WakeWith: []scaletarget.Ref{worker}, Awake: true}}, ""},
		{"it is another's target, asleep", db, []Peer{{Name: "c", Target: db}}, `scale target of ElastiService "c"`},
		{"same name, other kind", db, []Peer{{Name: "b", Target: ref(elastiv1alpha1.KindDeployment, "db"), Awake: true,
			WakeWith: []scaletarget.Ref{ref(elastiv1alpha1.KindDeployment, "db")}}}, ""},
		{"one of two sharers awake", db, []Peer{
			{Name: "b", Target: other, WakeWith: []scaletarget.Ref{db}},
			{Name: "c", Target: app, WakeWith: []scaletarget.Ref{db}, Awake: true},
		}, `"c"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Keeper(tc.dep, tc.peers)
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("Keeper = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestMembersCanonicalisesAndDefaults(t *testing.T) {
	es := &elastiv1alpha1.ElastiService{}
	es.Namespace = "shop"
	es.Spec.WakeWith = []elastiv1alpha1.Dependency{
		{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", Replicas: 3},
		{APIVersion: "apps/v1", Kind: "deployments", Name: "worker"},
	}
	got := Members(es.Namespace, es.Spec.WakeWith, func(r scaletarget.Ref) (scaletarget.State, error) {
		return scaletarget.State{Replicas: 1, ReadyReplicas: 1}, nil
	})
	if len(got) != 2 || got[0].Ref != db || got[0].Wanted != 3 || got[1].Ref != worker || got[1].Wanted != 1 {
		t.Errorf("Members = %+v", got)
	}
	peer := PeerOf(es, true)
	if len(peer.WakeWith) != 2 || peer.WakeWith[1] != worker || !peer.Awake {
		t.Errorf("PeerOf = %+v", peer)
	}
}
