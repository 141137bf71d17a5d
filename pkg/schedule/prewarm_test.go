package schedule

import (
	"strings"
	"testing"
	"time"
)

func TestParsePreWarm(t *testing.T) {
	for in, want := range map[string]time.Duration{"": 0, "15m": 15 * time.Minute, "90s": 90 * time.Second, "1h": time.Hour, "1ms": time.Millisecond} {
		if got, err := ParsePreWarm(in); got != want || err != nil {
			t.Errorf("ParsePreWarm(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"0s":                    "must be greater than 0; leave it out for no pre-warm",
		"-5m":                   "must be greater than 0",
		"1h1s":                  "must be at most 1h0m0s",
		"2h":                    "must be at most 1h0m0s",
		"5 minutes":             "not a Go duration such as 5m or 90s",
		"5":                     "not a Go duration",
		strings.Repeat("1", 40): "longer than 32 characters",
	} {
		if got, err := ParsePreWarm(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParsePreWarm(%q) = %v, %v; want an error with %q", in, got, err, want)
		}
	}
}

// warm is one instant asked about: in the lead or not, and if so, the
// closing it leads up to.
type warm struct {
	utc, closes string // closes empty: not pre-warming
}

// TestPreWarming pins the pre-warm lead: the preWarm before each closing of
// the window (the end of the period in which the target may sleep), on
// elapsed time, with the closing placed on the wall clock as Active places
// it, across the 2026 changes.
func TestPreWarming(t *testing.T) {
	tests := []struct {
		name                              string
		zone, schedule, duration, preWarm string
		at                                []warm
	}{
		{"UTC: the quarter hour before 08:00", "", "0 20 * * *", "12h", "15m", []warm{
			{"2026-06-10T07:44:59Z", ""},
			{"2026-06-10T07:45:00Z", "2026-06-10T08:00:00Z"},
			{"2026-06-10T07:59:59Z", "2026-06-10T08:00:00Z"},
			{"2026-06-10T08:00:00Z", ""}, // closed: outside the window, the target is held up anyway
			{"2026-06-10T19:59:00Z", ""},
			{"2026-06-10T20:00:00Z", ""},
		}},
		{"UTC: overlapping windows close once", "", "0 0,1 * * *", "90m", "15m", []warm{
			{"2026-06-10T01:15:00Z", ""}, // the first window's end is inside the second
			{"2026-06-10T02:14:59Z", ""},
			{"2026-06-10T02:15:00Z", "2026-06-10T02:30:00Z"},
		}},
		{"UTC: a window that never closes is never pre-warmed", "", "0 * * * *", "90m", "1h", []warm{
			{"2026-06-10T01:15:00Z", ""},
		}},
		{"UTC: a short gap between two windows is a closing", "", "0 0,1 * * *", "50m", "15m", []warm{
			{"2026-06-10T00:34:59Z", ""},
			{"2026-06-10T00:35:00Z", "2026-06-10T00:50:00Z"},
		}},
		{"UTC: a lead longer than the window covers all of it", "", "0 0 * * *", "10m", "1h", []warm{
			{"2026-06-10T00:00:00Z", "2026-06-10T00:10:00Z"},
		}},
		{"Berlin spring: 06:00 CEST after a 7-hour night", "Europe/Berlin", "0 22 * * *", "8h", "15m", []warm{
			{"2026-03-29T03:44:59Z", ""},
			{"2026-03-29T03:45:00Z", "2026-03-29T04:00:00Z"}, // 05:45 CEST
			{"2026-03-29T03:59:59Z", "2026-03-29T04:00:00Z"},
			{"2026-03-29T04:00:00Z", ""},
		}},
		{"Berlin spring: the lead spans the change", "Europe/Berlin", "10 19 * * *", "8h", "30m", []warm{
			{"2026-03-29T00:39:59Z", ""},
			{"2026-03-29T00:40:00Z", "2026-03-29T01:10:00Z"}, // 01:40 CET, 30 elapsed minutes before 03:10 CEST
			{"2026-03-29T01:09:00Z", "2026-03-29T01:10:00Z"},
		}},
		{"Berlin spring: a closing in the skipped hour is the change", "Europe/Berlin", "30 18 * * *", "8h", "10m", []warm{
			{"2026-03-29T00:49:59Z", ""},
			{"2026-03-29T00:50:00Z", "2026-03-29T01:00:00Z"},
		}},
		{"Berlin spring: a window opening in the skipped hour bridges a closing in it", "Europe/Berlin", "30 0,2 * * *", "1h45m", "30m", []warm{
			{"2026-03-28T00:45:00Z", "2026-03-28T01:15:00Z"}, // the day before: 02:15 CET, a 15-minute gap
			{"2026-03-29T00:45:00Z", ""},                     // 01:45 CET: 02:15 does not exist, and 02:30 opens at 03:00 CEST
			{"2026-03-29T01:45:00Z", "2026-03-29T02:15:00Z"}, // 03:45 CEST, before 04:15 CEST
		}},
		{"Berlin fall: 06:00 CET after a 9-hour night", "Europe/Berlin", "0 22 * * *", "8h", "15m", []warm{
			{"2026-10-25T04:44:59Z", ""},
			{"2026-10-25T04:45:00Z", "2026-10-25T05:00:00Z"},
		}},
		{"Berlin fall: the lead spans the repeated hour", "Europe/Berlin", "10 19 * * *", "8h", "1h", []warm{
			{"2026-10-25T00:30:00Z", ""},                     // 02:30 CEST: 1h40m before 03:10 CET
			{"2026-10-25T01:09:59Z", ""},                     // 02:09:59 CET
			{"2026-10-25T01:10:00Z", "2026-10-25T02:10:00Z"}, // 02:10 CET
		}},
		{"Berlin fall: a closing in the repeated hour is its first showing", "Europe/Berlin", "30 18 * * *", "8h", "20m", []warm{
			{"2026-10-25T00:09:59Z", ""},
			{"2026-10-25T00:10:00Z", "2026-10-25T00:30:00Z"}, // 02:10 CEST, before 02:30 CEST
		}},
		{"New York spring: 08:00 EDT after a 9-hour night", "America/New_York", "0 22 * * *", "10h", "20m", []warm{
			{"2026-03-08T11:39:59Z", ""},
			{"2026-03-08T11:40:00Z", "2026-03-08T12:00:00Z"}, // 07:40 EDT
		}},
		{"New York spring: the lead spans the change", "America/New_York", "10 19 * * *", "8h", "30m", []warm{
			{"2026-03-08T06:39:59Z", ""},
			{"2026-03-08T06:40:00Z", "2026-03-08T07:10:00Z"}, // 01:40 EST, before 03:10 EDT
		}},
		{"New York fall: 08:00 EST after an 11-hour night", "America/New_York", "0 22 * * *", "10h", "20m", []warm{
			{"2026-11-01T12:39:59Z", ""},
			{"2026-11-01T12:40:00Z", "2026-11-01T13:00:00Z"}, // 07:40 EST
		}},
		{"New York fall: the lead spans the repeated hour", "America/New_York", "10 18 * * *", "8h", "1h", []warm{
			{"2026-11-01T05:30:00Z", ""},                     // 01:30 EDT: 1h40m before 02:10 EST
			{"2026-11-01T06:09:59Z", ""},                     // 01:09:59 EST
			{"2026-11-01T06:10:00Z", "2026-11-01T07:10:00Z"}, // 01:10 EST
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := mustZone(t, tt.schedule, tt.duration, tt.zone, tt.preWarm)
			for _, a := range tt.at {
				now := mustTime(t, a.utc)
				closes, ok := w.PreWarming(now)
				switch {
				case a.closes == "" && ok:
					t.Errorf("%s: PreWarming(%s) = %s, true; want false", w, a.utc, closes.Format(time.RFC3339))
				case a.closes != "" && (!ok || !closes.Equal(mustTime(t, a.closes))):
					t.Errorf("%s: PreWarming(%s) = %s, %v; want %s, true", w, a.utc, closes.Format(time.RFC3339), ok, a.closes)
				}
				if ok && !w.Active(now) {
					t.Errorf("%s: pre-warming at %s, outside the window", w, a.utc)
				}
			}
		})
	}
}

func TestNoPreWarmWithoutPreWarm(t *testing.T) {
	for _, w := range []Window{Always(), mustParse(t, "0 20 * * *", "12h"), mustZone(t, "0 20 * * *", "12h", "Europe/Berlin", "")} {
		if closes, ok := w.PreWarming(mustTime(t, "2026-06-10T07:59:00Z")); ok {
			t.Errorf("%s: PreWarming = %s, true; want false without preWarm", w, closes)
		}
	}
}

// TestPreWarmingAgreesWithSimulatedClock checks every minute around each
// change: pre-warming exactly when the window is open and the simulated
// clock shows it closed at some minute within the lead, and then the
// closing is the first such minute.
func TestPreWarmingAgreesWithSimulatedClock(t *testing.T) {
	// One lead, not a whole number of hours, so that a lead ending at the
	// change and one starting at it are both among the minutes checked.
	for _, lead := range []string{"40m"} {
		leadD, _ := time.ParseDuration(lead)
		for _, tr := range transitions {
			change := mustTime(t, tr.at)
			from, to := change.Add(-8*time.Hour), change.Add(8*time.Hour)
			for _, s := range bruteSchedules {
				for _, d := range bruteDurations {
					w := mustZone(t, s, d, tr.zone, lead)
					open := simulated(w, from, to.Add(leadD+time.Minute))
					for now := from; now.Before(to); now = now.Add(time.Minute) {
						var want time.Time
						if open[now] {
							for u := now.Add(time.Minute); !u.After(now.Add(leadD)); u = u.Add(time.Minute) {
								if !open[u] {
									want = u
									break
								}
							}
						}
						got, ok := w.PreWarming(now)
						if ok != !want.IsZero() || (ok && !got.Equal(want)) {
							t.Errorf("%s: PreWarming(%s = %s) = %s, %v; simulated clock says %s",
								w, now.Format(time.RFC3339), now.In(w.loc).Format("15:04 MST"), got.Format(time.RFC3339), ok, want.Format(time.RFC3339))
						}
					}
				}
			}
		}
	}
}

func BenchmarkPreWarming(b *testing.B) {
	now := mustTime(b, "2026-03-29T03:50:00Z")
	for _, tt := range []struct{ schedule, duration, zone string }{
		{"0 22 * * *", "8h", "Europe/Berlin"},
		{"0 20 * * 1-5", "12h", "America/New_York"},
		{"* * * * *", "1m", "Europe/Berlin"},
	} {
		w := mustZone(b, tt.schedule, tt.duration, tt.zone, "1h")
		b.Run(w.String(), func(b *testing.B) {
			for b.Loop() {
				w.PreWarming(now)
			}
		})
	}
}
