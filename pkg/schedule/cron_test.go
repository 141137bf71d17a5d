package schedule

import (
	"strings"
	"testing"
	"time"
)

// TestNormalise pins what each accepted form is handed to robfig/cron as.
func TestNormalise(t *testing.T) {
	tests := []struct{ expr, want string }{
		// Unrestricted fields, with '?' as robfig/cron and KubeElasti read it.
		{"* * * * *", "* * * * *"},
		{"? ? ? ? ?", "* * * * *"},
		{" *\t* *  * * ", "* * * * *"},
		{"*/1 * * * *", "*/1 * * * *"},
		// Values, with leading zeros.
		{"0 9 1 6 3", "0-0 9-9 1-1 6-6 3-3"},
		{"05 09 * * *", "5-5 9-9 * * *"},
		// Lists and ranges.
		{"1,2,10-12 * * * *", "1-1,2-2,10-12 * * * *"},
		// Steps on '*', on a range, and on a lone value (value-max/step).
		{"*/15 */6 */2 */3 */2", "*/15 */6 */2 */3 */2"},
		{"5-20/5 * * * *", "5-20/5 * * * *"},
		{"50/3 * * * *", "50-59/3 * * * *"},
		{"? 2/9 * * *", "* 2-23/9 * * *"},
		// A step wider than the field is capped; it still selects only the start.
		{"*/100 * * * *", "*/60 * * * *"},
		{"*/99999999999999999999 * * * *", "*/60 * * * *"},
		// Names, in any case, alone, in ranges and lists.
		{"0 0 * jan,Mar,DEC *", "0-0 0-0 * 1-1,3-3,12-12 *"},
		{"0 0 * feb-apr mon-FRI", "0-0 0-0 * 2-4 1-5"},
		{"0 0 * * Sat,sun", "0-0 0-0 * * 6-6,0-0"},
		// Sunday as 7: alone, closing a range, with steps, and as a lone
		// value with a step.
		{"0 0 * * 7", "0-0 0-0 * * 0"},
		{"0 0 * * 5-7", "0-0 0-0 * * 5-6,0"},
		{"0 0 * * 0-7", "0-0 0-0 * * 0-6,0"},
		{"0 0 * * 7-7", "0-0 0-0 * * 0"},
		{"0 0 * * 1-7/2", "0-0 0-0 * * 1-6/2,0"},
		{"0 0 * * 2-7/2", "0-0 0-0 * * 2-6/2"},
		{"0 0 * * 1/3", "0-0 0-0 * * 1-6/3,0"},
		{"0 0 * * 7/2", "0-0 0-0 * * 0"},
		{"0 0 * * 3,7", "0-0 0-0 * * 3-3,0"},
		{"0 0 * * */2", "0-0 0-0 * * */2"},
		{"0 0 * * */8", "0-0 0-0 * * */8"},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			got, err := normalise(tt.expr)
			if err != nil {
				t.Fatalf("normalise: %v", err)
			}
			if got != tt.want {
				t.Errorf("normalise(%q) = %q, want %q", tt.expr, got, tt.want)
			}
			if _, err := parser.Parse(got); err != nil {
				t.Errorf("robfig/cron refuses %q: %v", got, err)
			}
		})
	}
}

// TestFirings checks each accepted form end to end: the first firings after
// a start, found by robfig/cron, in UTC.
func TestFirings(t *testing.T) {
	// 2024-01-01 is a Monday; 2024 is a leap year.
	tests := []struct {
		expr, start string
		want        []string
	}{
		{"* * * * *", "2024-01-01T10:00:30Z", []string{"2024-01-01T10:01:00Z", "2024-01-01T10:02:00Z"}},
		{"? ? ? ? ?", "2024-01-01T10:00:00Z", []string{"2024-01-01T10:01:00Z", "2024-01-01T10:02:00Z"}},
		{"05 09 * * *", "2024-01-01T10:00:00Z", []string{"2024-01-02T09:05:00Z", "2024-01-03T09:05:00Z"}},
		{"1,2,10-11 0 * * *", "2024-01-01T00:00:00Z", []string{
			"2024-01-01T00:01:00Z", "2024-01-01T00:02:00Z", "2024-01-01T00:10:00Z", "2024-01-01T00:11:00Z", "2024-01-02T00:01:00Z",
		}},
		{"*/20 * * * *", "2024-01-01T10:00:00Z", []string{"2024-01-01T10:20:00Z", "2024-01-01T10:40:00Z", "2024-01-01T11:00:00Z"}},
		{"5-21/8 3 * * *", "2024-01-01T00:00:00Z", []string{"2024-01-01T03:05:00Z", "2024-01-01T03:13:00Z", "2024-01-01T03:21:00Z", "2024-01-02T03:05:00Z"}},
		{"50/5 3 * * *", "2024-01-01T00:00:00Z", []string{"2024-01-01T03:50:00Z", "2024-01-01T03:55:00Z", "2024-01-02T03:50:00Z"}},
		{"*/100 3 * * *", "2024-01-01T00:00:00Z", []string{"2024-01-01T03:00:00Z", "2024-01-02T03:00:00Z"}},
		{"0 0 1 jan,Mar,DEC *", "2024-01-01T00:00:00Z", []string{"2024-03-01T00:00:00Z", "2024-12-01T00:00:00Z", "2025-01-01T00:00:00Z"}},
		{"0 0 */10 * *", "2024-01-01T00:00:00Z", []string{"2024-01-11T00:00:00Z", "2024-01-21T00:00:00Z", "2024-01-31T00:00:00Z", "2024-02-01T00:00:00Z"}},
		{"0 0 * */5 *", "2024-01-31T00:00:00Z", []string{"2024-06-01T00:00:00Z", "2024-06-02T00:00:00Z"}},
		{"0 9 * * mon-FRI", "2024-01-05T10:00:00Z", []string{"2024-01-08T09:00:00Z", "2024-01-09T09:00:00Z"}},
		{"0 9 * * 1-5", "2024-01-05T10:00:00Z", []string{"2024-01-08T09:00:00Z", "2024-01-09T09:00:00Z"}},
		// Sunday as 0, 7 and SUN; 2024-01-07 and 2024-01-14 are Sundays.
		{"0 12 * * 0", "2024-01-01T00:00:00Z", []string{"2024-01-07T12:00:00Z", "2024-01-14T12:00:00Z"}},
		{"0 12 * * 7", "2024-01-01T00:00:00Z", []string{"2024-01-07T12:00:00Z", "2024-01-14T12:00:00Z"}},
		{"0 12 * * sun", "2024-01-01T00:00:00Z", []string{"2024-01-07T12:00:00Z", "2024-01-14T12:00:00Z"}},
		{"0 12 * * 6-7", "2024-01-01T00:00:00Z", []string{"2024-01-06T12:00:00Z", "2024-01-07T12:00:00Z", "2024-01-13T12:00:00Z"}},
		{"0 12 * * 5/2", "2024-01-01T00:00:00Z", []string{"2024-01-05T12:00:00Z", "2024-01-07T12:00:00Z", "2024-01-12T12:00:00Z"}},
		{"0 12 * * */3", "2024-01-01T00:00:00Z", []string{"2024-01-03T12:00:00Z", "2024-01-06T12:00:00Z", "2024-01-07T12:00:00Z"}},
		// Both day fields restricted: either may match (the 13th, or a Friday).
		{"0 0 13 * 5", "2024-09-01T00:00:00Z", []string{"2024-09-06T00:00:00Z", "2024-09-13T00:00:00Z", "2024-09-20T00:00:00Z"}},
		// One unrestricted: both must match.
		{"0 0 13 * *", "2024-09-01T00:00:00Z", []string{"2024-09-13T00:00:00Z", "2024-10-13T00:00:00Z"}},
		{"0 0 * * 5", "2024-09-01T00:00:00Z", []string{"2024-09-06T00:00:00Z", "2024-09-13T00:00:00Z"}},
		// A leap day eight years apart across 2100, beyond robfig/cron's
		// five-year search.
		{"0 0 29 2 *", "2096-03-01T00:00:00Z", []string{"2104-02-29T00:00:00Z"}},
		// In UTC whatever zone the start is written in: 10:00 in Paris is
		// 09:00 UTC.
		{"30 9 * * *", "2024-01-01T10:00:00+01:00", []string{"2024-01-01T09:30:00Z", "2024-01-02T09:30:00Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.expr+" after "+tt.start, func(t *testing.T) {
			c, err := parseCron(tt.expr)
			if err != nil {
				t.Fatalf("parseCron: %v", err)
			}
			var got []string
			for at := mustTime(t, tt.start); len(got) < len(tt.want); {
				next, ok := c.next(at)
				if !ok {
					break
				}
				got = append(got, next.Format(time.RFC3339))
				at = next
			}
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("firings of %q after %s\n got %v\nwant %v", tt.expr, tt.start, got, tt.want)
			}
		})
	}
}

// TestNeverFires covers schedules that name days that do not exist: the
// search gives up instead of running on.
func TestNeverFires(t *testing.T) {
	for _, expr := range []string{"0 0 30 2 *", "0 0 31 4,6,9,11 *"} {
		c, err := parseCron(expr)
		if err != nil {
			t.Fatalf("parseCron(%q): %v", expr, err)
		}
		if next, ok := c.next(mustTime(t, "2024-01-01T00:00:00Z")); ok {
			t.Errorf("%q fires at %s", expr, next)
		}
	}
}
