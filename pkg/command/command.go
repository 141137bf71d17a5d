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

// Main parses the command line with bind's flags and klog's, exits 2 with
// the message if finish reports bad configuration, then runs run until it
// returns or a termination signal ends its context; a run error exits 1.
func Main(name string, bind func(fs *flag.FlagSet) (finish func() error), run func(ctx context.Context) error) {
	klog.InitFlags(flag.CommandLine)
	finish := bind(flag.CommandLine)
	flag.Parse()
	if err := finish(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: invalid configuration:\n%v\n", name, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx = klog.NewContext(ctx, klog.Background())
	if err := run(ctx); err != nil {
		klog.FromContext(ctx).Error(err, "Exiting on error", "command", name)
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	klog.Flush()
}
