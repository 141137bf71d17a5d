package resolver

import (
	"context"
	"errors"
	"net/http"
	"time"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/resolver/answer"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
)

// Which held request gets the waiting page (package answer writes it),
// and when: the page's delay ends the request's hold with errWaitingPage.

// errWaitingPage is the cause of a hold that ends to answer a waiting
// page (see hold.Holder.Try).
var errWaitingPage = errors.New("waiting page due")

// waitingPageFor reports whether req, about to be held for svc, gets the
// waiting page if it waits long enough, and after how long.
func (r *Resolver) waitingPageFor(req *http.Request, svc clusterview.ServiceRef) (bool, time.Duration) {
	if !answer.IsNavigation(req) {
		return false, 0
	}
	on, after := r.cfg.WaitingPage, r.cfg.WaitingPageAfter
	if r.pages == nil {
		return on, after
	}
	if wp := r.pages.WaitingPage(svc); wp != nil {
		on = wp.Enabled
		// The operator refuses an invalid after (InvalidSpec); until it
		// is fixed the resolver's own delay stands.
		if d, ok, err := elastiv1alpha1.ParseWaitingPageAfter(wp.After); ok && err == nil {
			after = d
		}
	}
	return on, after
}

// pageProbeLinger is how long a page keeps its Service's starting pods
// checked directly (package directprobe) after it is written: longer than the
// page's reload, so that the reload finds a pod that passed meanwhile.
// Without it a page answered at once would end each hold, and with it
// the checks, before one could pass.
const pageProbeLinger = 3 * answer.PageRefresh

// holdContext gives a request that may get the waiting page a context
// whose deadline, after away, ends its hold with errWaitingPage (see hold.Holder.Try);
// others keep ctx.
func (r *Resolver) holdContext(ctx context.Context, page bool, after time.Duration) (context.Context, context.CancelFunc) {
	if !page {
		return ctx, func() {}
	}
	return context.WithTimeoutCause(ctx, after, errWaitingPage)
}
