package command_test

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/elasti-dev/elasti/pkg/command"
)

// bindFailing is a command whose configuration is always bad.
func bindFailing(fs *flag.FlagSet, _ func(string) string) (*string, func() error) {
	s := fs.String("required", "", "a flag that must be set")
	return s, func() error { return errors.New("--required is missing") }
}

// --version works whatever the rest of the configuration says, like -h.
func TestVersionSkipsTheConfigurationCheck(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	_, err := command.Parse(fs, command.WithKlog("x", "x does things.", bindFailing), func(string) string { return "" }, []string{"--version"})
	if !errors.Is(err, command.ErrVersion) {
		t.Fatalf("--version: got %v, want ErrVersion", err)
	}
	fs = flag.NewFlagSet("x", flag.ContinueOnError)
	_, err = command.Parse(fs, command.WithKlog("x", "x does things.", bindFailing), func(string) string { return "" }, nil)
	if err == nil || errors.Is(err, command.ErrVersion) {
		t.Fatalf("without --version the check must run; got %v", err)
	}
}

func TestHelpListsVersionAmongTheCommandsFlags(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	var out bytes.Buffer
	fs.SetOutput(&out)
	if _, err := command.Parse(fs, command.WithKlog("x", "x does things.", bindFailing), func(string) string { return "" }, []string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	help := out.String()
	v, k := strings.Index(help, "\n  -version"), strings.Index(help, command.KlogHeading)
	if v < 0 || k < 0 || v > k {
		t.Errorf("-version must be listed before %q:\n%s", command.KlogHeading, help)
	}
}

func TestVersionLine(t *testing.T) {
	got := command.VersionLine("elasti-operator")
	want := "elasti-operator " + command.Version() + " (" + runtime.Version() + ", " + runtime.GOOS + "/" + runtime.GOARCH + ")"
	if got != want {
		t.Errorf("VersionLine = %q, want %q", got, want)
	}
}

func TestBuildInfo(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(command.BuildInfo("elasti-resolver"))
	want := `
# HELP elasti_build_info Always 1; the labels say which elasti binary, release and Go version this process runs.
# TYPE elasti_build_info gauge
elasti_build_info{binary="elasti-resolver",goversion="` + runtime.Version() + `",version="` + command.Version() + `"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "elasti_build_info"); err != nil {
		t.Error(err)
	}
}

// The linker flag make build and the Dockerfile pass really sets what
// --version, the startup log and elasti_build_info report: -X on a name
// that does not exist is silently ignored, so a renamed variable would
// leave every release reporting "devel".
func TestLinkerFlagSetsTheVersion(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "elasti-resolver")
	const v = "v9.8.7-linkercheck"
	// -trimpath, as make test's own builds: a checkout in a new directory
	// (CI clones anew) reuses the compiled packages.
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-X "+command.VersionVariable+"="+v, "-o", bin, "./cmd/elasti-resolver")
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	run := exec.Command(bin, "--version")
	// The configuration is not read for --version: a bad one must not matter.
	run.Env = append(os.Environ(), "REQ_TIMEOUT=not-a-duration")
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("elasti-resolver --version: %v\n%s", err, out)
	}
	if got, want := strings.TrimSpace(string(out)), "elasti-resolver "+v+" ("; !strings.HasPrefix(got, want) {
		t.Errorf("elasti-resolver --version printed %q, want it to start with %q", got, want)
	}
}
