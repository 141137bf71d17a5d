package schedule

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

func mustTime(t testing.TB, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatalf("bad test time %q: %v", s, err)
	}
	return tm
}

func mustParse(t testing.TB, schedule, duration string) Window {
	t.Helper()
	w, err := Parse(schedule, duration)
	if err != nil {
		t.Fatalf("Parse(%q, %q): %v", schedule, duration, err)
	}
	return w
}

// valuesMask builds a field mask from values, for expected results.
func valuesMask(vs ...int) uint64 {
	var m uint64
	for _, v := range vs {
		m |= 1 << uint(v)
	}
	return m
}

func span(lo, hi, step int) uint64 {
	var m uint64
	for v := lo; v <= hi; v += step {
		m |= 1 << uint(v)
	}
	return m
}

func TestParseFields(t *testing.T) {
	all := func() cron {
		return cron{
			minute: span(0, 59, 1), hour: span(0, 23, 1), dom: span(1, 31, 1),
			month: span(1, 12, 1), dow: span(0, 6, 1), domStar: true, dowStar: true,
		}
	}
	with := func(f func(*cron)) cron {
		c := all()
		f(&c)
		return c
	}
	tests := []struct {
		expr string
		want cron
	}{
		{"* * * * *", all()},
		{"  *   *\t* * *  ", all()},
		{"? * ? * ?", all()},
		{"*/1 * * * *", all()},
		{"0 0 * * *", with(func(c *cron) { c.minute, c.hour = valuesMask(0), valuesMask(0) })},
		{"*/15 * * * *", with(func(c *cron) { c.minute = valuesMask(0, 15, 30, 45) })},
		{"5-20/5 * * * *", with(func(c *cron) { c.minute = valuesMask(5, 10, 15, 20) })},
		{"5-21/5 * * * *", with(func(c *cron) { c.minute = valuesMask(5, 10, 15, 20) })},
		{"1,2,3,10-12 * * * *", with(func(c *cron) { c.minute = valuesMask(1, 2, 3, 10, 11, 12) })},
		{"05 09 * * *", with(func(c *cron) { c.minute, c.hour = valuesMask(5), valuesMask(9) })},
		// N/step is N-max/step, as robfig/cron reads it.
		{"50/3 * * * *", with(func(c *cron) { c.minute = valuesMask(50, 53, 56, 59) })},
		// A step wider than the field selects only its start.
		{"*/100 * * * *", with(func(c *cron) { c.minute = valuesMask(0) })},
		{"* */6 * * *", with(func(c *cron) { c.hour = valuesMask(0, 6, 12, 18) })},
		{"* * 1,15,31 * *", with(func(c *cron) { c.dom, c.domStar = valuesMask(1, 15, 31), false })},
		{"* * */2 * *", with(func(c *cron) { c.dom, c.domStar = span(1, 31, 2), false })},
		{"* * 1-31 * *", with(func(c *cron) { c.domStar = false })},
		{"* * * jan,Mar,DEC *", with(func(c *cron) { c.month = valuesMask(1, 3, 12) })},
		{"* * * feb-apr *", with(func(c *cron) { c.month = valuesMask(2, 3, 4) })},
		{"* * * */3 *", with(func(c *cron) { c.month = valuesMask(1, 4, 7, 10) })},
		{"* * * * MON-FRI", with(func(c *cron) { c.dow, c.dowStar = span(1, 5, 1), false })},
		{"* * * * 1-5", with(func(c *cron) { c.dow, c.dowStar = span(1, 5, 1), false })},
		{"* * * * sun", with(func(c *cron) { c.dow, c.dowStar = valuesMask(0), false })},
		{"* * * * 0", with(func(c *cron) { c.dow, c.dowStar = valuesMask(0), false })},
		{"* * * * 7", with(func(c *cron) { c.dow, c.dowStar = valuesMask(0), false })},
		{"* * * * 5-7", with(func(c *cron) { c.dow, c.dowStar = valuesMask(0, 5, 6), false })},
		{"* * * * 0-7", with(func(c *cron) { c.dow, c.dowStar = span(0, 6, 1), false })},
		{"* * * * Sat,sun", with(func(c *cron) { c.dow, c.dowStar = valuesMask(0, 6), false })},
		{"* * * * */2", with(func(c *cron) { c.dow, c.dowStar = valuesMask(0, 2, 4, 6), false })},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			got, err := parseCron(tt.expr)
			if err != nil {
				t.Fatalf("parseCron: %v", err)
			}
			if got != tt.want {
				t.Errorf("parseCron(%q)\n got %+v\nwant %+v", tt.expr, got, tt.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, schedule, duration string
		want                     string // the whole message, or a distinctive part after "~"
	}{
		{"minute too big", "61 * * * *", "1h", `enabledPeriod.schedule "61 * * * *": minute 61 out of range 0-59`},
		{"hour too big", "0 24 * * *", "1h", `enabledPeriod.schedule "0 24 * * *": hour 24 out of range 0-23`},
		{"dom zero", "0 0 0 * *", "1h", "~day-of-month 0 out of range 1-31"},
		{"dom too big", "0 0 32 * *", "1h", "~day-of-month 32 out of range 1-31"},
		{"month zero", "0 0 * 0 *", "1h", "~month 0 out of range 1-12"},
		{"month 13", "0 0 * 13 *", "1h", "~month 13 out of range 1-12"},
		{"dow 8", "0 0 * * 8", "1h", "~day-of-week 8 out of range 0-7"},
		{"huge number", "99999999999999999999 * * * *", "1h", "~minute 99999999999999999999 out of range 0-59"},
		{"negative", "-1 * * * *", "1h", `~minute "" is not a number`},
		{"plus sign", "+1 * * * *", "1h", `~minute "+1" is not a number`},
		{"backwards range", "30-10 * * * *", "1h", `~minute range "30-10" starts after it ends`},
		{"backwards names", "0 0 * * FRI-MON", "1h", `~day-of-week range "FRI-MON" starts after it ends`},
		{"open range", "10- * * * *", "1h", `~minute "" is not a number`},
		{"double range", "1-2-3 * * * *", "1h", `~minute "2-3" is not a number`},
		{"step zero", "*/0 * * * *", "1h", `~minute step "0" must be at least 1`},
		{"step empty", "*/ * * * *", "1h", `~minute step "" is not a number`},
		{"step garbage", "*/x * * * *", "1h", `~minute step "x" is not a number`},
		{"double step", "*/2/3 * * * *", "1h", `~minute step "2/3" is not a number`},
		{"empty list item", "1,,2 * * * *", "1h", `~minute "1,,2" has an empty list item`},
		{"trailing comma", "0 0 * * 1,", "1h", `~day-of-week "1," has an empty list item`},
		{"unknown month name", "0 0 * JANUARY *", "1h", `~month "JANUARY" is not a number or a name`},
		{"weekday name in month", "0 0 * MON *", "1h", `~month "MON" is not a number or a name`},
		{"name in minute", "JAN * * * *", "1h", `~minute "JAN" is not a number`},
		{"four fields", "0 0 * *", "1h", `enabledPeriod.schedule "0 0 * *": want 5 fields (minute hour day-of-month month day-of-week), got 4`},
		{"six fields", "0 0 0 * * *", "1h", "~got 6"},
		{"descriptor", " @daily", "1h", "~descriptors such as @daily are not supported"},
		{"time zone", "CRON_TZ=Europe/Paris 0 9 * * *", "1h", "~set enabledPeriod.timeZone instead"},
		{"zero duration", "", "0s", `enabledPeriod.duration "0s": must be greater than 0`},
		{"bare zero duration", "", "0", `enabledPeriod.duration "0": must be greater than 0`},
		{"negative duration", "", "-5m", `enabledPeriod.duration "-5m": must be greater than 0`},
		{"garbage duration", "", "forever", `enabledPeriod.duration "forever": not a Go duration such as 30m or 8h`},
		{"duration without unit", "", "30", `~enabledPeriod.duration "30": not a Go duration`},
		{"day unit", "", "1d", `~enabledPeriod.duration "1d": not a Go duration`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.schedule, tt.duration)
			if err == nil {
				t.Fatalf("Parse(%q, %q) succeeded, want error", tt.schedule, tt.duration)
			}
			if part, ok := strings.CutPrefix(tt.want, "~"); ok {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("error %q does not contain %q", err, part)
				}
			} else if err.Error() != tt.want {
				t.Errorf("error = %q\n      want %q", err, tt.want)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	for _, tt := range []struct {
		name               string
		schedule, duration string
	}{
		{"both empty", "", ""},
		{"blank schedule", "  ", ""},
		{"explicit", v1alpha1.DefaultEnabledSchedule, v1alpha1.DefaultEnabledDuration},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := mustParse(t, tt.schedule, tt.duration)
			if got, want := w.String(), `"0 0 * * *" for 24h0m0s`; got != want {
				t.Errorf("String() = %s, want %s", got, want)
			}
			// Daily for a day leaves no gap.
			for _, s := range []string{"2024-01-01T00:00:00Z", "2024-06-15T23:59:59Z", "2024-12-31T12:00:00Z"} {
				if !w.Active(mustTime(t, s)) {
					t.Errorf("default window not active at %s", s)
				}
			}
		})
	}
}

func TestAlwaysAndFromSpec(t *testing.T) {
	times := []time.Time{{}, mustTime(t, "2024-02-29T13:37:00Z"), time.Unix(1<<40, 0)}

	for name, w := range map[string]Window{"Always": Always(), "zero": {}} {
		for _, tm := range times {
			if !w.Active(tm) {
				t.Errorf("%s window not active at %v", name, tm)
			}
		}
		if w.String() != "always" {
			t.Errorf("%s String() = %q, want always", name, w.String())
		}
	}

	w, err := FromSpec(nil)
	if err != nil || w != Always() {
		t.Errorf("FromSpec(nil) = %v, %v; want Always(), nil", w, err)
	}

	w, err = FromSpec(&v1alpha1.EnabledPeriod{})
	if err != nil {
		t.Fatalf("FromSpec(empty): %v", err)
	}
	if w.String() != `"0 0 * * *" for 24h0m0s` {
		t.Errorf("FromSpec(empty) = %s, want the defaults", w)
	}

	w, err = FromSpec(&v1alpha1.EnabledPeriod{Schedule: "0 9 * * 1-5", Duration: "8h"})
	if err != nil {
		t.Fatalf("FromSpec: %v", err)
	}
	if !w.Active(mustTime(t, "2024-01-03T10:00:00Z")) || w.Active(mustTime(t, "2024-01-03T18:00:00Z")) {
		t.Errorf("FromSpec window %s has the wrong hours", w)
	}

	if _, err := FromSpec(&v1alpha1.EnabledPeriod{Schedule: "bad"}); err == nil {
		t.Error("FromSpec with a bad schedule succeeded")
	}
}

func TestActive(t *testing.T) {
	// 2024-01-01 is a Monday; 2024 is a leap year.
	tests := []struct {
		schedule, duration string
		at                 string
		want               bool
	}{
		// Office hours on weekdays.
		{"0 9 * * 1-5", "8h", "2024-01-01T08:59:59Z", false},
		{"0 9 * * 1-5", "8h", "2024-01-01T09:00:00Z", true},
		{"0 9 * * 1-5", "8h", "2024-01-01T12:30:00Z", true},
		{"0 9 * * 1-5", "8h", "2024-01-01T16:59:59.999Z", true},
		{"0 9 * * 1-5", "8h", "2024-01-01T17:00:00Z", false},
		{"0 9 * * 1-5", "8h", "2024-01-05T10:00:00Z", true},  // Friday
		{"0 9 * * 1-5", "8h", "2024-01-06T10:00:00Z", false}, // Saturday
		{"0 9 * * 1-5", "8h", "2024-01-07T10:00:00Z", false}, // Sunday
		{"0 9 * * MON-FRI", "8h", "2024-01-07T10:00:00Z", false},
		{"0 9 * * mon-fri", "8h", "2024-01-08T10:00:00Z", true},
		// A time in another zone is the same instant in UTC: 11:00 in
		// Paris is 10:00 UTC.
		{"0 9 * * 1-5", "8h", "2024-01-08T11:00:00+01:00", true},
		{"0 9 * * 1-5", "8h", "2024-01-08T17:30:00+01:00", true},
		{"0 9 * * 1-5", "8h", "2024-01-08T18:30:00+01:00", false},

		// Every quarter hour for five minutes.
		{"*/15 * * * *", "5m", "2024-03-10T10:00:00Z", true},
		{"*/15 * * * *", "5m", "2024-03-10T10:04:59Z", true},
		{"*/15 * * * *", "5m", "2024-03-10T10:05:00Z", false},
		{"*/15 * * * *", "5m", "2024-03-10T10:14:59Z", false},
		{"*/15 * * * *", "5m", "2024-03-10T10:15:00Z", true},
		{"*/15 * * * *", "5m", "2024-03-10T23:47:00Z", true},
		{"*/15 * * * *", "5m", "2024-03-10T23:59:00Z", false},

		// A window crossing midnight, and the end of a month and a year.
		{"0 22 * * *", "4h", "2024-01-31T23:30:00Z", true},
		{"0 22 * * *", "4h", "2024-02-01T01:59:00Z", true},
		{"0 22 * * *", "4h", "2024-02-01T02:00:00Z", false},
		{"0 22 * * *", "4h", "2024-02-01T21:59:00Z", false},
		{"30 23 31 12 *", "1h", "2025-01-01T00:29:59Z", true},
		{"30 23 31 12 *", "1h", "2025-01-01T00:30:00Z", false},
		// Last day of the month, only in months with 31 days.
		{"0 0 31 * *", "48h", "2024-03-31T05:00:00Z", true},
		{"0 0 31 * *", "48h", "2024-04-01T23:59:00Z", true},
		{"0 0 31 * *", "48h", "2024-04-02T00:00:00Z", false},
		{"0 0 31 * *", "48h", "2024-05-01T00:00:00Z", false},
		// First of the month for three days, looking back over a month end.
		{"0 0 1 * *", "72h", "2024-03-03T23:59:00Z", true},
		{"0 0 1 * *", "72h", "2024-03-04T00:00:00Z", false},
		{"0 0 1 * *", "72h", "2024-02-29T23:59:00Z", false},

		// Leap day: only every fourth year, and 2100 is not a leap year.
		{"0 0 29 2 *", "24h", "2024-02-29T12:00:00Z", true},
		{"0 0 29 2 *", "24h", "2024-03-01T00:00:00Z", false},
		{"0 0 29 2 *", "24h", "2025-03-01T12:00:00Z", false},
		{"0 0 29 2 *", "48h", "2025-03-01T12:00:00Z", false},
		// 1095 days after 2024-02-29 is 2027-02-28.
		{"0 0 29 FEB *", "26280h", "2027-02-27T23:59:59Z", true},
		{"0 0 29 2 *", "26280h", "2027-02-28T00:00:00Z", false},
		// 2100 is skipped: the last firing before 2104 was 2096-02-29, and
		// 2557 days after it is 2103-03-02.
		{"0 0 29 2 *", "61368h", "2103-03-01T23:59:00Z", true},
		{"0 0 29 2 *", "61368h", "2103-03-02T00:00:00Z", false},
		{"0 0 29 2 *", "61368h", "2104-01-31T00:00:00Z", false},
		{"0 0 29 2 *", "2562047h", "2104-01-31T00:00:00Z", true},

		// Both day fields restricted: either may match.
		{"0 0 13 * 5", "24h", "2024-09-13T12:00:00Z", true}, // Friday the 13th
		{"0 0 13 * 5", "24h", "2024-09-20T12:00:00Z", true}, // a Friday
		{"0 0 13 * 5", "24h", "2024-11-13T12:00:00Z", true}, // a Wednesday the 13th
		{"0 0 13 * 5", "24h", "2024-11-14T12:00:00Z", false},
		{"0 0 1 * MON", "1h", "2024-02-01T00:30:00Z", true}, // Thursday the 1st
		{"0 0 1 * MON", "1h", "2024-02-05T00:30:00Z", true}, // Monday the 5th
		{"0 0 1 * MON", "1h", "2024-02-06T00:30:00Z", false},
		// One day field unrestricted: both must match.
		{"0 0 * * 5", "24h", "2024-11-13T12:00:00Z", false},
		{"0 0 13 * *", "24h", "2024-09-20T12:00:00Z", false},
		// A stepped day-of-month counts as restricted, as in robfig/cron.
		{"0 0 */10 * 0", "1h", "2024-01-07T00:10:00Z", true}, // Sunday the 7th
		{"0 0 */10 * 0", "1h", "2024-01-11T00:10:00Z", true}, // Thursday the 11th
		{"0 0 */10 * 0", "1h", "2024-01-12T00:10:00Z", false},

		// Sunday as 0 and 7.
		{"0 12 * * 0", "1h", "2024-01-07T12:30:00Z", true},
		{"0 12 * * 7", "1h", "2024-01-07T12:30:00Z", true},
		{"0 12 * * SUN", "1h", "2024-01-08T12:30:00Z", false},

		// Month names and lists.
		{"0 0 1 jun-aug *", "720h", "2024-07-15T00:00:00Z", true},
		{"0 0 1 jun-aug *", "720h", "2024-09-15T00:00:00Z", false},
		{"0 0 1 jun-aug *", "1000h", "2024-09-10T00:00:00Z", true},

		// Windows longer than the period between firings.
		{"0 0 * * 1", "336h", "2024-01-01T00:00:00Z", true},
		{"* * * * *", "1m", "2024-05-05T05:05:05Z", true},
		{"0 0 1 1 *", "8760h", "2024-12-30T23:59:00Z", true}, // 2024 has 366 days
		{"0 0 1 1 *", "8760h", "2024-12-31T00:00:00Z", false},

		// Sub-minute durations: firing times are whole minutes.
		{"* * * * *", "30s", "2024-05-05T05:05:29Z", true},
		{"* * * * *", "30s", "2024-05-05T05:05:30Z", false},

		// Schedules that name days that do not exist never open.
		{"0 0 30 2 *", "2562047h", "2024-03-01T00:00:00Z", false},
		{"0 0 31 4,6,9,11 *", "8760h", "2024-12-01T00:00:00Z", false},
		// ...unless the weekday rule rescues them.
		{"0 0 30 2 1", "24h", "2024-02-05T10:00:00Z", true},
	}
	for _, tt := range tests {
		t.Run(tt.schedule+" for "+tt.duration+" at "+tt.at, func(t *testing.T) {
			w := mustParse(t, tt.schedule, tt.duration)
			if got := w.Active(mustTime(t, tt.at)); got != tt.want {
				t.Errorf("%s Active(%s) = %v, want %v", w, tt.at, got, tt.want)
			}
		})
	}
}

// bruteActive checks every whole minute back from now: the definition Active
// implements, without its shortcuts.
func bruteActive(w Window, now time.Time) bool {
	now = now.UTC()
	for t := now.Truncate(time.Minute); now.Before(t.Add(w.duration)); t = t.Add(-time.Minute) {
		c := &w.cron
		if c.minute&(1<<uint(t.Minute())) != 0 &&
			c.hour&(1<<uint(t.Hour())) != 0 &&
			c.month&(1<<uint(t.Month())) != 0 &&
			c.dayMatches(t.Day(), t.Weekday()) {
			return true
		}
	}
	return false
}

func TestActiveAgreesWithBruteForce(t *testing.T) {
	schedules := []string{
		"0 9 * * 1-5", "*/15 * * * *", "7,37 */5 * * *", "59 23 * * *",
		"0 0 1 * *", "0 0 31 * *", "0 0 29 2 *", "0 0 13 * 5", "30 1-3 */3 * SAT,SUN",
		"0 12 * 2,3 1", "45 * 1-7 * 1", "0 0 * * 0", "*/7 */11 * * *", "0 0 28-31 * *",
	}
	durations := []time.Duration{time.Minute, 90 * time.Second, 17 * time.Minute, 3 * time.Hour, 25 * time.Hour, 50 * time.Hour}
	rng := rand.New(rand.NewPCG(1, 2))
	start := mustTime(t, "2023-12-25T00:00:00Z").Unix()
	const spread = 3 * 366 * 24 * 3600

	for _, s := range schedules {
		for _, d := range durations {
			w := mustParse(t, s, d.String())
			for range 25 {
				now := time.Unix(start+rng.Int64N(spread), rng.Int64N(1e9)).UTC()
				if got, want := w.Active(now), bruteActive(w, now); got != want {
					t.Errorf("%s Active(%s) = %v, brute force says %v", w, now.Format(time.RFC3339Nano), got, want)
				}
				// The window edges are where off-by-one errors hide.
				if last, ok := w.cron.latest(now.Truncate(time.Minute), now.Add(-maxLookback)); ok {
					for _, edge := range []time.Time{last, last.Add(d - 1), last.Add(d), last.Add(-time.Nanosecond)} {
						if got, want := w.Active(edge), bruteActive(w, edge); got != want {
							t.Errorf("%s Active(%s) = %v, brute force says %v", w, edge.Format(time.RFC3339Nano), got, want)
						}
					}
				}
			}
		}
	}
}

func TestActiveIsCheapForLongDurations(t *testing.T) {
	// Stepping minute by minute through 292 years would take seconds; the
	// skipping search must answer at once for the worst schedules.
	for _, s := range []string{"0 0 29 2 *", "0 0 30 2 *", "59 23 31 12 *", "0 0 * * *", "0 0 31 * *"} {
		w := mustParse(t, s, "2562047h")
		start := time.Now()
		for range 100 {
			w.Active(mustTime(t, "2101-02-28T00:00:00Z"))
		}
		if elapsed := time.Since(start); elapsed > 500*time.Millisecond {
			t.Errorf("%s: 100 calls took %v", w, elapsed)
		}
	}
}

func BenchmarkActive(b *testing.B) {
	now := mustTime(b, "2024-06-15T14:23:11Z")
	for _, tt := range []struct{ schedule, duration string }{
		{"0 0 * * *", "24h"},
		{"0 9 * * 1-5", "8h"},
		{"0 0 29 2 *", "2562047h"},
		{"0 0 1 jan *", "720h"},
	} {
		w := mustParse(b, tt.schedule, tt.duration)
		b.Run(w.String(), func(b *testing.B) {
			for b.Loop() {
				w.Active(now)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"", "0 0 * * *", "0 9 * * 1-5", "*/15 * * * *", "5-20/5 1,2 */3 JAN-mar sun-SAT",
		"0 0 29 2 *", "0 0 30 2 *", "61 * * * *", "*/0 * * * *", "50/3 * * * 7", "? ? ? ? ?",
		"1-2-3 * * * *", "@daily", "a b c d e", "*,*,*/99999999999999999999 * * * *",
	} {
		f.Add(s, "8h", int64(1718461391))
	}
	f.Add("0 0 1 1 *", "2562047h", int64(-62135596800))
	f.Add("* * * * *", "1ns", int64(253402300799))
	f.Add("0 0 * * *", "-1h", int64(0))
	f.Fuzz(func(t *testing.T, schedule, duration string, unix int64) {
		w, err := Parse(schedule, duration)
		if err != nil {
			if w != (Window{}) {
				t.Fatalf("Parse failed but returned %v", w)
			}
			return
		}
		_ = w.String()
		now := time.Unix(unix, 0)
		got := w.Active(now)
		// Check the answer itself where brute force stays fast: short
		// windows at ordinary dates.
		if w.duration <= 3*time.Hour && now.Year() > 1 && now.Year() < 9999 {
			if want := bruteActive(w, now); got != want {
				t.Fatalf("%s Active(%s) = %v, brute force says %v", w, now.UTC(), got, want)
			}
		}
	})
}
