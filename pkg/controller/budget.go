package controller

import (
	"fmt"

	"k8s.io/apimachinery/pkg/types"
)

// overBudget refuses an ElastiService past its namespace's budget
// (pkg/nsbudget, which the directory keeps): the newest of a namespace
// that has too many, or too large, ElastiServices. Like an invalid spec,
// it gets nothing written; the resolver, with the same budget, does not
// serve it either. Other namespaces are untouched: a budget is per
// namespace. A deletion or a smaller spec in the namespace lets the oldest
// refused ones back in, and enqueueBudgetChanges syncs them.
func overBudget(f *facts) *notReady {
	if !f.overBudget {
		return nil
	}
	es, l := f.es, f.budgetLimits
	return &notReady{ReasonNamespaceBudgetExceeded, fmt.Sprintf(
		"namespace %q is past its budget of %d ElastiServices and %d bytes of spec; the newest past it are not served until older ones are deleted or shrink",
		es.Namespace, l.Count, l.Bytes), awaitChange}
}

// enqueueBudgetChanges syncs the ElastiServices whose admission the last
// informer event changed (the budget's TakeChanged).
func enqueueBudgetChanges(q Queue, changed []types.NamespacedName) {
	for _, key := range changed {
		q.Add(key)
	}
}
