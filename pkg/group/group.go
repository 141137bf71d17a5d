// Package group holds the pure decisions of spec.wakeWith: which member of
// a wake group to act on next, and whether a dependency may sleep. The wake
// server, the controller and the idle poller share them; none of them reads
// or writes anything here.
//
// A group is an ElastiService's dependencies, in list order, then its
// target. A wake scales them up one at a time: a member is scaled only once
// every member before it is Ready (its ready replicas reach what it wants),
// and the target last. A sleep scales the target to zero first (as without
// a group, with the resolver in front), then each dependency that no other
// awake ElastiService of the namespace names.
package group

import (
	"fmt"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/scaletarget"
)

// Member is what the cache says about one dependency.
type Member struct {
	Ref scaletarget.Ref
	// Wanted is what a wake scales it to and how many must be ready.
	Wanted int32
	// Replicas is spec.replicas, ReadyReplicas status.readyReplicas.
	Replicas, ReadyReplicas int32
	// Err is why it could not be read (a missing workload); then the
	// counts mean nothing.
	Err error
}

// Ready reports whether m has the replicas it wants ready.
func (m Member) Ready() bool { return m.Err == nil && m.ReadyReplicas >= m.Wanted }

// Action is what a wake does next.
type Action int

const (
	// WakeTarget: every dependency is Ready; the target may be woken.
	WakeTarget Action = iota
	// ScaleUp: the member at Index is below what it wants; scale it.
	ScaleUp
	// Wait: the member at Index is scaled but not Ready yet; its
	// readiness (an informer event) brings the next step.
	Wait
	// Missing: the member at Index cannot be read; the wake waits on it.
	Missing
)

// Step is the next thing a wake does.
type Step struct {
	Action Action
	// Index is the member the action is about; -1 for WakeTarget.
	Index int
}

// Next returns the next step of a wake of a group whose dependencies are
// members, in order. Members after the first one that is not Ready are
// not looked at: they are not scaled before it is.
func Next(members []Member) Step {
	for i, m := range members {
		switch {
		case m.Err != nil:
			return Step{Action: Missing, Index: i}
		case m.Replicas < m.Wanted:
			return Step{Action: ScaleUp, Index: i}
		case m.ReadyReplicas < m.Wanted:
			return Step{Action: Wait, Index: i}
		}
	}
	return Step{Action: WakeTarget, Index: -1}
}

// Blocking describes the member a step waits on, for the DependenciesReady
// condition and the wake server's answer: its kind, name and ready/wanted
// counts. It is empty for WakeTarget.
func Blocking(members []Member, s Step) string {
	if s.Action == WakeTarget {
		return ""
	}
	m := members[s.Index]
	if m.Err != nil {
		return fmt.Sprintf("dependency %d of %d, %s %q, cannot be read: %v", s.Index+1, len(members), m.Ref.Kind, m.Ref.Name, m.Err)
	}
	return fmt.Sprintf("dependency %d of %d, %s %q, has %d/%d replicas ready", s.Index+1, len(members), m.Ref.Kind, m.Ref.Name,
		m.ReadyReplicas, m.Wanted)
}

// Members returns the dependencies deps (an ElastiService's spec.wakeWith)
// as refs in its namespace, with what each wants; state fills in what the
// cache says of each.
func Members(namespace string, deps []elastiv1alpha1.Dependency, state func(scaletarget.Ref) (scaletarget.State, error)) []Member {
	out := make([]Member, 0, len(deps))
	for _, d := range deps {
		ref := RefOf(namespace, d)
		m := Member{Ref: ref, Wanted: d.Wanted()}
		st, err := state(ref)
		m.Replicas, m.ReadyReplicas, m.Err = st.Replicas, st.ReadyReplicas, err
		out = append(out, m)
	}
	return out
}

// RefOf is dependency d of an ElastiService in namespace.
func RefOf(namespace string, d elastiv1alpha1.Dependency) scaletarget.Ref {
	c := d.Ref()
	return scaletarget.Ref{Kind: c.Kind, Namespace: namespace, Name: c.Name}
}

// Peer is another ElastiService of the namespace, as the sleep of a shared
// dependency sees it.
type Peer struct {
	// Name is its name (the namespace is the same).
	Name string
	// Target is its scaleTargetRef.
	Target scaletarget.Ref
	// WakeWith are its dependencies.
	WakeWith []scaletarget.Ref
	// Awake: its target is above zero, or a wake of its group is under way.
	Awake bool
}

// Keeper says why dep must stay up after the ElastiService that slept
// named it: dep is another ElastiService's target (left to that one), or
// an awake ElastiService names it too. Empty means dep may sleep.
func Keeper(dep scaletarget.Ref, peers []Peer) string {
	for _, p := range peers {
		if p.Target == dep {
			return fmt.Sprintf("it is the scale target of ElastiService %q", p.Name)
		}
	}
	for _, p := range peers {
		if !p.Awake {
			continue
		}
		for _, d := range p.WakeWith {
			if d == dep {
				return fmt.Sprintf("ElastiService %q, which names it too, is awake", p.Name)
			}
		}
	}
	return ""
}

// PeerOf describes other for Keeper; awake says whether it is awake.
func PeerOf(other *elastiv1alpha1.ElastiService, awake bool) Peer {
	p := Peer{Name: other.Name, Target: scaletarget.RefFor(other), Awake: awake}
	for _, d := range other.Spec.WakeWith {
		p.WakeWith = append(p.WakeWith, RefOf(other.Namespace, d))
	}
	return p
}
