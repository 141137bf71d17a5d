// Package command is the skeleton both elasti binaries share: klog's flags
// beside their own, validation before anything starts, and a context that
// ends on SIGTERM or SIGINT so shutdown is graceful.
package command

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
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

// Main parses the command line with bind's flags and klog's, exits 2 with
// the message if the configuration is bad, then runs run until it returns or
// a termination signal ends its context; a run error exits 1.
func Main[O any](name string, bind BindFunc[O], run func(ctx context.Context, opts O) error) {
	klog.InitFlags(flag.CommandLine)
	opts, err := Parse(flag.CommandLine, bind, os.Getenv, os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: invalid configuration:\n%v\n", name, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx = klog.NewContext(ctx, klog.Background())
	if err := run(ctx, opts); err != nil {
		klog.FromContext(ctx).Error(err, "Exiting on error", "command", name)
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	klog.Flush()
}
