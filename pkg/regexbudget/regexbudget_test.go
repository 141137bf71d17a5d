package regexbudget

import (
	"math"
	"regexp"
	"regexp/syntax"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

// The attack measured before this package existed: a 3,000-character group
// repeated {1000}, accepted by Go's regexp, compiled to about 120 MiB.
var attack = "(" + strings.Repeat("ab", 1500) + "){1000}"

// Ordinary health-check expressions, each of which must fit many times over.
var ordinary = []string{
	`^/health(z)?$`,
	`/api/v[0-9]+/.*`,
	`kube-probe/.*`,
	`(?i)^elb-healthchecker/2\.0$`,
	`/(healthz|readyz|livez)`,
	`GoogleHC/1\.0`,
	`[a-z0-9-]+`,
	`\d+`,
}

// Too large for one ElastiService's budget, yet within the CRD's length
// bound and accepted by Go's own parser.
var tooLarge = []string{
	"(" + strings.Repeat("a", 100) + "){1000}",
	`(((a{10}){10}){10})`,
	`((a{30}){30})`,
	`(\pL{10}){10}`,
	strings.Repeat(`[\pL\pN]`, 16),
	`.{600}`,
	`(x+y*z?){200}`,
}

func TestOrdinaryPatternsFit(t *testing.T) {
	for _, p := range ordinary {
		b := ForElastiService()
		if err := b.Charge(p); err != nil {
			t.Errorf("%q refused: %v", p, err)
			continue
		}
		if spent := v1alpha1.MaxProbeRegexpCost - b.Left(); spent > 64 {
			t.Errorf("%q costs %d; an ordinary expression should cost at most 64", p, spent)
		}
	}
	// A spec at MaxProbeRules, each with a path expression, fits, and so
	// does one with four rules each matching a path and a User-Agent.
	for _, spec := range [][]string{
		repeat([]string{`/health(z)?`}, v1alpha1.MaxProbeRules),
		repeat([]string{`/health(z)?`, `kube-probe/.*`}, 4),
	} {
		b := ForElastiService()
		for i, p := range spec {
			if err := b.Charge(p); err != nil {
				t.Fatalf("expression %d of %d: %q refused with %d left: %v", i, len(spec), p, b.Left(), err)
			}
		}
	}
}

func repeat(s []string, n int) []string {
	var out []string
	for range n {
		out = append(out, s...)
	}
	return out
}

func TestLargePatternsAreRefusedQuicklyAndCheaply(t *testing.T) {
	cases := append([]string{attack}, tooLarge...)
	for _, p := range cases {
		b := ForElastiService()
		var err error
		start := time.Now()
		allocated := bytesAllocated(func() { err = b.Charge(p) })
		took := time.Since(start)
		if err == nil {
			t.Errorf("%.40q accepted", p)
			continue
		}
		if b.Left() != v1alpha1.MaxProbeRegexpCost {
			t.Errorf("%.40q: refused, yet %d was charged", p, v1alpha1.MaxProbeRegexpCost-b.Left())
		}
		// Compiling the attack takes ~120 MiB and seconds; measuring it
		// must take what parsing takes: a few KiB, some 400 KiB of garbage
		// for a pattern of Unicode classes, never kept. The attack is
		// refused by its length before it is parsed.
		if allocated > 1<<20 || took > time.Second {
			t.Errorf("%.40q: refusing it allocated %d bytes in %s", p, allocated, took)
		}
		if strings.Contains(err.Error(), "aaaa") || strings.Contains(err.Error(), "abab") {
			t.Errorf("%.40q: the error repeats the pattern: %v", p, err)
		}
	}
}

// Nested repeats multiply: a 24-byte pattern would be a billion
// instructions. Go's parser refuses this one by itself; the measure must
// not need that, so it is run on the parse tree of a nest Go accepts, and
// on a synthetic one Go's parser would refuse.
func TestNestedRepeatsMultiplyWithoutOverflow(t *testing.T) {
	if _, err := syntax.Parse(`((a{1000}){1000}){1000}`, syntax.Perl); err == nil {
		t.Fatal("Go's parser accepts ((a{1000}){1000}){1000}")
	}
	if err := ForElastiService().Charge(`((a{1000}){1000}){1000}`); err == nil {
		t.Error("((a{1000}){1000}){1000} accepted")
	}
	// Built by hand: 30 nested {1000} repeats, 10^90 instructions.
	re := &syntax.Regexp{Op: syntax.OpLiteral, Rune: []rune("ab")}
	for range 30 {
		re = &syntax.Regexp{Op: syntax.OpRepeat, Min: 1000, Max: 1000, Sub: []*syntax.Regexp{re}}
	}
	var got int64
	// Counted by testing.AllocsPerRun: the runtime's own TotalAlloc is the
	// whole process's, and a background allocation of the test binary was
	// once charged to this measure (CI, stop 44: 5,576 bytes). Averaged
	// over runs, a stray allocation rounds away; one of the measure's own
	// would not.
	allocs := testing.AllocsPerRun(100, func() { got = cost(re, 512) })
	if got <= 512 {
		t.Errorf("cost of 30 nested {1000} = %d, want above the limit", got)
	}
	if allocs > 0 {
		t.Errorf("measuring allocated %v times a run", allocs)
	}
	if c := cost(re, math.MaxInt64/2); c <= 0 {
		t.Errorf("cost with a huge limit = %d: overflowed", c)
	}
}

// The measure is an upper bound of what regexp.Compile makes of the
// resolver's anchored form, so the budget bounds what is really kept.
func TestCostBoundsTheCompiledProgram(t *testing.T) {
	patterns := append(append([]string{}, ordinary...), tooLarge...)
	patterns = append(patterns,
		`a*`, `a+`, `a?`, `a{0}`, `a{0,}`, `a{3,}`, `a{2,5}`, `(a|b|c)*`, `(?:ab)+?`, `x{1,3}y{0,2}`,
		`^$`, `\b\B`, `(?s).`, `[^/]+/[^/]+`, `(a(b(c(d)?)?)?)?`, `(?i)kube-PROBE`, `\pL`, `[\pL\pN]{3}`,
		"("+strings.Repeat("a", 1000)+"){1000}", strings.Repeat("a", 1024))
	for _, p := range patterns {
		re, err := syntax.Parse(p, syntax.Perl)
		if err != nil {
			t.Fatalf("%.40q: %v", p, err)
		}
		est := cost(re, math.MaxInt64/2) + perRegexp
		anchored, err := syntax.Parse("^(?:"+p+")$", syntax.Perl)
		if err != nil {
			t.Fatal(err)
		}
		prog, err := syntax.Compile(anchored.Simplify())
		if err != nil {
			t.Fatal(err)
		}
		if est < int64(len(prog.Inst)) {
			t.Errorf("%.40q: cost %d, but the anchored program has %d instructions", p, est, len(prog.Inst))
		}
	}
}

// Charging takes from what is left, and a refused pattern takes nothing.
func TestChargeAccumulates(t *testing.T) {
	b := ForElastiService()
	n := 0
	for b.Charge(`/health(z)?`) == nil {
		n++
		if n > v1alpha1.MaxProbeRegexpCost {
			t.Fatal("the budget never runs out")
		}
	}
	left := b.Left()
	if left < 0 || left >= v1alpha1.MaxProbeRegexpCost {
		t.Fatalf("%d left after %d charges", left, n)
	}
	if err := b.Charge(`(`); err == nil || !strings.Contains(err.Error(), "missing closing )") {
		t.Errorf("a bad pattern: %v, want the parser's error", err)
	}
	if err := b.Charge(strings.Repeat("a", v1alpha1.MaxProbeValueLength+1)); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("an overlong pattern: %v", err)
	}
	if b.Left() != left {
		t.Errorf("refusals took %d", left-b.Left())
	}
	if _, err := regexp.Compile(`/health(z)?`); err != nil {
		t.Fatal(err)
	}
}

func bytesAllocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
