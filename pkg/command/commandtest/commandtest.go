// Package commandtest checks what both elasti binaries show their users:
// the -h output and the README's flag tables; and FreezingProxy cuts
// their apiserver connections without closing them.
package commandtest

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"

	"k8s.io/klog/v2"

	"github.com/elasti-dev/elasti/pkg/command"
)

// OwnFlags returns the names of the flags bind defines, klog's excluded.
func OwnFlags[O any](bind command.BindFunc[O]) []string {
	fs := flag.NewFlagSet("own", flag.ContinueOnError)
	bind(fs, func(string) string { return "" })
	return names(fs)
}

// KlogFlags returns the names of klog's flags.
func KlogFlags() []string {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	return names(fs)
}

func names(fs *flag.FlagSet) []string {
	var n []string
	fs.VisitAll(func(f *flag.Flag) { n = append(n, f.Name) })
	return n
}

// Help returns what -h prints for the command Main(name, summary, bind)
// runs, through the same flag set setup.
func Help[O any](t testing.TB, name, summary string, bind command.BindFunc[O]) string {
	t.Helper()
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	var out bytes.Buffer
	fs.SetOutput(&out)
	if _, err := command.Parse(fs, command.WithKlog(name, summary, bind), func(string) string { return "" }, []string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: got error %v, want flag.ErrHelp", err)
	}
	return out.String()
}

var flagLine = regexp.MustCompile(`^  -([^ ]+)`)

// CheckHelp fails t unless -h starts with summary, then a usage line, then
// lists every flag of bind before klog's heading and every klog flag after.
func CheckHelp[O any](t testing.TB, name, summary string, bind command.BindFunc[O]) {
	t.Helper()
	out := Help(t, name, summary, bind)
	lines := strings.Split(out, "\n")
	if lines[0] != summary {
		t.Errorf("-h starts with %q, want the summary %q", lines[0], summary)
	}
	usage := -1
	heading := -1
	at := map[string]int{}
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, "Usage: "+name+" ") && usage < 0:
			usage = i
		case l == command.KlogHeading:
			heading = i
		}
		if m := flagLine.FindStringSubmatch(l); m != nil {
			at[m[1]] = i
		}
	}
	if usage < 0 || usage > 3 {
		t.Errorf("no usage line right after the summary:\n%s", out)
	}
	if heading < 0 {
		t.Fatalf("-h has no %q heading:\n%s", command.KlogHeading, out)
	}
	own := OwnFlags(bind)
	if len(own) == 0 {
		t.Fatal("the command defines no flags")
	}
	for _, f := range own {
		if i, ok := at[f]; !ok || i < usage || i > heading {
			t.Errorf("own flag -%s is not listed between the usage line and %q", f, command.KlogHeading)
		}
	}
	for _, f := range KlogFlags() {
		if i, ok := at[f]; !ok || i < heading {
			t.Errorf("klog flag -%s is not listed after %q", f, command.KlogHeading)
		}
	}
}

var tableFlag = regexp.MustCompile("`--([A-Za-z0-9_-]+)`")

// ReadmeTableFlags returns the flags (`--name`) in the first column of the
// tables in the section of the Markdown file readme that starts with the
// line heading ("## The operator"), up to the next heading of its level or
// higher.
func ReadmeTableFlags(t testing.TB, readme, heading string) map[string]bool {
	t.Helper()
	src, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	level := strings.Index(heading, " ")
	if level < 1 || strings.Trim(heading[:level], "#") != "" {
		t.Fatalf("%q is not a Markdown heading", heading)
	}
	flags := map[string]bool{}
	in, found := false, false
	for line := range strings.Lines(string(src)) {
		line = strings.TrimRight(line, "\r\n")
		if in {
			if h := strings.Index(line, " "); h > 0 && h <= level && strings.Trim(line[:h], "#") == "" {
				break
			}
			if cells := strings.Split(strings.TrimSpace(line), "|"); strings.HasPrefix(strings.TrimSpace(line), "|") && len(cells) > 2 {
				for _, m := range tableFlag.FindAllStringSubmatch(cells[1], -1) {
					flags[m[1]] = true
				}
			}
		}
		if line == heading {
			in, found = true, true
		}
	}
	if !found {
		t.Fatalf("%s has no section %q", readme, heading)
	}
	return flags
}

// CheckReadmeFlagTable fails t unless the flag tables of readme's section
// heading list every flag bind defines (klog's excluded) and no other.
func CheckReadmeFlagTable[O any](t testing.TB, readme, heading string, bind command.BindFunc[O]) {
	t.Helper()
	listed := ReadmeTableFlags(t, readme, heading)
	defined := map[string]bool{}
	for _, f := range OwnFlags(bind) {
		defined[f] = true
		if !listed[f] {
			t.Errorf("flag --%s is missing from the flag table of %q in %s", f, heading, readme)
		}
	}
	for f := range listed {
		if !defined[f] {
			t.Errorf("the flag table of %q in %s lists --%s, which the binary does not define", heading, readme, f)
		}
	}
}
