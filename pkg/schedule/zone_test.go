package schedule

import (
	"strings"
	"testing"
	"time"

	"github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

// The 2026 changes the tests pin, in UTC.
const (
	berlinSpring  = "2026-03-29T01:00:00Z" // 02:00 CET -> 03:00 CEST
	berlinFall    = "2026-10-25T01:00:00Z" // 03:00 CEST -> 02:00 CET
	newYorkSpring = "2026-03-08T07:00:00Z" // 02:00 EST -> 03:00 EDT
	newYorkFall   = "2026-11-01T06:00:00Z" // 02:00 EDT -> 01:00 EST
)

func mustZone(t testing.TB, schedule, duration, zone, preWarm string) Window {
	t.Helper()
	w, err := FromSpec(&v1alpha1.EnabledPeriod{Schedule: schedule, Duration: duration, TimeZone: zone, PreWarm: preWarm})
	if err != nil {
		t.Fatalf("FromSpec(%q, %q, %q, %q): %v", schedule, duration, zone, preWarm, err)
	}
	return w
}

// TestTransitionsAreWhereTheTestsSayTheyAre guards the tables below against
// a zone database that moved a 2026 change.
func TestTransitionsAreWhereTheTestsSayTheyAre(t *testing.T) {
	for _, tt := range []struct {
		zone, at      string
		before, after time.Duration
	}{
		{"Europe/Berlin", berlinSpring, time.Hour, 2 * time.Hour},
		{"Europe/Berlin", berlinFall, 2 * time.Hour, time.Hour},
		{"America/New_York", newYorkSpring, -5 * time.Hour, -4 * time.Hour},
		{"America/New_York", newYorkFall, -4 * time.Hour, -5 * time.Hour},
	} {
		loc, err := LoadZone(tt.zone)
		if err != nil {
			t.Fatal(err)
		}
		at := mustTime(t, tt.at)
		_, before := at.Add(-time.Nanosecond).In(loc).Zone()
		_, after := at.In(loc).Zone()
		if time.Duration(before)*time.Second != tt.before || time.Duration(after)*time.Second != tt.after {
			t.Errorf("%s at %s: offset %ds -> %ds, want %s -> %s", tt.zone, tt.at, before, after, tt.before, tt.after)
		}
	}
}

func TestLoadZone(t *testing.T) {
	for _, name := range []string{"", "UTC"} {
		if loc, err := LoadZone(name); loc != nil || err != nil {
			t.Errorf("LoadZone(%q) = %v, %v; want nil (UTC), nil", name, loc, err)
		}
	}
	for _, name := range []string{"Europe/Berlin", "America/New_York", "America/Argentina/ComodRivadavia", "Etc/GMT+5", "Asia/Kolkata"} {
		loc, err := LoadZone(name)
		if err != nil || loc == nil || loc.String() != name {
			t.Errorf("LoadZone(%q) = %v, %v", name, loc, err)
		}
		// Again, from the cache.
		if again, err := LoadZone(name); again != loc || err != nil {
			t.Errorf("LoadZone(%q) again = %v, %v; want %v", name, again, err, loc)
		}
	}
	for _, tt := range []struct{ name, want string }{
		{"Europe/Berlinn", "unknown time zone; use an IANA name such as Europe/Berlin or America/New_York"},
		{"Mars/Olympus_Mons", "unknown time zone"},
		{"europe/berlin", "not an IANA name"},
		{"../../etc/passwd", "not an IANA name"},
		{"/usr/share/zoneinfo/UTC", "not an IANA name"},
		{"Local", "Local is the operator's own zone"},
		{"local", "Local is the operator's own zone"},
		{strings.Repeat("A", v1alpha1.MaxTimeZoneLength+1), "longer than 64 characters"},
	} {
		loc, err := LoadZone(tt.name)
		if err == nil || loc != nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("LoadZone(%q) = %v, %v; want an error with %q", tt.name, loc, err, tt.want)
		}
	}
}

func TestFromSpecNamesTheField(t *testing.T) {
	for _, tt := range []struct {
		ep   v1alpha1.EnabledPeriod
		want string
	}{
		{v1alpha1.EnabledPeriod{TimeZone: "Europe/Berlinn"}, `enabledPeriod.timeZone "Europe/Berlinn": unknown time zone; use an IANA name such as Europe/Berlin or America/New_York`},
		{v1alpha1.EnabledPeriod{TimeZone: "Local"}, `enabledPeriod.timeZone "Local": Local is the operator's own zone`},
		{v1alpha1.EnabledPeriod{TimeZone: strings.Repeat("x", 100)}, `enabledPeriod.timeZone "` + strings.Repeat("x", 64) + `...": longer than 64 characters`},
		{v1alpha1.EnabledPeriod{PreWarm: "2h"}, `enabledPeriod.preWarm "2h": must be at most 1h0m0s`},
		{v1alpha1.EnabledPeriod{Schedule: "0 25 * * *", TimeZone: "Europe/Berlin"}, `enabledPeriod.schedule "0 25 * * *": hour 25 out of range 0-23`},
	} {
		w, err := FromSpec(&tt.ep)
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) || w != (Window{}) {
			t.Errorf("FromSpec(%+v) = %v, %v; want an error starting %q", tt.ep, w, err, tt.want)
		}
	}
}

// TestUTCKeepsItsMeaning: a KubeElasti spec (no timeZone) and the same spec
// with timeZone UTC are the window Parse has always built.
func TestUTCKeepsItsMeaning(t *testing.T) {
	want := mustParse(t, "0 9 * * 1-5", "8h")
	for _, zone := range []string{"", "UTC"} {
		if got := mustZone(t, "0 9 * * 1-5", "8h", zone, ""); got != want {
			t.Errorf("timeZone %q: window %v, want %v", zone, got, want)
		}
	}
}

// at is one instant a window is asked about, and the answer.
type at struct {
	utc    string
	active bool
}

// TestActiveAcrossDaylightSaving pins what a window does at each 2026 change
// in both zones, the behaviour the README documents: windows are read on
// the wall clock, the skipped hour opens and closes at the change, the
// repeated hour opens and closes at its first occurrence only, and a
// duration is wall-clock time (an 8h window spanning a change is 7 or 9
// elapsed hours).
func TestActiveAcrossDaylightSaving(t *testing.T) {
	tests := []struct {
		name                     string
		zone, schedule, duration string
		at                       []at
	}{
		// Europe/Berlin, spring forward: 02:00 CET is 03:00 CEST.
		{"Berlin spring: opens in the skipped hour, at the change", "Europe/Berlin", "30 2 * * *", "1h", []at{
			{"2026-03-28T01:30:00Z", true}, // the day before: 02:30 CET
			{"2026-03-29T00:59:59Z", false},
			{"2026-03-29T01:00:00Z", true}, // 03:00 CEST
			{"2026-03-29T01:29:59Z", true},
			{"2026-03-29T01:30:00Z", false}, // 03:30 CEST: 30 elapsed minutes
			{"2026-03-30T00:30:00Z", true},  // the day after: 02:30 CEST
		}},
		{"Berlin spring: opens and closes in the skipped hour, so not that day", "Europe/Berlin", "15 2 * * *", "30m", []at{
			{"2026-03-28T01:15:00Z", true},
			{"2026-03-29T00:59:00Z", false},
			{"2026-03-29T01:00:00Z", false},
			{"2026-03-29T01:15:00Z", false},
			{"2026-03-30T00:15:00Z", true},
		}},
		{"Berlin spring: opens before, closes after (7 elapsed hours)", "Europe/Berlin", "0 22 * * *", "8h", []at{
			{"2026-03-28T20:59:00Z", false},
			{"2026-03-28T21:00:00Z", true}, // 22:00 CET
			{"2026-03-29T01:00:00Z", true},
			{"2026-03-29T03:59:59Z", true},
			{"2026-03-29T04:00:00Z", false}, // 06:00 CEST
		}},
		{"Berlin spring: closes in the skipped hour, at the change", "Europe/Berlin", "30 18 * * *", "8h", []at{
			{"2026-03-28T17:30:00Z", true},
			{"2026-03-29T00:59:59Z", true},
			{"2026-03-29T01:00:00Z", false},
		}},
		{"Berlin spring: opens at the change", "Europe/Berlin", "0 3 * * *", "1h", []at{
			{"2026-03-29T00:59:00Z", false},
			{"2026-03-29T01:00:00Z", true},
			{"2026-03-29T02:00:00Z", false},
		}},
		{"Berlin spring: opens after", "Europe/Berlin", "0 4 * * *", "2h", []at{
			{"2026-03-29T01:59:00Z", false},
			{"2026-03-29T02:00:00Z", true}, // 04:00 CEST
			{"2026-03-29T04:00:00Z", false},
		}},

		// Europe/Berlin, fall back: 03:00 CEST is 02:00 CET; 02:00-03:00
		// shows twice, first 00:00-01:00Z, then 01:00-02:00Z.
		{"Berlin fall: opens in the repeated hour, once (2 elapsed hours)", "Europe/Berlin", "30 2 * * *", "1h", []at{
			{"2026-10-25T00:29:59Z", false},
			{"2026-10-25T00:30:00Z", true}, // 02:30 CEST
			{"2026-10-25T01:00:00Z", true}, // 02:00 CET: the clock went back, the window stays
			{"2026-10-25T01:30:00Z", true}, // 02:30 CET: opens nothing again
			{"2026-10-25T02:29:59Z", true},
			{"2026-10-25T02:30:00Z", false}, // 03:30 CET
		}},
		{"Berlin fall: closes in the repeated hour, at its first showing", "Europe/Berlin", "30 18 * * *", "8h", []at{
			{"2026-10-24T16:30:00Z", true}, // 18:30 CEST
			{"2026-10-25T00:29:59Z", true},
			{"2026-10-25T00:30:00Z", false}, // 02:30 CEST
			{"2026-10-25T01:30:00Z", false}, // 02:30 CET does not reopen it
		}},
		{"Berlin fall: opens and closes in the repeated hour, once", "Europe/Berlin", "10 2 * * *", "20m", []at{
			{"2026-10-25T00:10:00Z", true},
			{"2026-10-25T00:29:59Z", true},
			{"2026-10-25T00:30:00Z", false},
			{"2026-10-25T01:10:00Z", false},
			{"2026-10-25T01:15:00Z", false},
		}},
		{"Berlin fall: opens before, closes after (9 elapsed hours)", "Europe/Berlin", "0 22 * * *", "8h", []at{
			{"2026-10-24T19:59:00Z", false},
			{"2026-10-24T20:00:00Z", true}, // 22:00 CEST
			{"2026-10-25T04:59:59Z", true},
			{"2026-10-25T05:00:00Z", false}, // 06:00 CET
		}},
		{"Berlin fall: hourly windows do not open again in the repeated hour", "Europe/Berlin", "0 * * * *", "30m", []at{
			{"2026-10-25T00:00:00Z", true}, // 02:00 CEST
			{"2026-10-25T00:30:00Z", false},
			{"2026-10-25T01:00:00Z", false}, // 02:00 CET
			{"2026-10-25T02:00:00Z", true},  // 03:00 CET
		}},

		// America/New_York, spring forward: 02:00 EST is 03:00 EDT.
		{"New York spring: opens in the skipped hour, at the change", "America/New_York", "30 2 * * *", "1h", []at{
			{"2026-03-07T07:30:00Z", true},
			{"2026-03-08T06:59:59Z", false},
			{"2026-03-08T07:00:00Z", true},
			{"2026-03-08T07:29:59Z", true},
			{"2026-03-08T07:30:00Z", false},
		}},
		{"New York spring: opens before, closes after (7 elapsed hours)", "America/New_York", "0 22 * * *", "8h", []at{
			{"2026-03-08T02:59:00Z", false},
			{"2026-03-08T03:00:00Z", true}, // 22:00 EST on the 7th
			{"2026-03-08T09:59:59Z", true},
			{"2026-03-08T10:00:00Z", false}, // 06:00 EDT
		}},
		{"New York spring: closes in the skipped hour, at the change", "America/New_York", "30 18 * * *", "8h", []at{
			{"2026-03-08T06:59:59Z", true},
			{"2026-03-08T07:00:00Z", false},
		}},

		// America/New_York, fall back: 02:00 EDT is 01:00 EST; 01:00-02:00
		// shows twice, first 05:00-06:00Z, then 06:00-07:00Z.
		{"New York fall: opens in the repeated hour, once (2 elapsed hours)", "America/New_York", "30 1 * * *", "1h", []at{
			{"2026-11-01T05:29:59Z", false},
			{"2026-11-01T05:30:00Z", true}, // 01:30 EDT
			{"2026-11-01T06:30:00Z", true}, // 01:30 EST
			{"2026-11-01T07:29:59Z", true},
			{"2026-11-01T07:30:00Z", false}, // 02:30 EST
		}},
		{"New York fall: closes in the repeated hour, at its first showing", "America/New_York", "0 17 * * *", "8h30m", []at{
			{"2026-11-01T05:29:59Z", true},
			{"2026-11-01T05:30:00Z", false}, // 01:30 EDT
			{"2026-11-01T06:30:00Z", false}, // 01:30 EST
		}},
		{"New York fall: opens before, closes after (9 elapsed hours)", "America/New_York", "0 22 * * *", "8h", []at{
			{"2026-11-01T01:59:00Z", false},
			{"2026-11-01T02:00:00Z", true}, // 22:00 EDT on the 31st
			{"2026-11-01T10:59:59Z", true},
			{"2026-11-01T11:00:00Z", false}, // 06:00 EST
		}},
		{"New York fall: opens after", "America/New_York", "0 3 * * *", "1h", []at{
			{"2026-11-01T07:59:00Z", false},
			{"2026-11-01T08:00:00Z", true}, // 03:00 EST
			{"2026-11-01T09:00:00Z", false},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := mustZone(t, tt.schedule, tt.duration, tt.zone, "")
			for _, a := range tt.at {
				now := mustTime(t, a.utc)
				if got := w.Active(now); got != a.active {
					t.Errorf("%s: Active(%s = %s) = %v, want %v", w, a.utc, now.In(w.loc).Format("15:04:05 MST"), got, a.active)
				}
			}
		})
	}
}

// simulated runs the window as a clock-driven scheduler would, minute by
// minute of real time over [from, to): each minute it reads the zone's clock
// and opens every window whose opening the clock has reached for the first
// time, skipped minutes included; a window is open until the clock first
// reaches its opening plus its duration. It is the behaviour
// TestActiveAcrossDaylightSaving pins, built without wallSoFar or
// firstShowing, for the brute-force comparisons.
func simulated(w Window, from, to time.Time) map[time.Time]bool {
	open := map[time.Time]bool{}
	// Start a duration early (and a day more), so that the windows open
	// at from have been opened.
	start := from.Add(-w.duration - zoneReach)
	shown := wallAt(start, w.loc).Add(-time.Minute) // the clock's latest reading so far
	var closesAt time.Time                          // the latest closing of an opened window, on the clock
	for now := start; now.Before(to); now = now.Add(time.Minute) {
		wall := wallAt(now, w.loc)
		for m := shown.Add(time.Minute); !m.After(wall); m = m.Add(time.Minute) {
			c := &w.cron
			if c.minute&(1<<uint(m.Minute())) != 0 && c.hour&(1<<uint(m.Hour())) != 0 &&
				c.month&(1<<uint(m.Month())) != 0 && c.dayMatches(m.Day(), m.Weekday()) && m.Add(w.duration).After(closesAt) {
				closesAt = m.Add(w.duration)
			}
		}
		if wall.After(shown) {
			shown = wall
		}
		if !now.Before(from) {
			open[now] = closesAt.After(shown)
		}
	}
	return open
}

// bruteSchedules and bruteDurations cover windows inside, before, after
// and across each change, overlapping ones and ones that abut.
var (
	bruteSchedules = []string{
		"30 2 * * *", "0 22 * * *", "*/20 * * * *", "0 * * * *", "30 0,2 * * *", "10 19 * * *",
		"0 1-3 * * *", "45 1 * * *", "15 2 * * *", "0 3 * * *",
	}
	bruteDurations = []string{"10m", "45m", "1h", "1h45m", "8h", "25h"}
	transitions    = []struct{ zone, at string }{
		{"Europe/Berlin", berlinSpring}, {"Europe/Berlin", berlinFall},
		{"America/New_York", newYorkSpring}, {"America/New_York", newYorkFall},
	}
)

func TestActiveAgreesWithSimulatedClock(t *testing.T) {
	for _, tr := range transitions {
		change := mustTime(t, tr.at)
		from, to := change.Add(-14*time.Hour), change.Add(14*time.Hour)
		for _, s := range bruteSchedules {
			for _, d := range bruteDurations {
				w := mustZone(t, s, d, tr.zone, "")
				want := simulated(w, from, to)
				for now := from; now.Before(to); now = now.Add(time.Minute) {
					if got := w.Active(now); got != want[now] {
						t.Errorf("%s: Active(%s = %s) = %v, simulated clock says %v",
							w, now.Format(time.RFC3339), now.In(w.loc).Format("15:04 MST"), got, want[now])
					}
				}
			}
		}
	}
}
