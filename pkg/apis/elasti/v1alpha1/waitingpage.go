package v1alpha1

import (
	"errors"
	"fmt"
	"time"
)

// WaitingPage is spec.waitingPage: while the Service wakes, a browser's
// navigation to it is answered with a small page that says so and reloads
// itself, instead of being held with no sign of progress; every other
// request (APIs, gRPC, fetch, WebSockets, TCP) is held as before.
// KubeElasti has no such field; omitted, the resolver's --waiting-page
// decides, which is off by default.
type WaitingPage struct {
	// Enabled turns the page on (true) or off (false) for this Service,
	// whatever the resolver's --waiting-page says.
	Enabled bool `json:"enabled"`
	// After, a Go duration of at most 1m such as 500ms or 2s, is how long a
	// browser navigation is held before it gets the page, so a cold start
	// shorter than that shows none. Omitted: the resolver's
	// --waiting-page-after, 0s by default (the page at once).
	After string `json:"after,omitempty"`
}

// MaxWaitingPageAfter bounds spec.waitingPage.after: a person is shown the
// page within a minute, well within the resolver's request timeout.
const MaxWaitingPageAfter = time.Minute

// MaxWaitingPageAfterLength bounds spec.waitingPage.after's text; the CRD
// schema's maxLength repeats it.
const MaxWaitingPageAfterLength = 32

// ParseWaitingPageAfter reads spec.waitingPage.after: ok is false when it
// is omitted; an error when it is no duration of 0 to MaxWaitingPageAfter.
func ParseWaitingPageAfter(s string) (d time.Duration, ok bool, err error) {
	return parseSpecDuration(s, MaxWaitingPageAfterLength, "500ms or 2s",
		func(d time.Duration) bool { return d >= 0 && d <= MaxWaitingPageAfter },
		fmt.Sprintf("must be between 0s and %v", MaxWaitingPageAfter))
}

// parseSpecDuration reads a spec field's Go duration, such as examples
// say, of at most maxLength characters: ok is false when s is empty; an
// error when it is longer, no duration, or not inRange, which want says
// in words.
func parseSpecDuration(s string, maxLength int, examples string, inRange func(time.Duration) bool, want string) (d time.Duration, ok bool, err error) {
	if s == "" {
		return 0, false, nil
	}
	if len(s) > maxLength {
		return 0, false, fmt.Errorf("longer than %d characters", maxLength)
	}
	d, err = time.ParseDuration(s)
	if err != nil {
		return 0, false, fmt.Errorf("not a Go duration such as %s", examples)
	}
	if !inRange(d) {
		return 0, false, errors.New(want)
	}
	return d, true, nil
}
