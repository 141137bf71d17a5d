// Package command is the skeleton both elasti binaries share: klog's flags
// beside their own, validation before anything starts, and a context that
// ends on SIGTERM or SIGINT so shutdown is graceful.
package command

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"

	"k8s.io/klog/v2"
)

// BindFunc registers a command's flags on fs, with defaults read through
// getenv, and returns its options and a check to run once flags are parsed.
type BindFunc[O any] func(fs *flag.FlagSet, getenv func(string) string) (O, func() error)

// Parse binds flags on fs, parses args and runs the check: the path Main
// takes, which tests call with their own flag set and environment.
func Parse[O any](fs *flag.FlagSet, bind BindFunc[O], getenv func(string) string, args []string) (O, error) {
	opts, finish := bind(fs, getenv)
	if err := fs.Parse(args); err != nil {
		return opts, err
	}
	return opts, finish()
}

// KlogHeading introduces klog's flags in -h output, after the command's own.
const KlogHeading = "Logging flags (klog):"

// ErrVersion is what Parse returns for --version, instead of checking the
// configuration: Main then prints VersionLine and exits 0, as the flag
// package does for -h with flag.ErrHelp.
var ErrVersion = errors.New("version requested")

// WithKlog returns bind with a --version flag and klog's flags registered
// after bind's, and a -h (fs.Usage) that prints summary (one line: what the
// command does), a usage line, bind's flags and --version, and then klog's
// flags under KlogHeading.
func WithKlog[O any](name, summary string, bind BindFunc[O]) BindFunc[O] {
	return func(fs *flag.FlagSet, getenv func(string) string) (O, func() error) {
		before := map[string]bool{}
		fs.VisitAll(func(f *flag.Flag) { before[f.Name] = true })
		opts, check := bind(fs, getenv)
		showVersion := fs.Bool("version", false, "print the version and exit")
		var logFormat string
		finish := func() error {
			if *showVersion {
				return ErrVersion
			}
			v, err := strconv.Atoi(fs.Lookup("v").Value.String())
			if err != nil {
				return err
			}
			return errors.Join(useLogFormat(logFormat, v), check())
		}
		var own, logging, other []*flag.Flag
		fs.VisitAll(func(f *flag.Flag) {
			if !before[f.Name] {
				own = append(own, f)
			}
		})
		klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
		klog.InitFlags(klogFlags)
		klogFlags.VisitAll(func(f *flag.Flag) {
			fs.Var(f.Value, f.Name, f.Usage)
			logging = append(logging, fs.Lookup(f.Name))
		})
		fs.StringVar(&logFormat, LogFormatFlag, LogFormatText, "Log format: text (klog's) or json (one JSON object a line); -v sets the verbosity of both.")
		logging = append(logging, fs.Lookup(LogFormatFlag))
		// Flags some package registered on fs before us (none today).
		fs.VisitAll(func(f *flag.Flag) {
			if before[f.Name] {
				other = append(other, f)
			}
		})
		fs.Usage = func() {
			w := fs.Output()
			fmt.Fprintf(w, "%s\n\nUsage: %s [flags]\n\nFlags:\n", summary, name)
			printDefaults(w, own)
			fmt.Fprintf(w, "\n%s\n", KlogHeading)
			printDefaults(w, logging)
			if len(other) > 0 {
				fmt.Fprintf(w, "\nOther flags:\n")
				printDefaults(w, other)
			}
		}
		return opts, finish
	}
}

// printDefaults prints flags as flag.PrintDefaults does, with the defaults
// they were registered with.
func printDefaults(w io.Writer, flags []*flag.Flag) {
	sub := flag.NewFlagSet("", flag.ContinueOnError)
	sub.SetOutput(w)
	for _, f := range flags {
		sub.Var(f.Value, f.Name, f.Usage)
		sub.Lookup(f.Name).DefValue = f.DefValue
	}
	sub.PrintDefaults()
}

// Main parses the command line with bind's flags and klog's (see WithKlog
// for -h; summary says in one line what the command does), prints the
// version and exits for --version, exits 2 with the message if the
// configuration is bad, then logs its version and runs run until it returns
// or a termination signal ends its context; a run error exits 1.
func Main[O any](name, summary string, bind BindFunc[O], run func(ctx context.Context, opts O) error) {
	opts, err := Parse(flag.CommandLine, WithKlog(name, summary, bind), os.Getenv, os.Args[1:])
	if errors.Is(err, ErrVersion) {
		fmt.Println(VersionLine(name))
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: invalid configuration:\n%v\n", name, err)
		os.Exit(2)
	}
	CheckAPIServerConnections()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx = klog.NewContext(ctx, klog.Background())
	klog.FromContext(ctx).Info("Starting", "command", name, "version", Version(), "go", runtime.Version(),
		"apiserverHealthCheck", os.Getenv(envHTTP2ReadIdleTimeout)+"s idle, "+os.Getenv(envHTTP2PingTimeout)+"s ping")
	if err := run(ctx, opts); err != nil {
		klog.FromContext(ctx).Error(err, "Exiting on error", "command", name)
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	klog.Flush()
}
