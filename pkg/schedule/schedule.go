// Package schedule evaluates an ElastiService's spec.enabledPeriod: a cron
// schedule that opens a window of a fixed duration, on the wall clock of a
// time zone (UTC unless timeZone names one), during which scale-to-zero is
// allowed, and the pre-warm lead before each window closes.
//
// The operator asks every ElastiService's window on every poll, so Active
// must be cheap: it asks robfig/cron for the first firing after the start of
// the longest window that could still be open, instead of stepping minute by
// minute through the duration.
package schedule

import (
	"fmt"
	"strings"
	"time"

	"github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

// maxLookback is how far back Active ever needs to search. The longest gap
// between two firings of a schedule that fires at all is eight years: a
// February 29th schedule across a century year that is not a leap year (2096
// to 2104). A longer duration cannot make an older firing the latest one.
const maxLookback = 9 * 366 * 24 * time.Hour

// Window is a recurring enabled period. The zero Window is always active, so
// that an ElastiService without enabledPeriod allows scale-to-zero at any
// time.
type Window struct {
	bounded  bool
	cron     cron
	schedule string
	duration time.Duration
	// loc is the zone whose wall clock the window is read on; nil is UTC.
	loc *time.Location
	// preWarm is the lead before each closing during which the target is
	// woken and held up; 0 is none.
	preWarm time.Duration
}

// Always returns the window of an ElastiService without enabledPeriod.
func Always() Window {
	return Window{}
}

// FromSpec builds the window for spec.enabledPeriod. A nil period means
// always enabled; fields left empty take the CRD defaults, and an empty
// timeZone is UTC.
func FromSpec(ep *v1alpha1.EnabledPeriod) (Window, error) {
	if ep == nil {
		return Always(), nil
	}
	w, err := Parse(ep.Schedule, ep.Duration)
	if err != nil {
		return Window{}, err
	}
	if w.loc, err = LoadZone(ep.TimeZone); err != nil {
		return Window{}, fmt.Errorf("enabledPeriod.timeZone %q: %w", clip(ep.TimeZone), err)
	}
	if w.preWarm, err = ParsePreWarm(ep.PreWarm); err != nil {
		return Window{}, fmt.Errorf("enabledPeriod.preWarm %q: %w", clip(ep.PreWarm), err)
	}
	return w, nil
}

// Parse builds a window from a 5-field cron schedule (minute hour
// day-of-month month day-of-week) evaluated in UTC, as FromSpec's is when
// timeZone is empty, and a Go duration that
// must be positive. Empty values take the CRD defaults, as the apiserver
// would have, so objects created before the defaults existed behave the same.
func Parse(schedule, duration string) (Window, error) {
	if strings.TrimSpace(schedule) == "" {
		schedule = v1alpha1.DefaultEnabledSchedule
	}
	if duration == "" {
		duration = v1alpha1.DefaultEnabledDuration
	}
	c, err := parseCron(schedule)
	if err != nil {
		return Window{}, fmt.Errorf("enabledPeriod.schedule %q: %w", schedule, err)
	}
	d, err := time.ParseDuration(duration)
	if err != nil {
		return Window{}, fmt.Errorf("enabledPeriod.duration %q: not a Go duration such as 30m or 8h", duration)
	}
	if d <= 0 {
		return Window{}, fmt.Errorf("enabledPeriod.duration %q: must be greater than 0", duration)
	}
	return Window{
		bounded:  true,
		cron:     c,
		schedule: strings.Join(strings.Fields(schedule), " "),
		duration: d,
	}, nil
}

// Active reports whether now falls in the window: whether the schedule fired
// at some whole minute t of the zone's wall clock with t <= now < t+duration,
// now being read as the latest wall time shown so far (see wallSoFar). In
// UTC that is now itself.
func (w Window) Active(now time.Time) bool {
	if !w.bounded {
		return true
	}
	return w.activeAtWall(wallSoFar(now, w.loc))
}

// activeAtWall is Active for wall time m.
func (w Window) activeAtWall(m time.Time) bool {
	return w.cron.firesIn(m.Add(-min(w.duration, maxLookback)), m)
}

// String describes the window for logs and events.
func (w Window) String() string {
	if !w.bounded {
		return "always"
	}
	s := fmt.Sprintf("%q for %s", w.schedule, w.duration)
	if w.loc != nil {
		s += " in " + w.loc.String()
	}
	if w.preWarm > 0 {
		s += fmt.Sprintf(", pre-warmed %s before it closes", w.preWarm)
	}
	return s
}
