package controller

import (
	"errors"
	"fmt"
	"testing"

	"github.com/elasti-dev/elasti/pkg/outcome"
	"github.com/elasti-dev/elasti/pkg/workloop"
)

// A sync's error becomes the result label of elasti_operator_reconcile.
func TestSyncOutcome(t *testing.T) {
	cases := []struct {
		err  error
		want outcome.Sync
	}{
		{nil, outcome.SyncSuccess},
		{&errWaiting{reason: ReasonServiceNotFound, message: "no Service"}, outcome.SyncWaiting},
		{fmt.Errorf("sync: %w", &errWaiting{reason: ReasonTargetNotFound}), outcome.SyncWaiting},
		{workloop.RequeueAfter(0), outcome.SyncRequeued},
		{errors.New("conflict"), outcome.SyncError},
	}
	for _, c := range cases {
		if got := syncOutcome(c.err); got != c.want {
			t.Errorf("syncOutcome(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
