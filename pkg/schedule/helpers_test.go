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
