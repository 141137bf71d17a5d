package schedule

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

// Spellings of a zone that are not its IANA name (issue 30, item 9). Where
// the image has a zone database, time.LoadLocation opens the file under
// the spelling, so most of these load there; each would be one more cache
// entry. LoadZone refuses them all, before looking anything up.
func TestNonCanonicalZoneNamesAreRefused(t *testing.T) {
	if _, err := os.Stat("/usr/share/zoneinfo/Europe/Berlin"); err != nil {
		t.Logf("no system zone database here (%v): the variants are refused whatever loads", err)
	}
	for _, name := range []string{
		"Europe//Berlin",
		"Europe/./Berlin",
		"./Europe/Berlin",
		"Europe/Berlin/",
		"Europe/Berlin/.",
		"Europe/../Europe/Berlin",
		"../zoneinfo/Europe/Berlin",
		"/Europe/Berlin",
		"/usr/share/zoneinfo/Europe/Berlin",
		"europe/berlin",
		"Europe/berlin",
		"europe/Berlin",
		"Europe\\Berlin",
		"Europe/Berlin\x00",
		"Europe/Berlin ",
		" Europe/Berlin",
		"Europe/%42erlin",
		"Europe/Ber.lin",
		"posixrules",
		"Europe/Berlin" + strings.Repeat("/", 2),
		strings.Repeat("E", v1alpha1.MaxTimeZoneLength+1),
	} {
		loc, err := LoadZone(name)
		if err == nil || loc != nil {
			t.Errorf("LoadZone(%q) = %v, %v; want refused", name, loc, err)
			continue
		}
		zones.Lock()
		_, cached := zones.m[name]
		zones.Unlock()
		if cached {
			t.Errorf("LoadZone(%q) left it in the cache", name)
		}
	}
	// The length bound: at it is a name like any other (unknown here), one
	// past it is refused for its length.
	if _, err := LoadZone(strings.Repeat("E", v1alpha1.MaxTimeZoneLength)); err == nil || !strings.Contains(err.Error(), "unknown time zone") {
		t.Errorf("a name of %d characters: %v, want unknown", v1alpha1.MaxTimeZoneLength, err)
	}
	if _, err := LoadZone(strings.Repeat("E", v1alpha1.MaxTimeZoneLength+1)); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("a name of %d characters: %v, want too long", v1alpha1.MaxTimeZoneLength+1, err)
	}
	// The canonical names, with their capitals, digits, "+", "-" and "_".
	for _, name := range []string{"Europe/Berlin", "America/Port-au-Prince", "America/Argentina/ComodRivadavia", "Etc/GMT+5", "Etc/GMT-14", "EST5EDT", "America/St_Johns", "UTC"} {
		if _, err := LoadZone(name); err != nil {
			t.Errorf("LoadZone(%q): %v", name, err)
		}
	}
}

// The cache holds at most maxZones names: at the bound a new name is
// refused, and the names already kept still load.
func TestZoneCacheIsBounded(t *testing.T) {
	zones.Lock()
	saved, savedMax := zones.m, maxZones
	zones.m, maxZones = map[string]*time.Location{}, 3
	zones.Unlock()
	t.Cleanup(func() {
		zones.Lock()
		zones.m, maxZones = saved, savedMax
		zones.Unlock()
	})

	names := []string{"Europe/Berlin", "Asia/Tokyo", "America/New_York", "Australia/Sydney"}
	for _, name := range names[:3] {
		if loc, err := LoadZone(name); err != nil || loc.String() != name {
			t.Fatalf("LoadZone(%q) within the bound = %v, %v", name, loc, err)
		}
	}
	if loc, err := LoadZone(names[3]); err == nil || loc != nil || !strings.Contains(err.Error(), "already keeps 3 time zones") {
		t.Errorf("LoadZone(%q) one past the bound = %v, %v; want refused", names[3], loc, err)
	}
	for _, name := range names[:3] {
		if loc, err := LoadZone(name); err != nil || loc.String() != name {
			t.Errorf("LoadZone(%q) at the bound = %v, %v; want it from the cache", name, loc, err)
		}
	}
	// Unknown names take no place, and "" none.
	for _, name := range []string{"Mars/Olympus_Mons", "Europe/Berlinn", ""} {
		_, _ = LoadZone(name)
	}
	zones.Lock()
	n := len(zones.m)
	zones.Unlock()
	if n != 3 {
		t.Errorf("the cache holds %d names, want 3", n)
	}
	// FromSpec reports the bound as the field's error.
	if _, err := FromSpec(&v1alpha1.EnabledPeriod{TimeZone: names[3]}); err == nil || !strings.Contains(err.Error(), "enabledPeriod.timeZone") {
		t.Errorf("FromSpec past the bound: %v", err)
	}
}
