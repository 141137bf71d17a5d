package schedule

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
	"time"
	// Go's zone database, linked into every binary that evaluates a
	// window: the release images are built on an empty base with no
	// /usr/share/zoneinfo (hack/images), and a zone must resolve the same
	// on every replica whatever its image or host. time.LoadLocation still
	// prefers a system database when there is one.
	_ "time/tzdata"

	"github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

// A window in a time zone is read on that zone's wall clock. The cron
// expression and the duration are evaluated, as for UTC, on a "wall" time:
// the local date and time written as if it were UTC. Wall time runs with real
// time except at the zone's changes of offset: it jumps forward when the
// clocks spring forward (the skipped hour never shows) and back when they
// fall back (the repeated hour shows twice).
//
// The rule that makes every change well defined: the window only ever sees
// the latest wall time shown so far (wallSoFar). When the clocks fall back
// it stands still until the clock catches up, so the repeated hour opens or
// closes nothing a second time; when they spring forward it jumps, so a
// window that opens in the skipped hour opens at the change. See the README,
// "Enabled period, time zones and pre-warm".

// zoneReach is how far apart in real time two instants with the same wall
// time can be: UTC offsets run from -12h to +14h, and no zone changes its
// offset by more than a day.
const zoneReach = 30 * time.Hour

// zones caches the zones LoadZone found: FromSpec runs for every
// ElastiService on every poll, and time.LoadLocation reads and parses the
// zone each time. Only canonical names that loaded are kept, and at most
// maxZones of them: every namespace's timeZone is a key here, and a name
// that loads under several spellings (on a case-insensitive file system,
// "EUROPE/BERLIN" finds Europe/Berlin) must not let one namespace grow the
// operator's memory without end.
var zones = struct {
	sync.Mutex
	m map[string]*time.Location
}{m: map[string]*time.Location{}}

// maxZones bounds zones. The IANA database has about 600 names, links
// included, so every real zone fits; a variable so tests can reach it.
var maxZones = 1024

// LoadZone returns the zone an enabledPeriod.timeZone names: nil for "" (UTC,
// KubeElasti's only zone) and for UTC itself. The operator binary embeds
// Go's zone database (time/tzdata), so a name resolves even in an image
// without /usr/share/zoneinfo. Only a canonical name is looked up
// (checkZoneName). An error says what is wrong with the name, without
// repeating it.
func LoadZone(name string) (*time.Location, error) {
	if name == "" {
		return nil, nil
	}
	if err := checkZoneName(name); err != nil {
		return nil, err
	}
	zones.Lock()
	loc, ok := zones.m[name]
	full := len(zones.m) >= maxZones
	zones.Unlock()
	if ok {
		return loc, nil
	}
	if full {
		return nil, fmt.Errorf("the operator already keeps %d time zones, its bound; use one of the zones other ElastiServices use, or restart the operator", maxZones)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, errors.New("unknown time zone; use an IANA name such as Europe/Berlin or America/New_York")
	}
	if loc == time.UTC {
		loc = nil
	}
	zones.Lock()
	defer zones.Unlock()
	if len(zones.m) >= maxZones {
		return nil, fmt.Errorf("the operator already keeps %d time zones, its bound; use one of the zones other ElastiServices use, or restart the operator", maxZones)
	}
	zones.m[name] = loc
	return loc, nil
}

// checkZoneName refuses what time.LoadLocation would accept but does not
// name one zone for every replica: "Local" is the operator's own zone, and
// a name that is not an IANA name as the database writes it may still load
// from a system database (Europe//Berlin, Europe/./Berlin, ../ paths, and
// other spellings on a case-insensitive file system), where the embedded
// one, used on the release images, refuses it. A canonical name is what
// path.Clean leaves alone, relative, of elements of ASCII letters, digits,
// "_", "+" and "-" that each begin with a capital letter, as every IANA
// name does (Europe/Berlin, America/Port-au-Prince, Etc/GMT+5, EST5EDT).
func checkZoneName(name string) error {
	if len(name) > v1alpha1.MaxTimeZoneLength {
		return fmt.Errorf("longer than %d characters", v1alpha1.MaxTimeZoneLength)
	}
	if strings.EqualFold(name, "Local") {
		return errors.New("Local is the operator's own zone; name an IANA zone such as Europe/Berlin or America/New_York")
	}
	if !canonicalZoneName(name) {
		return errors.New("not an IANA name as the zone database writes it: elements of letters, digits, _, + and -, " +
			"each beginning with a capital letter, joined by single slashes, such as Europe/Berlin or America/Argentina/ComodRivadavia")
	}
	return nil
}

func canonicalZoneName(name string) bool {
	if path.Clean(name) != name || strings.HasPrefix(name, "/") {
		return false
	}
	for elem := range strings.SplitSeq(name, "/") {
		if elem == "" || elem == "." || elem == ".." || elem[0] < 'A' || elem[0] > 'Z' {
			return false
		}
		for i := 0; i < len(elem); i++ {
			switch c := elem[i]; {
			case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '_', c == '+', c == '-':
			default:
				return false
			}
		}
	}
	return true
}

// clip cuts a value FromSpec repeats in an error: the apiserver bounds
// timeZone and preWarm, but an older CRD may not.
func clip(value string) string {
	if len(value) > v1alpha1.MaxTimeZoneLength {
		return value[:v1alpha1.MaxTimeZoneLength] + "..."
	}
	return value
}

// wallAt is t's wall time in loc, written as a UTC time.
func wallAt(t time.Time, loc *time.Location) time.Time {
	_, offset := t.In(loc).Zone()
	return t.UTC().Add(time.Duration(offset) * time.Second)
}

// wallSoFar is the latest wall time loc's clock has shown at or before now.
// It is now's wall time, except in the hour (or whatever the zone repeats)
// after the clocks fall back, where it is the last wall time shown before
// they did, until the clock catches up.
func wallSoFar(now time.Time, loc *time.Location) time.Time {
	if loc == nil {
		return now.UTC()
	}
	latest := wallAt(now, loc)
	// Only the changes of the last zoneReach can have shown a later wall
	// time than now's; a zone rarely has more than one in that span.
	t := now
	for range 8 {
		start, _ := t.In(loc).ZoneBounds()
		if start.IsZero() || now.Sub(start) > zoneReach {
			break
		}
		before := start.Add(-time.Nanosecond)
		if w := wallAt(before, loc); w.After(latest) {
			latest = w
		}
		t = before
	}
	return latest
}

// firstShowing is the first instant at which loc's clock shows wall time w
// or later: w's instant, its first occurrence if the clocks fall back over
// it, and the change itself if the clocks spring forward over it. It is the
// instant at which wallSoFar reaches w, and never decreases as w grows.
func firstShowing(w time.Time, loc *time.Location) time.Time {
	if loc == nil {
		return w
	}
	// Within one period of constant offset, wall time is real time plus the
	// offset, so the first instant showing w or later is w minus the offset,
	// or the period's start if the period already starts past w. The
	// periods are walked in order, so the first that has one has the first.
	t := w.Add(-zoneReach)
	for range 16 {
		start, end := t.In(loc).ZoneBounds()
		_, offset := t.In(loc).Zone()
		at := w.Add(-time.Duration(offset) * time.Second)
		if !start.IsZero() && at.Before(start) {
			at = start
		}
		if end.IsZero() || at.Before(end) {
			return at.UTC()
		}
		t = end
	}
	// Only a zone changing its offset more than sixteen times in sixty
	// hours gets here.
	return w.Add(-zoneReach)
}
