// Package regexbudget measures what a regular expression of a
// probeResponse rule would cost to compile and keep, before it is compiled.
//
// Go's regexp refuses only programs past about 3 million instructions
// (128 MiB); below that, a 3,000-character group repeated {1000} compiles
// to some 120 MiB, and every resolver replica compiles every ElastiService's
// rules. So the cost is measured on the parse tree, arithmetically, with
// repeats multiplied as Simplify would expand them, and the measurement
// stops as soon as it passes the budget: nothing is ever expanded or
// compiled to find out. The operator's validation and the resolver charge
// the same budget through this one package, so they refuse the same
// patterns.
//
// The budget bounds memory; MaxInput bounds time. Go's regexp runs in time
// linear in program size times input, but a request's header values may
// together be 64 KiB, and the largest expression the budget allows took
// some 200 ms of CPU on such a value. A probe rule's expression therefore
// reads at most MaxInput bytes per condition and request, and matching CPU
// per request is bounded by the budget's program size times MaxInput.
package regexbudget

import (
	"fmt"
	"regexp/syntax"
	"unicode/utf8"

	"github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

const (
	// perRegexp is charged for every expression on top of its program: the
	// resolver's anchoring ^(?:…)$ adds six instructions, and a compiled
	// regexp.Regexp holds about a kilobyte however small its program is.
	perRegexp = 16
	// runesPerUnit: a character class compiles to one instruction that
	// keeps its ranges; \pL alone has 1,318 runes (about 5 KiB, kept two
	// or three times over), so large classes are charged by their size.
	runesPerUnit = 8
)

// MaxInput is the most bytes a probe rule's regular expression reads
// for one condition of one request: a value longer than what is left of
// it does not match, and is not read at all.
//
// Measured (BenchmarkWorstCaseRegexp, pkg/resolver, docs/benchmarks.md):
// the costliest expression the budget allows that we know of,
// (?s:.*a){60}, costs about a microsecond a byte: some 200 ms on 64 KiB,
// about 0.5 ms on 512 bytes. Probe values are short: the User-Agents of
// kube-probe, load balancers' and uptime checkers' health checks are under
// 100 bytes, a browser's under 300, and health paths shorter still, so
// 512 bytes reads every real probe value whole and bounds the worst case
// at about half a millisecond per condition.
//
// Not matching is the safe side: a probe rule answers without waking, so
// a value it did not read is treated as one no rule names, held and woken
// for like any other request. Matching on a prefix instead would let a
// rule answer a value it does not match whole.
const MaxInput = 512

// Budget is what is left of one ElastiService's allowance for regular
// expressions. The zero value has nothing left.
type Budget struct {
	left int64
}

// ForElastiService returns the allowance of one ElastiService,
// v1alpha1.MaxProbeRegexpCost.
func ForElastiService() *Budget {
	return &Budget{left: v1alpha1.MaxProbeRegexpCost}
}

// Left returns what is left.
func (b *Budget) Left() int64 { return b.left }

// Charge checks pattern and takes its cost from b. A pattern longer than
// v1alpha1.MaxProbeValueLength characters, one that does not parse as regexp.Compile
// parses it, or one that costs more than is left is refused, and b is left
// as it was. The error says which, without repeating the pattern.
func (b *Budget) Charge(pattern string) error {
	// Checked before parsing: an older CRD lets through values of any
	// length, and parsing costs memory in proportion.
	if n := utf8.RuneCountInString(pattern); n > v1alpha1.MaxProbeValueLength {
		return fmt.Errorf("regular expression of %d characters is longer than %d", n, v1alpha1.MaxProbeValueLength)
	}
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return err
	}
	c := cost(re, b.left-perRegexp) + perRegexp
	if c > b.left {
		return fmt.Errorf("regular expression is too large: its compiled program would cost more than the %d left of the %d allowed for the regular expressions of one ElastiService",
			b.left, v1alpha1.MaxProbeRegexpCost)
	}
	b.left -= c
	return nil
}

// cost returns the size of the program re compiles to, counted as
// regexp/syntax's own size check counts it (parse.go, calcSize), with large
// character classes charged by their ranges. Once the size passes limit it
// returns at once some value above limit, so neither time nor the numbers
// grow with what a repeat would expand to. Parse bounds the tree's depth
// (1,000), so the recursion is bounded too.
func cost(re *syntax.Regexp, limit int64) int64 {
	over := limit + 1
	if limit < 0 {
		return over
	}
	var n int64
	switch re.Op {
	case syntax.OpLiteral:
		n = int64(len(re.Rune))
	case syntax.OpCharClass:
		n = 1 + int64(len(re.Rune))/runesPerUnit
	case syntax.OpCapture, syntax.OpStar:
		n = 2 + cost(re.Sub[0], limit-2)
	case syntax.OpPlus, syntax.OpQuest:
		n = 1 + cost(re.Sub[0], limit-1)
	case syntax.OpConcat, syntax.OpAlternate:
		if re.Op == syntax.OpAlternate {
			n = int64(len(re.Sub)) - 1
		}
		for _, sub := range re.Sub {
			if n > limit {
				return over
			}
			n += cost(sub, limit-n)
		}
	case syntax.OpRepeat:
		// Simplify's expansion, counted as calcSize counts it: x{0,} is
		// x*, x{n,} is x n-1 times then x+, x{n,m} is x n times then m-n
		// nested (x)?, and x{0} matches the empty string.
		count, extra := int64(re.Max), int64(re.Max-re.Min)
		switch {
		case re.Max == 0:
			return 1
		case re.Max == -1 && re.Min == 0:
			count, extra = 1, 2
		case re.Max == -1:
			count, extra = int64(re.Min), 1
		}
		sub := cost(re.Sub[0], limit/count)
		if sub > limit/count {
			return over
		}
		n = count*sub + extra
	}
	if n > limit {
		return over
	}
	return max(1, n)
}
