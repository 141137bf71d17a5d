package schedule

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	robfig "github.com/robfig/cron/v3"
)

// field describes one of the five cron fields, as this package accepts them.
type field struct {
	name     string
	min, max int
	names    map[string]int
}

var (
	minuteField = field{name: "minute", min: 0, max: 59}
	hourField   = field{name: "hour", min: 0, max: 23}
	domField    = field{name: "day-of-month", min: 1, max: 31}
	monthField  = field{name: "month", min: 1, max: 12, names: map[string]int{
		"JAN": 1, "FEB": 2, "MAR": 3, "APR": 4, "MAY": 5, "JUN": 6,
		"JUL": 7, "AUG": 8, "SEP": 9, "OCT": 10, "NOV": 11, "DEC": 12,
	}}
	// dowField accepts 7 as Sunday, which robfig/cron does not: normalise
	// rewrites it to 0.
	dowField = field{name: "day-of-week", min: 0, max: 7, names: map[string]int{
		"SUN": 0, "MON": 1, "TUE": 2, "WED": 3, "THU": 4, "FRI": 5, "SAT": 6,
	}}
	fields = [5]field{minuteField, hourField, domField, monthField, dowField}
)

// sunday7 is day-of-week 7, the alias of Sunday (0).
const sunday7 = 7

// parser reads the five standard fields; seconds are always 0.
var parser = robfig.NewParser(robfig.Minute | robfig.Hour | robfig.Dom | robfig.Month | robfig.Dow)

// starBit is the bit robfig/cron sets in a field's mask when the field is
// unrestricted ('*' or '?' without a step greater than 1).
const starBit = 1 << 63

// cron is a parsed 5-field expression: the bit masks robfig/cron built,
// with bit v set when value v matches, and its star marker split out of the
// two day fields. Classic cron ORs the two day fields when both are
// restricted and ANDs them otherwise.
type cron struct {
	minute, hour, dom, month, dow uint64
	domStar, dowStar              bool
}

// parseCron checks expr with this package's messages, normalises it to what
// robfig/cron reads the same way (Sunday as 7, over-wide steps, N/step on
// day-of-week) and parses it with robfig/cron.
func parseCron(expr string) (cron, error) {
	normalised, err := normalise(expr)
	if err != nil {
		return cron{}, err
	}
	sched, err := parser.Parse(normalised)
	if err != nil {
		// normalise accepts only what robfig/cron accepts.
		return cron{}, fmt.Errorf("normalised to %q: %w", normalised, err)
	}
	s := sched.(*robfig.SpecSchedule)
	return cron{
		minute: s.Minute &^ starBit, hour: s.Hour &^ starBit, dom: s.Dom &^ starBit,
		month: s.Month &^ starBit, dow: s.Dow &^ starBit,
		domStar: s.Dom&starBit != 0, dowStar: s.Dow&starBit != 0,
	}, nil
}

// normalise checks the five space-separated fields of expr and returns them
// in the form robfig/cron parses to the same schedule.
func normalise(expr string) (string, error) {
	parts := strings.Fields(expr)
	if len(parts) != len(fields) {
		first := ""
		if len(parts) > 0 {
			first = parts[0]
		}
		switch {
		case strings.HasPrefix(first, "@"):
			return "", fmt.Errorf("descriptors such as @daily are not supported; use 5 fields (minute hour day-of-month month day-of-week)")
		case strings.HasPrefix(first, "TZ=") || strings.HasPrefix(first, "CRON_TZ="):
			return "", fmt.Errorf("time zones are not supported in the schedule; set enabledPeriod.timeZone instead")
		}
		return "", fmt.Errorf("want 5 fields (minute hour day-of-month month day-of-week), got %d", len(parts))
	}
	for i, f := range fields {
		text, err := normaliseField(parts[i], f)
		if err != nil {
			return "", err
		}
		parts[i] = text
	}
	return strings.Join(parts, " "), nil
}

// normaliseField checks a comma list of '*', '?', values, names, ranges and
// steps, and rewrites each item as "*[/step]" or "lo-hi[/step]" with numbers.
func normaliseField(text string, f field) (string, error) {
	var items []string
	for part := range strings.SplitSeq(text, ",") {
		if part == "" {
			return "", fmt.Errorf("%s %q has an empty list item", f.name, text)
		}
		rangeText, stepText, hasStep := strings.Cut(part, "/")
		step := 1
		if hasStep {
			n, ok := parseDigits(stepText)
			if !ok {
				return "", fmt.Errorf("%s step %q is not a number", f.name, stepText)
			}
			if n < 1 {
				return "", fmt.Errorf("%s step %q must be at least 1", f.name, stepText)
			}
			// A step wider than the field selects only its start; capping
			// it keeps it a number robfig/cron can read.
			step = min(n, f.max+1)
		}
		stepSuffix := ""
		if hasStep {
			stepSuffix = "/" + strconv.Itoa(step)
		}
		if rangeText == "*" || rangeText == "?" {
			items = append(items, "*"+stepSuffix)
			continue
		}
		lo, hi, err := f.bounds(rangeText, hasStep)
		if err != nil {
			return "", err
		}
		items = append(items, f.rangeItems(lo, hi, step, stepSuffix)...)
	}
	return strings.Join(items, ","), nil
}

// bounds parses a value or a range. A lone value with a step means
// value-max, as robfig/cron, and so KubeElasti, reads it.
func (f field) bounds(rangeText string, hasStep bool) (lo, hi int, err error) {
	loText, hiText, isRange := strings.Cut(rangeText, "-")
	if lo, err = f.value(loText); err != nil {
		return 0, 0, err
	}
	switch {
	case isRange:
		if hi, err = f.value(hiText); err != nil {
			return 0, 0, err
		}
		if lo > hi {
			return 0, 0, fmt.Errorf("%s range %q starts after it ends", f.name, rangeText)
		}
	case hasStep:
		hi = f.max
	default:
		hi = lo
	}
	return lo, hi, nil
}

// rangeItems writes lo-hi/step for robfig/cron. Only day-of-week can reach
// 7, Sunday's alias: the range stops at 6 and Sunday is added as 0 when the
// step lands on 7.
func (f field) rangeItems(lo, hi, step int, stepSuffix string) []string {
	if hi < sunday7 || f.max != sunday7 {
		return []string{fmt.Sprintf("%d-%d%s", lo, hi, stepSuffix)}
	}
	var items []string
	if lo < sunday7 {
		items = append(items, fmt.Sprintf("%d-%d%s", lo, sunday7-1, stepSuffix))
	}
	if (sunday7-lo)%step == 0 {
		items = append(items, "0")
	}
	return items
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

// spec is c as robfig/cron's schedule: second 0 of each matching minute,
// in UTC.
func (c *cron) spec() robfig.SpecSchedule {
	s := robfig.SpecSchedule{
		Second: 1, Minute: c.minute, Hour: c.hour, Dom: c.dom, Month: c.month, Dow: c.dow,
		Location: time.UTC,
	}
	if c.domStar {
		s.Dom |= starBit
	}
	if c.dowStar {
		s.Dow |= starBit
	}
	return s
}

// searchYears is how far robfig/cron's Next looks before it gives up: the
// rest of the year it starts in and five more.
const searchYears = 5

// maxYear bounds the years next searches, far inside what time.Time can
// represent, so that date arithmetic never wraps.
const maxYear = 100_000_000

// firesIn reports whether the schedule fires at some whole minute t with
// after < t <= until.
func (c *cron) firesIn(after, until time.Time) bool {
	next, ok := c.next(after)
	return ok && !next.After(until)
}

// next returns the first firing strictly after t, in UTC, looking at most
// maxLookback ahead: a schedule that fires at all fires that often. Next
// gives up after five years, and the gap between two firings can be eight (a
// February 29th across 2100), so the search starts again where Next stopped
// looking.
func (c *cron) next(t time.Time) (time.Time, bool) {
	end := t.Add(maxLookback)
	if t.Year() < -maxYear || end.Year() > maxYear {
		return time.Time{}, false
	}
	s := c.spec()
	from := t.UTC()
	for from.Before(end) {
		if next := s.Next(from); !next.IsZero() {
			return next, !next.After(end)
		}
		// Nothing up to the end of year+searchYears. Go on from just before
		// the first of January of that year, which is strictly later than
		// from.
		from = time.Date(from.Year()+searchYears, time.January, 1, 0, 0, 0, 0, time.UTC).Add(-time.Second)
	}
	return time.Time{}, false
}

// latest returns the latest firing at or before from that is strictly after
// after. firesIn(x, from) holds exactly when x is before that firing, so a
// binary search over the whole minutes back from from finds it, with as
// many searches as the span has bits.
func (c *cron) latest(from, after time.Time) (time.Time, bool) {
	// Firings are whole minutes: the latest at or before from is the
	// latest at or before its minute.
	from = from.Truncate(time.Minute)
	if !from.After(after) || !c.firesIn(after, from) {
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
