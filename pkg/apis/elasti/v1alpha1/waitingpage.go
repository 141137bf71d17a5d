package v1alpha1

import (
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
	if s == "" {
		return 0, false, nil
	}
	if len(s) > MaxWaitingPageAfterLength {
		return 0, false, fmt.Errorf("longer than %d characters", MaxWaitingPageAfterLength)
	}
	d, err = time.ParseDuration(s)
	if err != nil {
		return 0, false, fmt.Errorf("not a Go duration such as 500ms or 2s")
	}
	if d < 0 || d > MaxWaitingPageAfter {
		return 0, false, fmt.Errorf("must be between 0s and %v", MaxWaitingPageAfter)
	}
	return d, true, nil
}
