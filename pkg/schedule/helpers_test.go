package schedule

import (
	"time"
)

// dayMatches is classic cron's day rule, written out for the brute-force
// checks: both day fields must match when either is unrestricted, else
// either may.
func (c *cron) dayMatches(day int, weekday time.Weekday) bool {
	domMatch := c.dom&(1<<uint(day)) != 0
	dowMatch := c.dow&(1<<uint(weekday)) != 0
	if c.domStar || c.dowStar {
		return domMatch && dowMatch
	}
	return domMatch || dowMatch
}

// latest returns the latest firing time at or before from (a whole minute,
// UTC) that is strictly after after, for tests that probe a window's edges.
// firesIn(x, from) holds exactly when x is before that firing, so a binary
// search over whole minutes back from from finds it.
func (c *cron) latest(from, after time.Time) (time.Time, bool) {
	if !c.firesIn(after, from) {
		return time.Time{}, false
	}
	// The smallest k with a firing in (from-k minutes, from] puts the
	// firing at from-(k-1) minutes.
	lo, hi := int64(1), int64(from.Sub(after)/time.Minute)+1
	for lo < hi {
		mid := lo + (hi-lo)/2
		if c.firesIn(from.Add(-time.Duration(mid)*time.Minute), from) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return from.Add(-time.Duration(lo-1) * time.Minute), true
}
