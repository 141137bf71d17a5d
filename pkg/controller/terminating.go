package controller

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
)

// terminatingMemory is how long a namespace whose create was refused as
// terminating stays remembered after that refusal. A namespace deleted and
// made again under the same name is fronted at most this late.
const terminatingMemory = 30 * time.Second

// maxTerminatingNamespaces bounds the memory: only namespaces holding
// ElastiServices reach it, and one past the bound is simply not
// remembered (its creates are tried, and refused, as before).
const maxTerminatingNamespaces = 1024

// terminatingNamespaces remembers the namespaces in which the apiserver
// refused a create because the namespace is being deleted (the
// NamespaceLifecycle admission plugin's 403 with cause
// NamespaceTerminating). Every create there is refused the same way until
// the namespace is gone, and its deletion sends an event for each object
// it removes, each bringing an ElastiService back to front itself again:
// a CI run's 1,000-Service namespace drew 4,142 refused creates from the
// operator in 4.5 minutes, all while other namespaces waited their turn.
// While a namespace is remembered its ElastiServices are not reconciled
// (finalizing still is: deletes and updates are allowed there), and each
// key comes back once the memory ends.
type terminatingNamespaces struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	until map[string]time.Time
}

func newTerminatingNamespaces(c clock.PassiveClock) *terminatingNamespaces {
	return &terminatingNamespaces{clock: c, until: map[string]time.Time{}}
}

// wait is how long namespace stays remembered as terminating: zero if it
// is not.
func (t *terminatingNamespaces) wait(namespace string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	until, ok := t.until[namespace]
	if !ok {
		return 0
	}
	left := until.Sub(t.clock.Now())
	if left <= 0 {
		delete(t.until, namespace)
		return 0
	}
	return left
}

// refused reports whether err is the apiserver refusing a create in
// namespace because it is being deleted, and remembers namespace if so.
func (t *terminatingNamespaces) refused(namespace string, err error) bool {
	if err == nil || !apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.clock.Now()
	if _, ok := t.until[namespace]; !ok && len(t.until) >= maxTerminatingNamespaces {
		for ns, until := range t.until {
			if !until.After(now) {
				delete(t.until, ns)
			}
		}
		if len(t.until) >= maxTerminatingNamespaces {
			return true
		}
	}
	t.until[namespace] = now.Add(terminatingMemory)
	return true
}
