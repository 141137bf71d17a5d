package schedule

import (
	"errors"
	"fmt"
	"time"

	"github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

// The enabled period is when scale-to-zero is allowed; when it closes the
// target must be up. Pre-warm wakes the target preWarm before each closing,
// so that the first request after it (the first of the working day) finds a
// Ready pod instead of waiting for a cold start. During that lead the
// window still counts as open, but the target is held up as outside it.

// ParsePreWarm reads enabledPeriod.preWarm: empty is no pre-warm, anything
// else a Go duration greater than 0 and at most v1alpha1.MaxPreWarm. An
// error says what is wrong with s, without repeating it.
func ParsePreWarm(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	if len(s) > v1alpha1.MaxPreWarmLength {
		return 0, fmt.Errorf("longer than %d characters", v1alpha1.MaxPreWarmLength)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, errors.New("not a Go duration such as 5m or 90s")
	}
	if d <= 0 {
		return 0, errors.New("must be greater than 0; leave it out for no pre-warm")
	}
	if d > v1alpha1.MaxPreWarm {
		return 0, fmt.Errorf("must be at most %s", v1alpha1.MaxPreWarm)
	}
	return d, nil
}

// maxCloseSteps bounds the windows closesWithin follows. Overlapping
// windows chain at least a whole minute apart, and the search stops past
// the lead, so a real schedule takes one or two; only a schedule that fires
// every minute, across a change of a day's offset, comes near the bound.
const maxCloseSteps = 4096

// PreWarming reports whether now is inside the pre-warm lead of the
// window's next closing: the window is open at now and closes (for however
// short a time) at most preWarm later. It returns that closing. A window
// without preWarm, or never closing, is never pre-warming.
func (w Window) PreWarming(now time.Time) (closes time.Time, ok bool) {
	if !w.bounded || w.preWarm <= 0 {
		return time.Time{}, false
	}
	return w.closesWithin(now, w.preWarm)
}

// closesWithin returns the first instant after now at which the window is
// closed, if the window is open at now and that instant is at most lead
// after now. Windows that overlap or touch are one: the search follows each
// window that opens before the last one closes, on the wall clock, then
// turns the closing into an instant. A closing that falls in an hour the
// clocks skip is the change itself, where a window that opened in the
// skipped hour may keep it open: the search goes on from there.
func (w Window) closesWithin(now time.Time, lead time.Duration) (time.Time, bool) {
	limit := now.Add(lead)
	d := min(w.duration, maxLookback)
	m := wallSoFar(now, w.loc)
	steps := 0
	for steps < maxCloseSteps {
		// The latest opening still open at m; none means closed now.
		f, ok := w.cron.latest(m, m.Add(-d))
		if !ok {
			return time.Time{}, false
		}
		end := f.Add(d)
		for ; steps < maxCloseSteps; steps++ {
			if firstShowing(end, w.loc).After(limit) {
				return time.Time{}, false
			}
			// A window opening in (f, end] keeps it open past end.
			next, ok := w.cron.latest(end, f)
			if !ok {
				break
			}
			f, end = next, next.Add(d)
		}
		closes := firstShowing(end, w.loc)
		if !w.Active(closes) {
			return closes, true
		}
		m = wallSoFar(closes, w.loc)
		steps++
	}
	return time.Time{}, false
}
