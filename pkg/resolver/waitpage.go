package resolver

import (
	"context"
	"errors"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/resolver/answer"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
	"github.com/elasti-dev/elasti/pkg/wakestage"
)

// Which held request gets an early answer, before its Service has a
// Ready pod, and when: the waiting page for a browser's navigation, the
// wake status for a client that asks for it (package answer writes
// both). The early answer's delay ends the request's hold with
// errEarlyAnswer.

// errEarlyAnswer is the cause of a hold that ends to answer the waiting
// page or the wake status (see hold.Holder.Try).
var errEarlyAnswer = errors.New("early answer due")

// earlyAnswer is what a held request gets if it waits long enough.
type earlyAnswer struct {
	// page is the waiting page, status the wake status; neither: the
	// request is held to the end.
	page, status bool
	after        time.Duration
	// applied is the status' Preference-Applied.
	applied string
}

func (e earlyAnswer) due() bool { return e.page || e.status }

// earlyAnswerFor returns the early answer req, about to be held for
// svc, gets: the wake status when it asks with Prefer, else the waiting
// page when it is a navigation and svc's page is on, else none.
func (r *Resolver) earlyAnswerFor(req *http.Request, svc clusterview.ServiceRef) earlyAnswer {
	if after, applied, ok := answer.PreferredWait(req); ok {
		return earlyAnswer{status: true, after: after, applied: applied}
	}
	if !answer.IsNavigation(req) {
		return earlyAnswer{}
	}
	on, after := r.cfg.WaitingPage, r.cfg.WaitingPageAfter
	if r.pages != nil {
		if wp := r.pages.WaitingPage(svc); wp != nil {
			on = wp.Enabled
			// The operator refuses an invalid after (InvalidSpec); until it
			// is fixed the resolver's own delay stands.
			if d, ok, err := elastiv1alpha1.ParseWaitingPageAfter(wp.After); ok && err == nil {
				after = d
			}
		}
	}
	return earlyAnswer{page: on, after: after}
}

// pageProbeLinger is how long an early answer keeps its Service's
// starting pods checked directly (package directprobe) after it is
// written: longer than the page's reload, so that the reload finds a pod
// that passed meanwhile. Without it a page answered at once would end
// each hold, and with it the checks, before one could pass.
const pageProbeLinger = 3 * answer.PageRefresh

// holdContext gives a request that may get an early answer a context
// whose deadline, after its delay, ends its hold with errEarlyAnswer
// (see hold.Holder.Try); others keep ctx.
func (r *Resolver) holdContext(ctx context.Context, early earlyAnswer) (context.Context, context.CancelFunc) {
	if !early.due() {
		return ctx, func() {}
	}
	return context.WithTimeoutCause(ctx, early.after, errEarlyAnswer)
}

// answerEarly writes the early answer of a request held for svc's port
// since began.
func (r *Resolver) answerEarly(w http.ResponseWriter, req *http.Request, logger klog.Logger, svc clusterview.ServiceRef, port string, early earlyAnswer, began time.Time) {
	wake := r.wakeOf(svc, port)
	if early.status {
		r.page.Status(w, svc, wake, began, r.cfg.RetryAfter, early.applied)
		return
	}
	r.page.Write(w, req, logger, svc, wake, began)
}

// wakeOf returns how far svc's wake is: its furthest pod, from the pod
// view its holds keep (a starting pod the slices list unready when the
// view has none: past its bounds, or not listed yet), what that pod
// answered the direct checks, and the Service's usual cold start.
func (r *Resolver) wakeOf(svc clusterview.ServiceRef, port string) answer.Wake {
	var pods []*corev1.Pod
	if r.view != nil {
		pods, _ = r.view.Pods(svc)
	}
	wake := answer.Wake{Progress: wakestage.Of(pods)}
	if wake.Progress.Stage == wakestage.ScalingUp {
		if b, err := r.eps.Lookup(svc, port); err == nil && len(b.Unready) > 0 {
			wake.Progress.Stage = wakestage.Starting
		}
	}
	if d := r.holds.Direct(); d != nil {
		wake.Readiness = d.Answers(svc)
	}
	if r.bounds != nil {
		wake.Estimate, _ = r.bounds.MedianColdStart(svc)
	}
	return wake
}
