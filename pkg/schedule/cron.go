package schedule

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// field describes one of the five cron fields.
type field struct {
	name     string
	min, max int
	// starMax is the top of the range '*' expands to. It differs from max
	// only for day-of-week, where 7 is an alias of 0 and must not be set
	// twice.
	starMax int
	names   map[string]int
}

var (
	minuteField = field{name: "minute", min: 0, max: 59, starMax: 59}
	hourField   = field{name: "hour", min: 0, max: 23, starMax: 23}
	domField    = field{name: "day-of-month", min: 1, max: 31, starMax: 31}
	monthField  = field{name: "month", min: 1, max: 12, starMax: 12, names: map[string]int{
		"JAN": 1, "FEB": 2, "MAR": 3, "APR": 4, "MAY": 5, "JUN": 6,
		"JUL": 7, "AUG": 8, "SEP": 9, "OCT": 10, "NOV": 11, "DEC": 12,
	}}
	dowField = field{name: "day-of-week", min: 0, max: 7, starMax: 6, names: map[string]int{
		"SUN": 0, "MON": 1, "TUE": 2, "WED": 3, "THU": 4, "FRI": 5, "SAT": 6,
	}}
)

// cron is a parsed 5-field expression. Each field is a bitmask with bit v set
// when value v matches, so matching and "latest match at or below v" are a
// couple of bit operations.
type cron struct {
	minute, hour, dom, month, dow uint64
	// domStar and dowStar record an unrestricted field. Classic cron ORs the
	// two day fields when both are restricted and ANDs them otherwise.
	domStar, dowStar bool
}

// parseCron parses the five space-separated fields of expr.
func parseCron(expr string) (cron, error) {
	fields := strings.Fields(expr)
	if len(fields) != 5 {
		first := ""
		if len(fields) > 0 {
			first = fields[0]
		}
		switch {
		case strings.HasPrefix(first, "@"):
			return cron{}, fmt.Errorf("descriptors such as @daily are not supported; use 5 fields (minute hour day-of-month month day-of-week)")
		case strings.HasPrefix(first, "TZ=") || strings.HasPrefix(first, "CRON_TZ="):
			return cron{}, fmt.Errorf("time zones are not supported; the schedule is always evaluated in UTC")
		}
		return cron{}, fmt.Errorf("want 5 fields (minute hour day-of-month month day-of-week), got %d", len(fields))
	}
	var c cron
	var err error
	if c.minute, _, err = parseField(fields[0], minuteField); err != nil {
		return cron{}, err
	}
	if c.hour, _, err = parseField(fields[1], hourField); err != nil {
		return cron{}, err
	}
	if c.dom, c.domStar, err = parseField(fields[2], domField); err != nil {
		return cron{}, err
	}
	if c.month, _, err = parseField(fields[3], monthField); err != nil {
		return cron{}, err
	}
	if c.dow, c.dowStar, err = parseField(fields[4], dowField); err != nil {
		return cron{}, err
	}
	// Fold Sunday-as-7 onto Sunday-as-0 so matching needs only time.Weekday.
	if c.dow&(1<<7) != 0 {
		c.dow = c.dow&^(1<<7) | 1
	}
	return c, nil
}

// parseField parses a comma list of '*', values, ranges and steps. star
// reports an unrestricted field ('*' or '?' without a step greater than 1),
// which is what robfig/cron, and so KubeElasti, uses for the day rule.
func parseField(text string, f field) (mask uint64, star bool, err error) {
	for part := range strings.SplitSeq(text, ",") {
		if part == "" {
			return 0, false, fmt.Errorf("%s %q has an empty list item", f.name, text)
		}
		rangeText, stepText, hasStep := strings.Cut(part, "/")
		step := 1
		if hasStep {
			n, ok := parseDigits(stepText)
			if !ok {
				return 0, false, fmt.Errorf("%s step %q is not a number", f.name, stepText)
			}
			if n < 1 {
				return 0, false, fmt.Errorf("%s step %q must be at least 1", f.name, stepText)
			}
			// A step wider than the field selects only its start; capping
			// it keeps v+step from overflowing.
			step = min(n, f.max+1)
		}

		var lo, hi int
		switch {
		case rangeText == "*" || rangeText == "?":
			lo, hi = f.min, f.starMax
			if step == 1 {
				star = true
			}
		case strings.Contains(rangeText, "-"):
			loText, hiText, _ := strings.Cut(rangeText, "-")
			if lo, err = f.value(loText); err != nil {
				return 0, false, err
			}
			if hi, err = f.value(hiText); err != nil {
				return 0, false, err
			}
			if lo > hi {
				return 0, false, fmt.Errorf("%s range %q starts after it ends", f.name, rangeText)
			}
		default:
			if lo, err = f.value(rangeText); err != nil {
				return 0, false, err
			}
			hi = lo
			if hasStep {
				// "N/step" means N-max/step, as robfig/cron reads it, so
				// schedules written for KubeElasti keep their meaning.
				hi = f.max
			}
		}
		for v := lo; v <= hi; v += step {
			mask |= 1 << uint(v)
		}
	}
	return mask, star, nil
}

// value parses a single number or, for month and day-of-week, a three-letter
// name, and checks its range.
func (f field) value(text string) (int, error) {
	if n, ok := f.names[strings.ToUpper(text)]; ok {
		return n, nil
	}
	n, ok := parseDigits(text)
	if !ok {
		if f.names != nil {
			return 0, fmt.Errorf("%s %q is not a number or a name", f.name, text)
		}
		return 0, fmt.Errorf("%s %q is not a number", f.name, text)
	}
	if n < f.min || n > f.max {
		return 0, fmt.Errorf("%s %s out of range %d-%d", f.name, text, f.min, f.max)
	}
	return n, nil
}

// parseDigits accepts only ASCII digits: strconv.Atoi alone would also take
// a sign, which cron does not. A number too large for int is reported as
// maxInt so it fails the range check with the text the user wrote.
func parseDigits(text string) (int, bool) {
	if text == "" {
		return 0, false
	}
	for i := 0; i < len(text); i++ {
		if text[i] < '0' || text[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(text)
	if err != nil {
		return int(^uint(0) >> 1), true
	}
	return n, true
}

// daysInMonth is the most days each month can have; February counts 29 so
// that a leap-day schedule is not mistaken for one that never fires.
var daysInMonth = [13]int{0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}

// canFire reports whether some calendar day matches. Only a restricted
// day-of-month ANDed with an unrestricted day-of-week can name days that do
// not exist, such as "30 2"; every other combination matches at least once a
// week in every selected month.
func (c *cron) canFire() bool {
	if c.domStar || !c.dowStar {
		return true
	}
	for m := 1; m <= 12; m++ {
		if c.month&(1<<uint(m)) != 0 && c.dom&(1<<uint(daysInMonth[m]+1)-1) != 0 {
			return true
		}
	}
	return false
}

func (c *cron) dayMatches(day int, weekday time.Weekday) bool {
	domMatch := c.dom&(1<<uint(day)) != 0
	dowMatch := c.dow&(1<<uint(weekday)) != 0
	if c.domStar || c.dowStar {
		return domMatch && dowMatch
	}
	return domMatch || dowMatch
}

// maxSteps bounds latest's loop. Within maxLookback a schedule takes a few
// thousand steps at most (one per non-matching day); the cap only guards
// against times so extreme that time arithmetic wraps.
const maxSteps = 100000

// latest returns the latest firing time at or before from (a whole minute,
// UTC) that is strictly after after. It walks backwards and skips a whole
// month, day or hour as soon as that unit cannot match, so its cost depends on
// the calendar gaps in the schedule, not on how far back it may look.
func (c *cron) latest(from, after time.Time) (time.Time, bool) {
	t := from
	for range maxSteps {
		if !t.After(after) {
			return time.Time{}, false
		}
		y, mo, d := t.Date()
		h, mi := t.Hour(), t.Minute()

		if c.month&(1<<uint(mo)) == 0 {
			if m := highestAtOrBelow(c.month, int(mo)-1); m > 0 {
				// Last minute of month m: the first of m+1 minus a minute.
				t = time.Date(y, time.Month(m)+1, 1, 0, 0, 0, 0, time.UTC).Add(-time.Minute)
			} else {
				t = time.Date(y, time.January, 1, 0, 0, 0, 0, time.UTC).Add(-time.Minute)
			}
			continue
		}
		if !c.dayMatches(d, t.Weekday()) {
			t = time.Date(y, mo, d, 0, 0, 0, 0, time.UTC).Add(-time.Minute)
			continue
		}
		if c.hour&(1<<uint(h)) == 0 {
			if hh := highestAtOrBelow(c.hour, h-1); hh >= 0 {
				t = time.Date(y, mo, d, hh, 59, 0, 0, time.UTC)
			} else {
				t = time.Date(y, mo, d, 0, 0, 0, 0, time.UTC).Add(-time.Minute)
			}
			continue
		}
		mm := highestAtOrBelow(c.minute, mi)
		if mm < 0 {
			t = time.Date(y, mo, d, h, 0, 0, 0, time.UTC).Add(-time.Minute)
			continue
		}
		t = time.Date(y, mo, d, h, mm, 0, 0, time.UTC)
		return t, t.After(after)
	}
	return time.Time{}, false
}

// highestAtOrBelow returns the highest set bit of mask that is <= n, or -1.
func highestAtOrBelow(mask uint64, n int) int {
	if n < 0 {
		return -1
	}
	if n < 63 {
		mask &= 1<<uint(n+1) - 1
	}
	return bits.Len64(mask) - 1
}
